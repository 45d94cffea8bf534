package synthesis

import (
	"context"
	"sync"
	"time"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/schemas/ids"
)

// limiter enforces design §14's concurrency bounds: at most n windows at once in this
// process, and at most one per workspace. A window takes its workspace's lock first and
// a global slot second, so a window waiting behind another of its workspace holds no
// global slot.
type limiter struct {
	slots chan struct{}

	mu    sync.Mutex
	locks map[ids.WorkspaceID]*wsLock
}

type wsLock struct {
	ch   chan struct{} // holds one token while the workspace is locked
	refs int           // holders and waiters; the entry is dropped at zero
}

func newLimiter(n int) *limiter {
	return &limiter{slots: make(chan struct{}, n), locks: make(map[ids.WorkspaceID]*wsLock)}
}

// acquire blocks until the workspace is free and a global slot is available, or ctx
// ends. The returned release must be called exactly once.
func (l *limiter) acquire(ctx context.Context, ws ids.WorkspaceID) (release func(), err error) {
	l.mu.Lock()
	wl := l.locks[ws]
	if wl == nil {
		wl = &wsLock{ch: make(chan struct{}, 1)}
		l.locks[ws] = wl
	}
	wl.refs++
	l.mu.Unlock()

	drop := func() {
		l.mu.Lock()
		wl.refs--
		if wl.refs == 0 {
			delete(l.locks, ws)
		}
		l.mu.Unlock()
	}
	select {
	case wl.ch <- struct{}{}:
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		<-wl.ch
		drop()
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-l.slots
			<-wl.ch
			drop()
		})
	}, nil
}

// inUse reports the global slots taken (for the in-flight gauge and tests).
func (l *limiter) inUse() int { return len(l.slots) }

// retryDelay is an exponential backoff with jitter: the n-th delay is drawn from
// [d/2, d] where d = min·2ⁿ capped at max.
type retryDelay struct {
	min, max time.Duration
	n        int
}

func (b *retryDelay) next() time.Duration {
	d := b.min
	for i := 0; i < b.n && d < b.max; i++ {
		d *= 2
	}
	b.n++
	return backoff.Jitter(min(d, b.max))
}

func (b *retryDelay) reset() { b.n = 0 }
