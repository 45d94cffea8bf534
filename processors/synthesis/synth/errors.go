package synth

import (
	"context"
	"errors"
	"net"
)

var (
	// ErrInvalidRequest is returned (wrapped) when a Request or SummaryRequest fails
	// validation: a programming error of the caller. Repeating the call cannot help.
	ErrInvalidRequest = errors.New("invalid synthesis request")

	// ErrInvalidOutput is returned (wrapped) when a synthesizer's output breaks the
	// contract: unparseable model output, an unknown kind, evidence that is not a
	// citable message of the request, a time outside the window, an over-long title.
	// [Validate] returns it. A model client returns it after its own bounded retries;
	// the worker may retry the chunk within its whole-window attempt bound (§16).
	ErrInvalidOutput = errors.New("invalid synthesizer output")

	// ErrUnavailable is returned (wrapped) when a model endpoint could not answer: a
	// transport failure, a timeout, HTTP 408, 429 or 5xx after the client's bounded
	// retries. Retrying later may succeed.
	ErrUnavailable = errors.New("synthesizer unavailable")

	// ErrRejected is returned (wrapped) when a model endpoint refused the request
	// itself: bad request, authentication or authorization failure, unknown model or
	// path. Repeating the same request cannot succeed; configuration must change.
	ErrRejected = errors.New("synthesizer request rejected")
)

// IsRetryable is the one retry decision at the synthesizer boundary:
//
//   - nil, [ErrInvalidRequest], [ErrRejected], context.Canceled: not retryable;
//   - [ErrUnavailable], context.DeadlineExceeded, a net.Error that timed out: retryable;
//   - [ErrInvalidOutput]: retryable — a model may answer differently next time — but the
//     caller bounds these attempts (design §16: bounded whole-window retry, then failed).
//
// Any other error is not retryable. Cancellation wins over everything else it wraps:
// a caller that is shutting down must not retry.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrRejected):
		return false
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrInvalidOutput):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
