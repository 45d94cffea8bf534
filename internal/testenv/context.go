package testenv

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends after within or when the test ends, whichever
// comes first: the bound of a test's blocking calls, so a service that stops
// answering fails the test instead of hanging it until the binary's timeout.
func Context(t testing.TB, within time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	return ctx
}
