package workspaces

import (
	"errors"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// Sentinel errors. Every error this package returns for bad input wraps ErrInvalid;
// test with errors.Is. A FieldError carries the field that was rejected.
var (
	// ErrInvalid: the input was rejected before anything was written (an unknown
	// status, a chat id that is not a Lark chat id, a binding to a missing workspace,
	// a creation time in the future, an empty type, too many chats, ...). The
	// wrapping message names the field.
	ErrInvalid = errors.New("invalid workspace input")
	// ErrWorkspaceNotFound: the workspace does not exist. A binding to a missing
	// workspace wraps both this and ErrInvalid.
	ErrWorkspaceNotFound = errors.New("workspace not found")
	// ErrBindingNotFound: the chat is not bound to the workspace (an unbind of a
	// binding that does not exist).
	ErrBindingNotFound = errors.New("binding not found")
	// ErrStaleVersion: a create or update carried a version that is not newer than the
	// stored one, or lost a race with a concurrent update. Nothing was written.
	ErrStaleVersion = errors.New("stale workspace version")
	// ErrNotGroupChat: the chat is a single (p2p) chat or of a mode larkline does not
	// support (the Lark chat info API says so); only group chats may be bound (design
	// §6). A refused bind wraps this, ErrInvalid and chats.ErrRefused.
	ErrNotGroupChat = errors.New("not a group chat")
	// ErrChatCheckUnavailable: Lark could not say whether the chat is a group chat,
	// so the bind was not made; retry later.
	ErrChatCheckUnavailable = errors.New("the chat type could not be checked with Lark")
	// ErrInvalidOptions: a constructor's options are invalid; the wrapping message names them.
	ErrInvalidOptions = errors.New("invalid workspaces options")
	// ErrClosed: the publisher or the feed consumer was closed.
	ErrClosed = errors.New("workspaces: closed")
	// ErrAlreadyRunning: the feed consumer's Run was called a second time (it runs once).
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
)

// FieldError is a rejected input field. It wraps ErrInvalid and, when set, Err (for
// example ids.ErrInvalidID or ErrWorkspaceNotFound). Its text names the field and
// quotes ids and codes only, so it is safe to log and to return to API clients.
type FieldError struct {
	// Field is the input field, e.g. "status", "chats[2]", "created_at".
	Field string
	// Problem says what is wrong with it.
	Problem string
	// Err is an underlying cause; may be nil.
	Err error
}

func (e *FieldError) Error() string { return "invalid " + e.Field + ": " + e.Problem }

// Unwrap returns ErrInvalid and the cause.
func (e *FieldError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

func fieldErr(field, problem string, cause error) error {
	return &FieldError{Field: field, Problem: problem, Err: cause}
}

// IsRetryable reports whether an operation of this package that failed with err may
// succeed when repeated unchanged: a Postgres outage (store.IsRetryable), a Kafka
// failure worth retrying (kafka.IsRetryable) or a schema registry outage
// (schemas.IsRetryable). Invalid input, missing workspaces, stale versions and a
// caller's cancellation are not retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrWorkspaceNotFound) ||
		errors.Is(err, ErrBindingNotFound) || errors.Is(err, ErrStaleVersion) ||
		errors.Is(err, ErrInvalidOptions) || errors.Is(err, ErrClosed) {
		return false
	}
	if errors.Is(err, ErrChatCheckUnavailable) {
		return larkapi.IsRetryable(err)
	}
	return store.IsRetryable(err) || kafka.IsRetryable(err) || schemas.IsRetryable(err)
}
