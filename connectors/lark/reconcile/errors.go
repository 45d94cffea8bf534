package reconcile

import (
	"context"
	"errors"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/store"
)

// Sentinel errors.
var (
	// ErrInvalidOptions is returned (wrapped) by New and NewLimiter
	// when their options cannot work; the message names the field.
	ErrInvalidOptions = errors.New("invalid reconcile options")
	// ErrClosed is returned by Run, RunOnce and Refresh after Close.
	ErrClosed = errors.New("reconciler closed")
	// ErrAlreadyRunning is returned by Run while another Run of the same
	// Reconciler is active.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
	// ErrUnknownWorkspace is returned by Refresh for a workspace the store does not
	// know.
	ErrUnknownWorkspace = errors.New("unknown workspace")
	// ErrNotEnabled is returned by Refresh for a workspace whose type Lark
	// ingestion is not enabled for (design §6): a manual refresh may override the
	// status and the age of a workspace, never that switch.
	ErrNotEnabled = errors.New("lark ingestion not enabled for the workspace type")
	// ErrPageBudget is the Stopped reason of a chat run that used its page budget
	// before it reached the end of its range; the next run continues from the
	// checkpoint.
	ErrPageBudget = errors.New("page budget of the run used up")
	// ErrIneligible is the Stopped reason of an automatic chat run whose workspace
	// left firing, aged out or lost the chat binding while it ran.
	ErrIneligible = errors.New("workspace no longer eligible for automatic reconciliation")
	// ErrNotGroupChat is the Stopped reason of a run whose chat is a single (p2p)
	// chat or of an unsupported mode (it also wraps chats.ErrP2PChat or
	// chats.ErrUnsupportedChat): no page of it was read. The binding is ignored.
	ErrNotGroupChat = errors.New("chat is not a group chat; its history is not read")
	// ErrShuttingDown is the Stopped reason of a chat run ended between two pages
	// because Run was asked to stop.
	ErrShuttingDown = errors.New("reconciler shutting down")
)

// IsRetryable reports whether an error returned by this package may pass when the
// same call is made later. It is the one retry decision of the reconciler's three
// I/O boundaries: the Lark Open API (larkapi.IsRetryable: no answer, HTTP 5xx, HTTP
// 429 or code 99991400, invalid-token codes), Kafka (kafka.IsRetryable) and
// Postgres (store.IsRetryable). ErrClosed, ErrUnknownWorkspace, ErrNotEnabled,
// invalid input, a malformed page and a caller's cancellation are not retryable.
func IsRetryable(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, context.Canceled),
		errors.Is(err, ErrClosed),
		errors.Is(err, ErrInvalidOptions),
		errors.Is(err, ErrUnknownWorkspace),
		errors.Is(err, ErrNotEnabled),
		errors.Is(err, larkapi.ErrInvalidQuery),
		errors.Is(err, larkapi.ErrMalformedPage):
		return false
	}
	var ae *larkapi.APIError
	if errors.As(err, &ae) {
		return larkapi.IsRetryable(err)
	}
	return kafka.IsRetryable(err) || store.IsRetryable(err)
}

// API call outcomes (the outcome label of larkline_lark_api_calls_total).
const (
	outcomeOK          = "ok"
	outcomeRateLimited = "rate_limited"
	outcomeServerError = "server_error"
	outcomeTransport   = "transport_error"
	outcomeRefused     = "refused"
	outcomeCanceled    = "canceled"
	outcomeMalformed   = "malformed" // an answer that cannot be followed
	outcomeInvalid     = "invalid_query"
)

// apiOutcome classifies one Lark call for metrics and logs.
func apiOutcome(err error) string {
	if err == nil {
		return outcomeOK
	}
	switch {
	case errors.Is(err, context.Canceled):
		return outcomeCanceled
	case errors.Is(err, larkapi.ErrMalformedPage):
		return outcomeMalformed
	case errors.Is(err, larkapi.ErrInvalidQuery):
		return outcomeInvalid
	}
	var ae *larkapi.APIError
	if !errors.As(err, &ae) {
		return outcomeTransport
	}
	if ae.Err != nil {
		var timeout *larkcore.ServerTimeoutError
		if errors.As(ae.Err, &timeout) {
			return outcomeServerError
		}
		return outcomeTransport
	}
	switch {
	case larkapi.IsRateLimited(ae):
		return outcomeRateLimited
	case ae.Status >= 500:
		return outcomeServerError
	}
	return outcomeRefused
}

// Failure reasons (the reason label of larkline_reconcile_failures_total). The set
// is closed.
const (
	reasonLarkRateLimited = "lark_rate_limited"
	reasonLarkUnavailable = "lark_unavailable"
	reasonLarkRefused     = "lark_refused"
	reasonLarkMalformed   = "lark_malformed_page"
	reasonKafka           = "kafka_produce"
	reasonPublish         = "checkpoint_publish"
	reasonStore           = "store"
	reasonBindings        = "bindings"
	reasonEncode          = "encode"
	reasonCanceled        = "canceled"
	reasonThreadRefused   = "thread_refused"
	reasonChatLookup      = "chat_lookup"
	reasonOther           = "other"
)

// failure is an error of a chat run with its failure reason.
type failure struct {
	reason string
	err    error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// fail wraps err with a failure reason (kept when err already has one).
func fail(reason string, err error) error {
	var f *failure
	if errors.As(err, &f) {
		return err
	}
	return &failure{reason: reason, err: err}
}

// failureReason returns the reason of a chat run's error.
func failureReason(err error) string {
	var f *failure
	switch {
	case errors.As(err, &f):
		return f.reason
	case errors.Is(err, context.Canceled):
		return reasonCanceled
	}
	return reasonOther
}

// larkFailureReason maps a failed history call to a failure reason.
func larkFailureReason(err error) string {
	switch apiOutcome(err) {
	case outcomeRateLimited:
		return reasonLarkRateLimited
	case outcomeServerError, outcomeTransport:
		return reasonLarkUnavailable
	case outcomeCanceled:
		return reasonCanceled
	case outcomeMalformed:
		return reasonLarkMalformed
	}
	return reasonLarkRefused
}
