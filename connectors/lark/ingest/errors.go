package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"

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
	// ErrMessageNotFound is returned by a MessageLookup for a message Lark does not
	// know (or no longer serves).
	ErrMessageNotFound = errors.New("lark message not found")
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

// Lark Open API codes this package acts on.
const (
	codeRateLimited       = 99991400
	codeTenantTokenBad    = 99991663
	codeAppTokenBad       = 99991664
	codeTokenFormat       = 99991671
	codeInvalidParam      = 230001
	codeMessageDeleted    = 230110
	codeInternalErrorLark = 1000040343
)

// APIError is a failed Lark Open API call: either no answer (Err set) or an answer
// with a non-zero code.
type APIError struct {
	// Op names the call, e.g. "contact users batch".
	Op string
	// Status is the HTTP status, 0 when no answer arrived.
	Status int
	// Code and Msg are Lark's answer.
	Code int
	Msg  string
	// RetryAfter is Lark's x-ogw-ratelimit-reset on a rate-limited answer.
	RetryAfter time.Duration
	// Err is the transport failure when no answer arrived.
	Err error
}

func (e *APIError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("lark %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("lark %s: http %d, code %d: %s", e.Op, e.Status, e.Code, e.Msg)
}

func (e *APIError) Unwrap() error { return e.Err }

// IsRetryable reports whether a failed Lark Open API call (an *APIError from
// LarkDirectory or LarkMessages, or an error wrapping one) may pass when repeated
// later: no answer (dial failures, timeouts), HTTP 5xx, rate limits (HTTP 429 or
// code 99991400) and invalid-token answers (the SDK fetches a new token). Business
// errors (bad parameters, missing permissions, unknown messages) and a caller's
// cancellation are not.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return errors.Is(err, context.DeadlineExceeded)
	}
	if ae.Err != nil {
		var illegal *larkcore.IllegalParamError
		return !errors.As(ae.Err, &illegal) && !errors.Is(ae.Err, context.Canceled)
	}
	switch {
	case ae.Status == http.StatusTooManyRequests, ae.Status >= 500:
		return true
	}
	switch ae.Code {
	case codeRateLimited, codeTenantTokenBad, codeAppTokenBad, codeTokenFormat, codeInternalErrorLark:
		return true
	}
	return false
}
