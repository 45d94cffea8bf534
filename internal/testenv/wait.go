package testenv

import (
	"errors"
	"testing"
	"time"
)

// PollInterval is how often Eventually and EventuallyNil ask their condition again.
const PollInterval = 5 * time.Millisecond

// errNotYet is what a false Eventually condition counts as.
var errNotYet = errors.New("condition false")

// Eventually polls cond every PollInterval until it holds, and fails the test
// with "timed out after <within> waiting for <what>" once within has passed. The
// bound only keeps a broken test from hanging; it is never a timed assertion.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyNil(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// EventuallyNil is Eventually for a check that says why it does not hold yet: it
// polls check until it returns nil, and on timeout fails the test with the last
// error check returned (the state the wait ended in).
func EventuallyNil(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if errors.Is(err, errNotYet) {
				t.Fatalf("timed out after %s waiting for %s", within, what)
			}
			t.Fatalf("timed out after %s waiting for %s: %v", within, what, err)
		}
		<-tick.C
	}
}
