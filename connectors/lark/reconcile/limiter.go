package reconcile

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/options"
)

// LimiterOptions configure a Limiter.
type LimiterOptions struct {
	// RequestsPerSecond is the sustained rate, in (0, MaxRequestsPerSecond].
	RequestsPerSecond float64
	// Burst is the bucket size, at least 1.
	Burst int
	// Clock and Sleep default to time.Now and a context-aware timer.
	Clock func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Limiter is the client-side rate limit of one Lark app: a token bucket that
// every Open API call of the process waits on, and that a rate-limit answer from
// Lark pauses for every caller at once (Pause). It is safe for concurrent use.
type Limiter struct {
	rate  float64
	burst float64
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu          sync.Mutex
	tokens      float64
	last        time.Time
	pausedUntil time.Time
}

// NewLimiter validates opts and returns a full bucket.
func NewLimiter(opts LimiterOptions) (*Limiter, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = backoff.Sleep
	}
	return &Limiter{
		rate: opts.RequestsPerSecond, burst: float64(opts.Burst), now: opts.Clock, sleep: opts.Sleep,
		tokens: float64(opts.Burst), last: opts.Clock(),
	}, nil
}

// Wait takes one token, waiting as long as the bucket (or a pause) requires. It
// returns ctx's error when ctx ends first; the token is then given back.
func (l *Limiter) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := l.reserve()
	if d <= 0 {
		return nil
	}
	if err := l.sleep(ctx, d); err != nil {
		l.mu.Lock()
		l.tokens = min(l.tokens+1, l.burst)
		l.mu.Unlock()
		return err
	}
	return nil
}

// reserve takes a token (the bucket may go negative: a debt later callers wait
// for) and returns how long the caller must wait before using it.
func (l *Limiter) reserve() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if elapsed := now.Sub(l.last); elapsed > 0 {
		l.tokens = min(l.burst, l.tokens+elapsed.Seconds()*l.rate)
		l.last = now
	}
	l.tokens--
	var wait time.Duration
	if l.tokens < 0 {
		wait = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	if p := l.pausedUntil.Sub(now); p > 0 {
		wait += p
	}
	return wait
}

// Pause makes every caller wait until at least until, and empties the bucket so
// that the callers do not burst when the pause ends. A pause never shortens an
// earlier one.
func (l *Limiter) Pause(until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	if l.tokens > 0 {
		l.tokens = 0
	}
	if until.After(l.last) {
		l.last = until // no refill during the pause
	}
}

// retryDelay returns the wait before retry attempt+1 of a call that failed with a
// retryable answer: exponential from minB, capped at maxB, with equal jitter (a
// uniform value in [d/2, d]), and never shorter than retryAfter (Lark's
// x-ogw-ratelimit-reset, itself capped at larkapi.MaxRetryAfter).
func retryDelay(attempt int, minB, maxB, retryAfter time.Duration, jitter func() float64) time.Duration {
	d := maxB
	if attempt < 30 {
		if e := minB << attempt; e > 0 && e < maxB {
			d = e
		}
	}
	half := d / 2
	d = half + time.Duration(jitter()*float64(d-half))
	retryAfter = min(retryAfter, larkapi.MaxRetryAfter)
	return max(d, retryAfter)
}

func defaultJitter() float64 { return rand.Float64() }

// check reports every broken rule of the rate and burst.
func (opts LimiterOptions) check() error {
	p := new(options.Problems)
	opts.problems(p)
	return p.Err(ErrInvalidOptions)
}

// problems adds the broken rules of the rate and burst to p.
func (opts LimiterOptions) problems(p *options.Problems) {
	if math.IsNaN(opts.RequestsPerSecond) || opts.RequestsPerSecond <= 0 || opts.RequestsPerSecond > MaxRequestsPerSecond {
		p.Add("RequestsPerSecond", opts.RequestsPerSecond, "must be above 0 and at most %d, Lark's documented per-app limit for the message history API", MaxRequestsPerSecond)
	}
	if opts.Burst < 1 || opts.Burst > 10_000 {
		p.Add("Burst", opts.Burst, "must be between 1 and 10000")
	}
}
