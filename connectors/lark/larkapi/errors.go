package larkapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
)

// Sentinel errors.
var (
	// ErrInvalidOptions is returned (wrapped) by New for a nil SDK client.
	ErrInvalidOptions = errors.New("invalid lark api options")
	// ErrMessageNotFound is returned by GetMessage for a message Lark does not know
	// (or no longer serves).
	ErrMessageNotFound = errors.New("lark message not found")
	// ErrInvalidQuery is returned by ListMessages for a query it must not send (a
	// time range on a thread container, a page size outside 1..MaxPageSize).
	ErrInvalidQuery = errors.New("invalid message history query")
	// ErrMalformedPage is returned when Lark answers a history page that cannot be
	// followed: has_more without a page_token (a caller that sees the same token
	// again wraps it too).
	ErrMalformedPage = errors.New("malformed message history page")
)

// Lark Open API codes larkline acts on (lark-api-notes.md §6).
const (
	CodeRateLimited       = 99991400
	CodeTenantTokenBad    = 99991663
	CodeAppTokenBad       = 99991664
	CodeTokenFormat       = 99991671
	CodeInvalidParam      = 230001
	CodeMessageDeleted    = 230110
	CodeInternalErrorLark = 1000040343
)

// MaxRetryAfter bounds how long one x-ogw-ratelimit-reset is honoured.
const MaxRetryAfter = 5 * time.Minute

// maxMsgBytes bounds Lark's error message kept in an APIError.
const maxMsgBytes = 200

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
	// RetryAfter is Lark's x-ogw-ratelimit-reset on a rate-limited answer (1 s when
	// a rate-limited answer has none), at most MaxRetryAfter.
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

// IsRetryable reports whether a failed Lark Open API call (an *APIError, or an error
// wrapping one) may pass when repeated later: no answer (dial failures, timeouts),
// HTTP 5xx, rate limits (HTTP 429 or code 99991400) and invalid-token answers (the
// refused token is forgotten, so the next call fetches a new one). Business errors (bad parameters, missing permissions,
// unknown messages), invalid queries, malformed pages and a caller's cancellation are
// not.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrInvalidQuery) ||
		errors.Is(err, ErrMalformedPage) || errors.Is(err, ErrInvalidOptions) {
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
	case CodeRateLimited, CodeTenantTokenBad, CodeAppTokenBad, CodeTokenFormat, CodeInternalErrorLark:
		return true
	}
	return false
}

// IsRateLimited reports whether a Lark answer is a frequency limit: HTTP 429, or
// code 99991400 (which some older APIs send with HTTP 400).
func IsRateLimited(ae *APIError) bool {
	return ae != nil && ae.Err == nil && (ae.Status == http.StatusTooManyRequests || ae.Code == CodeRateLimited)
}

// answerError builds the *APIError of an answer with a non-zero code, reading Lark's
// rate-limit reset header (seconds).
func answerError(op string, raw *larkcore.ApiResp, code int, msg string) *APIError {
	if isTokenCode(code) {
		tokens.forget() // the next call fetches a new token (tokens.go)
	}
	e := &APIError{Op: op, Code: code, Msg: msg}
	if raw != nil {
		e.Status = raw.StatusCode
		if s := raw.Header.Get("X-Ogw-Ratelimit-Reset"); s != "" {
			if sec, err := strconv.Atoi(s); err == nil && sec > 0 {
				e.RetryAfter = min(time.Duration(sec)*time.Second, MaxRetryAfter)
			}
		}
		if e.RetryAfter == 0 && IsRateLimited(e) {
			e.RetryAfter = time.Second
		}
	}
	if len(e.Msg) > maxMsgBytes {
		e.Msg = e.Msg[:maxMsgBytes]
	}
	return e
}
