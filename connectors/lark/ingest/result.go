package ingest

import (
	"net/http"

	"github.com/larkline/larkline/connectors/lark/normalize"
)

// Outcome is what became of one Lark callback.
type Outcome string

// Outcomes (the outcome label of larkline_lark_events_total).
const (
	// OutcomeAccepted: evidence was produced and Kafka acknowledged every record.
	OutcomeAccepted Outcome = "accepted"
	// OutcomeIgnored: the event is valid but nothing is to be stored (unbound chat,
	// ineligible workspace, p2p chat, unsupported message or event type, recall of an
	// unknown message). Acknowledged: a redelivery would be ignored again.
	OutcomeIgnored Outcome = "ignored"
	// OutcomeRejected: the request is not a valid, authentic Lark event (forged or
	// missing signature, stale timestamp, wrong token, undecryptable or malformed
	// body, missing ids, oversized message). Not acknowledged; nothing produced.
	OutcomeRejected Outcome = "rejected"
	// OutcomeFailed: a dependency (Kafka, Postgres, the Lark API) failed or the time
	// ran out. Not acknowledged, so Lark delivers the event again; nothing that was
	// not durable was acknowledged.
	OutcomeFailed Outcome = "failed"
)

// Acknowledged reports whether Lark may consider the event delivered: HTTP 200 on
// the webhook, code 200 on the long connection.
func (o Outcome) Acknowledged() bool { return o == OutcomeAccepted || o == OutcomeIgnored }

// Reasons (the reason label of larkline_lark_events_total). Together with the
// normalize.Reason* and bindings.Reason* values they form a closed set.
const (
	ReasonOK     = "ok"     // accepted: a message's evidence
	ReasonRecall = "recall" // accepted: a recall's redacted evidence

	ReasonURLVerification      = "url_verification"       // accepted: the challenge was answered
	ReasonUnsupportedEventType = "unsupported_event_type" // ignored
	ReasonRecallUnknownMessage = "recall_unknown_message" // ignored: no workspace holds the recalled message, or neither larkline nor Lark knows it
	ReasonRecallLookupRefused  = "recall_lookup_refused"  // ignored: Lark refused to show the recalled message
	ReasonReplayedEvent        = "replayed_event"         // ignored: the event id was acknowledged within the timestamp window (a replay, or Lark's redelivery of an answered event)

	ReasonMethodNotAllowed = "method_not_allowed"
	ReasonBodyTooLarge     = "body_too_large"
	ReasonReadFailed       = "read_failed"
	ReasonMalformedBody    = "malformed_body"        // not JSON, or no "encrypt" field although a key is set
	ReasonEncryptedNoKey   = "encrypted_without_key" // an encrypted body but no encrypt key configured
	ReasonUndecryptable    = "undecryptable"
	ReasonMalformedJSON    = "malformed_json"
	ReasonMalformedEvent   = "malformed_event" // the SDK could not decode the event's fields
	ReasonMissingHeader    = "missing_header"  // not a v2 event envelope
	ReasonBadToken         = "bad_token"
	ReasonMissingSignature = "missing_signature"
	ReasonBadSignature     = "bad_signature"
	ReasonBadTimestamp     = "bad_timestamp"   // X-Lark-Request-Timestamp is not a number
	ReasonStaleTimestamp   = "stale_timestamp" // X-Lark-Request-Timestamp too old or in the future
	ReasonChatMismatch     = "chat_mismatch"   // a recall names another chat than the message's
	ReasonInvalidRecord    = "invalid_record"  // the evidence record failed its schema's validation

	ReasonKafkaUnavailable    = "kafka_unavailable"
	ReasonKafkaError          = "kafka_error"
	ReasonBindingsUnavailable = "bindings_unavailable"
	ReasonStoreUnavailable    = "store_unavailable" // a recall could not learn which workspaces hold its message
	ReasonLarkAPIUnavailable  = "lark_api_unavailable"
	ReasonTimeout             = "timeout"
	ReasonCanceled            = "canceled"
	ReasonShuttingDown        = "shutting_down"
	ReasonEncodeFailed        = "encode_failed"
	ReasonInternal            = "internal"
	ReasonEventInFlight       = "event_in_flight" // failed: a copy of the same event is being handled; redelivered later
)

// Result is what Handle* did with one event.
type Result struct {
	Outcome Outcome
	// Reason is a bounded label (one of the Reason* constants of this package,
	// normalize or bindings).
	Reason string
	// Records is the number of evidence records Kafka acknowledged.
	Records int
	// Err is the cause of a rejection or failure; it carries ids, never text.
	Err error
}

// HTTPStatus is the webhook's answer for the result: 200 for acknowledged outcomes;
// 4xx for rejected ones (401 authentication, 405 method, 413 body too large, 422
// unprocessable message, 400 otherwise); 503 for unavailable dependencies and
// timeouts, 500 for internal failures.
func (r Result) HTTPStatus() int {
	switch r.Outcome {
	case OutcomeAccepted, OutcomeIgnored:
		return http.StatusOK
	case OutcomeRejected:
		// One status whatever the stage (issue #29): the answer must not tell a
		// prober which check failed; the reason is in the metrics and the log.
		return http.StatusBadRequest
	}
	switch r.Reason {
	case ReasonKafkaError, ReasonEncodeFailed, ReasonInternal:
		return http.StatusInternalServerError
	}
	return http.StatusServiceUnavailable
}

func accepted(reason string, records int) Result {
	return Result{Outcome: OutcomeAccepted, Reason: reason, Records: records}
}

func ignored(reason string) Result { return Result{Outcome: OutcomeIgnored, Reason: reason} }

func rejected(reason string, err error) Result {
	return Result{Outcome: OutcomeRejected, Reason: reason, Err: err}
}

func failed(reason string, err error) Result {
	return Result{Outcome: OutcomeFailed, Reason: reason, Err: err}
}

// normalizeResult classifies a normalizer rejection: chat and message types larkline
// does not ingest are ignored (design §6, §7.3: counted and skipped); everything
// else is malformed input and rejected.
func normalizeResult(err error) Result {
	reason := normalize.Reason(err)
	switch reason {
	case normalize.ReasonP2PChat, normalize.ReasonUnsupportedChatType, normalize.ReasonUnsupportedType:
		return Result{Outcome: OutcomeIgnored, Reason: reason, Err: err}
	}
	return rejected(reason, err)
}
