package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrAlreadyRunning is returned (wrapped with the part's name) by Run when the part's
// rule refuses a second Run: another Run is active, or, for a Once part, Run was
// called before. Parts export it under the same name.
var ErrAlreadyRunning = errors.New("already running")

// Rule says how often a part may run.
type Rule int

const (
	// Once: Run may be called once in the part's life (it consumes state, such as a
	// Kafka client or a claimed lease, that a second Run cannot rebuild).
	Once Rule = iota
	// OneAtATime: Run may be called again after the previous Run returned, never
	// while one is active.
	OneAtATime
)

// State is one part's run state. The zero value is not usable: make it with New.
// Its methods are safe for concurrent use.
type State struct {
	name      string
	rule      Rule
	errClosed error

	mu      sync.Mutex
	running bool
	ran     bool
	closed  bool
	// cancels ends the context of each call (Run or entered) that has not ended;
	// Close calls them before it waits, so they are done when its cancel step is.
	cancels map[*int]context.CancelFunc
	calls   sync.WaitGroup // calls that have not ended; Add under mu
}

// New returns the run state of the part called name (used in error text). errClosed
// is the part's own sentinel for "used after Close", which its other methods return
// too and which callers may classify, so it is returned as it is.
func New(name string, rule Rule, errClosed error) *State {
	if errClosed == nil {
		errClosed = fmt.Errorf("%s: closed", name)
	}
	return &State{name: name, rule: rule, errClosed: errClosed, cancels: map[*int]context.CancelFunc{}}
}

// Begin starts Run when the part's rule allows it. It returns a context that ends
// when ctx ends or Close is called, and end, which Run must call when it returns
// (end is idempotent). It returns the part's closed error after Close, and an error
// wrapping ErrAlreadyRunning when the rule refuses.
func (s *State) Begin(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ctx, func() {}, s.errClosed
	case s.running, s.rule == Once && s.ran:
		return ctx, func() {}, fmt.Errorf("%s: %w", s.name, ErrAlreadyRunning)
	}
	s.running, s.ran = true, true
	return s.track(ctx, func() { s.running = false })
}

// Enter registers a call other than Run that Close must end and wait for. It
// returns a context that ends when ctx ends or Close is called, and leave, which
// the call must make when it returns (leave is idempotent); after Close it returns
// the part's closed error.
func (s *State) Enter(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ctx, func() {}, s.errClosed
	}
	return s.track(ctx, nil)
}

// track counts one call until its end; s.mu must be held. onEnd runs under s.mu.
func (s *State) track(ctx context.Context, onEnd func()) (context.Context, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	key := new(int)
	s.cancels[key] = cancel
	s.calls.Add(1)
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel()
			s.mu.Lock()
			delete(s.cancels, key)
			if onEnd != nil {
				onEnd()
			}
			s.mu.Unlock()
			s.calls.Done()
		})
	}, nil
}

// Running reports whether a Run is active.
func (s *State) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Closed reports whether Close was called.
func (s *State) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close marks the part closed, ends the context of a running Run and of every
// entered call, and waits until each has ended. It reports whether this was the
// first Close, the one that must release the part's resources. A later Close also
// waits for them.
func (s *State) Close() (first bool) {
	s.mu.Lock()
	first = !s.closed
	s.closed = true
	cancels := make([]context.CancelFunc, 0, len(s.cancels))
	for _, c := range s.cancels {
		cancels = append(cancels, c)
	}
	s.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	s.calls.Wait()
	return first
}
