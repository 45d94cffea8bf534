package conformance

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Component is what every long-running part of larkline is (D29).
type Component interface {
	Run(ctx context.Context) error
	Close() error
}

// CloseStopsRun checks the component contract of D29 on c, which must not have run:
// Close ends a running Run and returns only after it did (running, the part's own
// "is Run active?", is false when Close returns), Run then returns nil, a second
// Close returns nil, and Run after Close returns errClosed.
func CloseStopsRun(t *testing.T, c Component, running func() bool, errClosed error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	deadline := time.Now().Add(WaitLimit)
	for !running() {
		if time.Now().After(deadline) {
			t.Fatalf("Run did not start within %s", WaitLimit)
		}
		time.Sleep(time.Millisecond) // Run starts on its own goroutine
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if running() {
		t.Fatal("Close returned while Run was still running")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after Close", err)
		}
	case <-time.After(WaitLimit): // a deadline for a hang, not a wait
		t.Fatal("Run did not return after Close")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Run(context.Background()); !errors.Is(err, errClosed) {
		t.Fatalf("Run after Close = %v, want %v", err, errClosed)
	}
}
