package postgres

import (
	"math/rand/v2"
	"time"
)

// backoff is a bounded exponential backoff with jitter for one dependency. Its state
// survives batches: an outage that outlasts a rebalance keeps its long pauses, and
// the first success resets it.
type backoff struct {
	min, max time.Duration
	cur      time.Duration // the ceiling of the last pause; 0 after a success
	n        int           // consecutive failures
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max} }

// next returns the pause after one more failure: the ceiling doubles from min up to
// max, and the pause is drawn uniformly from [ceiling/2, ceiling] ("equal jitter"),
// so instances that failed together do not retry together, yet every pause is at
// least half the ceiling.
func (b *backoff) next() time.Duration {
	b.n++
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur >= b.max/2:
		b.cur = b.max
	default:
		b.cur *= 2
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

// failures is the number of consecutive failures since the last success.
func (b *backoff) failures() int { return b.n }

// reset records a success.
func (b *backoff) reset() { b.cur, b.n = 0, 0 }
