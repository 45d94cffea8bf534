package testenv

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is a wall clock the test moves by hand: pass its Now where a component
// takes a `func() time.Time`. Nothing fires when it moves. Its Sleep, for a
// component that takes an injected sleep, waits for nothing: it records the wait
// and moves the clock by it. Safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

// NewClock returns a Clock that reads at until the test moves it.
func NewClock(at time.Time) *Clock { return &Clock{now: at} }

// Now returns the time the test last set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to at (forwards or back).
func (c *Clock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
}

// Advance moves the clock d forwards.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep records d and moves the clock d forwards, at once; when ctx is already
// done it returns ctx's error and records nothing.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

// Sleeps returns the waits Sleep was asked for, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}
