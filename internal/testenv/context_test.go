package testenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv"
)

// TestContextEndsAtItsBound: the context's deadline is its bound, and it ends with
// DeadlineExceeded once that has passed.
func TestContextEndsAtItsBound(t *testing.T) {
	before := time.Now()
	ctx := testenv.Context(t, 50*time.Millisecond)
	deadline, ok := ctx.Deadline()
	if !ok || deadline.Before(before.Add(50*time.Millisecond)) || deadline.After(time.Now().Add(50*time.Millisecond)) {
		t.Fatalf("deadline %v (set %v), want 50ms after the call", deadline, ok)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the context did not end within a minute of its 50ms bound")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ctx.Err() = %v, want DeadlineExceeded", ctx.Err())
	}
}

// TestContextEndsWithTheTest: a context whose bound has not passed is cancelled at
// the test's cleanup, so nothing started with it outlives the test.
func TestContextEndsWithTheTest(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) { ctx = testenv.Context(t, time.Hour) })
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("after the test ended ctx.Err() = %v, want Canceled", ctx.Err())
	}
}
