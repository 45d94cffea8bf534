package bindings

import (
	"errors"

	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/store"
)

var (
	// ErrInvalidOptions is returned (wrapped) by New when Options cannot work; the
	// message names the field.
	ErrInvalidOptions = errors.New("invalid binding resolver options")
	// ErrClosed is returned by Resolve and Run after Close.
	ErrClosed = errors.New("binding resolver closed")
	// ErrAlreadyRunning is returned by Run when another Run of the same resolver is
	// active.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
)

// IsRetryable reports whether a Resolve error may pass when the same call is made
// later: the database was unreachable, timed out or shed load. It is the retry
// decision of this package's one I/O boundary (the store). ErrClosed, invalid input
// and a caller's cancellation are not retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, ErrClosed) {
		return false
	}
	return store.IsRetryable(err)
}
