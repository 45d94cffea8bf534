package testenv

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually asks its condition again.
const PollInterval = 5 * time.Millisecond

// Eventually polls cond every PollInterval until it holds, and fails the test
// with "timed out after <within> waiting for <what>" once within has passed. The
// bound only keeps a broken test from hanging; it is never a timed assertion.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}
