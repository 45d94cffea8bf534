package lifecycle

import (
	"errors"
	"fmt"
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
// Its methods are not safe for concurrent use; call them under the owner's mutex.
type State struct {
	name            string
	rule            Rule
	errClosed       error
	running, closed bool
	ran             bool
}

// New returns the run state of the part called name (used in error text). errClosed
// is the part's own sentinel for "used after Close", which its other methods return
// too and which callers may classify, so it is returned as it is.
func New(name string, rule Rule, errClosed error) State {
	if errClosed == nil {
		errClosed = fmt.Errorf("%s: closed", name)
	}
	return State{name: name, rule: rule, errClosed: errClosed}
}

// Begin reports whether Run may start now and, when it may, marks it running. It
// returns the part's closed error after Close, and an error wrapping
// ErrAlreadyRunning when the rule refuses.
func (s *State) Begin() error {
	switch {
	case s.closed:
		return s.errClosed
	case s.running, s.rule == Once && s.ran:
		return fmt.Errorf("%s: %w", s.name, ErrAlreadyRunning)
	}
	s.running, s.ran = true, true
	return nil
}

// End marks the Run that Begin allowed as returned.
func (s *State) End() { s.running = false }

// Running reports whether a Run is active.
func (s *State) Running() bool { return s.running }

// Close marks the part closed and reports whether this was the first Close, the one
// that must release its resources.
func (s *State) Close() (first bool) {
	if s.closed {
		return false
	}
	s.closed = true
	return true
}

// Closed reports whether Close was called.
func (s *State) Closed() bool { return s.closed }
