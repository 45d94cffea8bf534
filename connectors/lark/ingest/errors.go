package ingest

import (
	"errors"
	"fmt"

	"github.com/larkline/larkline/internal/lifecycle"
)

// Sentinel errors.
var (
	// ErrInvalidOptions is returned (wrapped) by every constructor when its options
	// cannot work; the message names the field.
	ErrInvalidOptions = errors.New("invalid lark ingest options")
	// ErrClosed is returned by Run after Close, and by a long connection's event
	// handler once it has been closed.
	ErrClosed = errors.New("lark ingest closed")
	// ErrAlreadyRunning is returned by Run when another Run of the same value is active.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
	// ErrShuttingDown is answered to events that reach a long connection while it
	// drains: the event is not acknowledged, so Lark delivers it again.
	ErrShuttingDown = errors.New("lark long connection shutting down")
	// ErrNotAcknowledged wraps the cause of an event that was not acknowledged to
	// Lark (rejected or failed); see EventError.
	ErrNotAcknowledged = errors.New("lark event not acknowledged")
	// ErrConnectionLost, ErrLivenessTimeout and ErrConnectTimeout say why a long
	// connection was restarted.
	ErrConnectionLost  = errors.New("lark long connection lost")
	ErrLivenessTimeout = errors.New("lark long connection silent beyond its liveness timeout")
	ErrConnectTimeout  = errors.New("lark long connection did not connect in time")
)

// EventError is what the long connection's handler returns for an event that must
// not be acknowledged: the SDK then answers code 500 and Lark redelivers.
type EventError struct {
	Outcome Outcome
	Reason  string
	Err     error
}

func (e *EventError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("lark event %s: %s", e.Outcome, e.Reason)
	}
	return fmt.Sprintf("lark event %s: %s: %v", e.Outcome, e.Reason, e.Err)
}

// Unwrap exposes ErrNotAcknowledged and the cause.
func (e *EventError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNotAcknowledged}
	}
	return []error{ErrNotAcknowledged, e.Err}
}
