package normalize

import (
	"errors"
	"fmt"

	"github.com/larkline/larkline/schemas/ids"
)

// Sentinel errors. Every rejection returned by this package wraps exactly one of them
// (test with errors.Is); Reason maps them to a bounded metrics label. A rejected message
// is never partly normalized: the caller counts it, logs its id, and moves on.
var (
	// ErrMissingID: a required identifier is absent (message_id, chat_id, or the
	// sender id of a user or app sender). The wrapped text names the field.
	ErrMissingID = errors.New("missing required identifier")

	// ErrInvalidID: an identifier is present but not a well-formed Lark id (wrong
	// prefix, forbidden characters, too long). It also matches ids.ErrInvalidID.
	ErrInvalidID = fmt.Errorf("%w", ids.ErrInvalidID)

	// ErrUnsupportedChatType: the chat is not a group or topic group. larkline ingests
	// incident group chats only; single chats (p2p) are out of scope (design §6).
	ErrUnsupportedChatType = errors.New("unsupported chat type")

	// ErrUnsupportedMessageType: the message type is unknown to this package (Lark's
	// set is open). The message is counted and skipped (design §7.3).
	ErrUnsupportedMessageType = errors.New("unsupported message type")

	// ErrMalformedContent: the content is not the JSON shape Lark documents for its
	// message type.
	ErrMalformedContent = errors.New("malformed message content")

	// ErrContentTooLarge: the raw content exceeds Options.MaxContentBytes.
	ErrContentTooLarge = errors.New("message content too large")

	// ErrInvalidTimestamp: create_time is absent or not a plausible Unix timestamp,
	// or update_time cannot be parsed.
	ErrInvalidTimestamp = errors.New("invalid timestamp")

	// ErrMalformedEnvelope: an SDK event or history item lacks the structure an
	// adapter needs (nil event, nil message).
	ErrMalformedEnvelope = errors.New("malformed envelope")

	// ErrInvalidOptions: New was given options it cannot work with.
	ErrInvalidOptions = errors.New("invalid normalizer options")
)

// errP2PChat refines ErrUnsupportedChatType so that Reason can tell single chats, the
// common case, from chat types Lark may add later.
var errP2PChat = fmt.Errorf("%w: p2p", ErrUnsupportedChatType)

// Reason labels returned by Reason. The set is closed, so the labels are safe as
// Prometheus label values.
const (
	ReasonNone                = ""
	ReasonMissingID           = "missing_id"
	ReasonInvalidID           = "invalid_id"
	ReasonP2PChat             = "p2p_chat"
	ReasonUnsupportedChatType = "unsupported_chat_type"
	ReasonUnsupportedType     = "unsupported_type"
	ReasonMalformedContent    = "malformed_content"
	ReasonContentTooLarge     = "content_too_large"
	ReasonInvalidTimestamp    = "invalid_timestamp"
	ReasonMalformedEnvelope   = "malformed_envelope"
	ReasonOther               = "other"
)

// Reason returns a bounded label describing why a message was rejected: one of the
// Reason* constants. Reason(nil) is ReasonNone; an error that wraps none of this
// package's sentinels is ReasonOther.
func Reason(err error) string {
	switch {
	case err == nil:
		return ReasonNone
	case errors.Is(err, ErrMissingID):
		return ReasonMissingID
	case errors.Is(err, ErrInvalidID):
		return ReasonInvalidID
	case errors.Is(err, errP2PChat):
		return ReasonP2PChat
	case errors.Is(err, ErrUnsupportedChatType):
		return ReasonUnsupportedChatType
	case errors.Is(err, ErrUnsupportedMessageType):
		return ReasonUnsupportedType
	case errors.Is(err, ErrMalformedContent):
		return ReasonMalformedContent
	case errors.Is(err, ErrContentTooLarge):
		return ReasonContentTooLarge
	case errors.Is(err, ErrInvalidTimestamp):
		return ReasonInvalidTimestamp
	case errors.Is(err, ErrMalformedEnvelope):
		return ReasonMalformedEnvelope
	default:
		return ReasonOther
	}
}
