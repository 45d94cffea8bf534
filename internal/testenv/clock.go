package testenv

import (
	"sync"
	"time"
)

// Clock is a wall clock the test moves by hand: pass its Now where a component
// takes a `func() time.Time`. It only answers Now; nothing fires when it moves.
// Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
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
