package larktest

import (
	"errors"
	"fmt"
)

// Lark error codes this server answers with. The values and the HTTP status each
// comes with are those documented by Lark (see lark-api-notes.md §4 and §6 and
// Lark's "How to resolve error 230001" page).
const (
	// CodeOK is the code of every successful answer.
	CodeOK = 0
	// CodeInvalidParam (HTTP 400) is any invalid request parameter of the
	// message APIs: page_size out of 1..50, a bad page_token, a bad
	// start_time/end_time, an unknown container_id_type or message_id.
	CodeInvalidParam = 230001
	// CodeBotNotInChat (HTTP 400) answers a history request for a chat the bot
	// is not a member of.
	CodeBotNotInChat = 230002
	// CodeRateLimited (HTTP 429) is the gateway's frequency limit; the answer
	// carries x-ogw-ratelimit-reset (seconds to wait).
	CodeRateLimited = 99991400
	// CodeAppCredentialsInvalid (HTTP 400) answers a tenant token request with a
	// wrong app_id or app_secret.
	CodeAppCredentialsInvalid = 99991543
	// CodeTokenMissing (HTTP 400) answers a request without an Authorization header.
	CodeTokenMissing = 99991661
	// CodeTenantTokenInvalid (HTTP 400) answers a request whose tenant access
	// token is unknown, revoked or expired. The SDK retries such a request once.
	CodeTenantTokenInvalid = 99991663
	// CodeTokenFormat (HTTP 400) answers an Authorization header that is not
	// "Bearer <token>". The SDK retries such a request once.
	CodeTokenFormat = 99991671
	// CodeFieldValidation (HTTP 400) is the platform's generic request
	// validation failure, used by the contact endpoints (e.g. more than 50 ids).
	CodeFieldValidation = 99992402
)

// codeMessages are the msg texts that go with each code.
var codeMessages = map[int]string{
	CodeInvalidParam:          "Your request contains an invalid request parameter.",
	CodeBotNotInChat:          "Bot/User can NOT be out of the chat.",
	CodeRateLimited:           "request trigger frequency limit",
	CodeAppCredentialsInvalid: "app_id or app_secret is invalid",
	CodeTokenMissing:          "Missing access token for authorization. Please make a request with token attached.",
	CodeTenantTokenInvalid:    "Invalid access token for authorization. Please make a request with token attached.",
	CodeTokenFormat:           "Invalid access token format. Please make a request with a Bearer token.",
	CodeFieldValidation:       "field validation failed",
	230006:                    "Bot ability is not activated.",
	230027:                    "Lack of necessary permissions.",
	230073:                    "The thread is invisible to the operator.",
	230110:                    "Action unavailable as the message has been deleted.",
	99991662:                  "app is disabled or not installed in this tenant",
	99991664:                  "Invalid app access token.",
	99991672:                  "Access denied. One of the following scopes is required.",
}

func codeMessage(code int) string {
	if m, ok := codeMessages[code]; ok {
		return m
	}
	return fmt.Sprintf("error %d", code)
}

// Sentinel errors. Every error returned by this package wraps one of them.
var (
	// ErrInvalidOptions reports Options or SenderOptions that cannot work.
	ErrInvalidOptions = errors.New("larktest: invalid options")
	// ErrInvalidScenario reports a scenario line (or a programmatic addition)
	// that breaks the scenario format of docs/scenario.md.
	ErrInvalidScenario = errors.New("larktest: invalid scenario")
	// ErrUndelivered reports that at least one event was still not answered
	// with HTTP 200 after every redelivery of the retry schedule.
	ErrUndelivered = errors.New("larktest: event not delivered")
	// ErrChallengeFailed reports a webhook that did not echo the
	// url_verification challenge.
	ErrChallengeFailed = errors.New("larktest: url_verification failed")
	// ErrCallbackStatus reports a webhook answer other than HTTP 200.
	ErrCallbackStatus = errors.New("larktest: webhook answered non-200")
	// ErrServerState reports a Start/Close called in the wrong state.
	ErrServerState = errors.New("larktest: server state")
)

// StatusError is the error of a callback POST that the webhook answered with a
// status other than 200. It wraps ErrCallbackStatus.
type StatusError struct {
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%v: HTTP %d", ErrCallbackStatus, e.Status)
}

// Unwrap makes errors.Is(err, ErrCallbackStatus) true.
func (e *StatusError) Unwrap() error { return ErrCallbackStatus }

// IsRetryable reports whether a callback POST that failed with err is worth
// sending again, which is exactly when Lark would redeliver it: a non-200
// answer, a timeout of the exchange, or any other transport failure. The
// caller's context ending, invalid options and bad input are not retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, ErrCallbackStatus) || errors.Is(err, errTransport)
}

// errTransport marks failures of the HTTP exchange itself (connect, write,
// read, the per-callback timeout), as opposed to the caller's context ending.
var errTransport = errors.New("callback transport failed")
