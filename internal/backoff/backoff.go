package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d or until ctx is done, whichever is first, and returns ctx's error in
// the second case. A d of zero or less waits nothing and returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Jitter returns a random duration in [d/2, d] (equal jitter); d itself when d is
// at most one nanosecond.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
