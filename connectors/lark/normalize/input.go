package normalize

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
)

// Chat types Lark reports in im.message.receive_v1. The history API does not report a
// chat type; Input.ChatType is then empty, meaning "not reported".
const (
	ChatTypeGroup      = "group"
	ChatTypeTopicGroup = "topic_group"
	ChatTypeP2P        = "p2p"
)

// Sender types, normalized across the two transports: the event says user|bot (older
// variants: app), the history API says user|app|anonymous|unknown.
const (
	SenderUser      = "user"
	SenderApp       = "app"
	SenderAnonymous = "anonymous"
	SenderUnknown   = "unknown"
)

// Input is one Lark message, independent of the transport it arrived by. Build it with
// FromReceiveEvent or FromHistoryMessage, or directly in tests.
type Input struct {
	MessageID string
	ChatID    string
	// ChatType is group, topic_group or p2p; empty when the transport does not say
	// (the history API).
	ChatType string
	ThreadID string
	RootID   string
	ParentID string
	// UpperMessageID is the merge_forward container of a forwarded child message
	// (history API only).
	UpperMessageID string
	// SenderID is the sender's open_id (ou_…), when the sender is a user or Lark gave
	// the bot's open_id.
	SenderID string
	// SenderType is one of the Sender* constants; see ParseSenderType.
	SenderType string
	// SenderAppID is the app id (cli_…) of an app sender, when Lark gives it (history).
	SenderAppID string
	// MessageType is Lark's message_type / msg_type.
	MessageType string
	// Content is the raw content JSON string exactly as Lark sent it.
	Content  string
	Mentions []Mention
	// CreateTime is required; UpdateTime is optional (zero: never updated).
	CreateTime time.Time
	UpdateTime time.Time
	// Deleted: the history API reports the message as recalled or deleted.
	Deleted bool
	// Updated: the history API reports the message as edited.
	Updated bool
}

// Mention is one @-mention: Key is the placeholder inside the content ("@_user_1"),
// OpenID the mentioned user's open_id (empty for bots without one), Name the display
// name Lark sent with the message.
type Mention struct {
	Key    string
	OpenID string
	Name   string
}

// ParseSenderType maps the sender_type values of both transports onto the Sender*
// constants: "bot" and "app" become SenderApp; unknown values become SenderUnknown.
func ParseSenderType(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "user":
		return SenderUser
	case "bot", "app":
		return SenderApp
	case "anonymous":
		return SenderAnonymous
	default:
		return SenderUnknown
	}
}

// ParseTimestamp parses a Lark timestamp string. Lark documents milliseconds, but some
// samples carry seconds or microseconds, so the unit is chosen by magnitude: fewer than
// 12 digits are seconds, fewer than 15 milliseconds, fewer than 18 microseconds, else
// nanoseconds. An empty string is the zero time and no error.
func ParseTimestamp(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, fmt.Errorf("%w: %q is not a positive integer", ErrInvalidTimestamp, truncateForError(s))
	}
	switch {
	case n < 1e11:
		return time.Unix(n, 0).UTC(), nil
	case n < 1e14:
		return time.UnixMilli(n).UTC(), nil
	case n < 1e17:
		return time.UnixMicro(n).UTC(), nil
	default:
		return time.Unix(0, n).UTC(), nil
	}
}

// FromReceiveEvent converts an im.message.receive_v1 event into an Input. It fails
// only when the event has no message or a timestamp cannot be parsed; identifiers and
// content are validated by Normalize.
func FromReceiveEvent(ev *larkim.P2MessageReceiveV1) (Input, error) {
	if ev == nil || ev.Event == nil || ev.Event.Message == nil {
		return Input{}, fmt.Errorf("%w: receive event without message", ErrMalformedEnvelope)
	}
	m := ev.Event.Message
	in := Input{
		MessageID:   deref(m.MessageId),
		ChatID:      deref(m.ChatId),
		ChatType:    deref(m.ChatType),
		ThreadID:    deref(m.ThreadId),
		RootID:      deref(m.RootId),
		ParentID:    deref(m.ParentId),
		MessageType: deref(m.MessageType),
		Content:     deref(m.Content),
		SenderType:  SenderUnknown,
	}
	if s := ev.Event.Sender; s != nil {
		in.SenderType = ParseSenderType(deref(s.SenderType))
		if s.SenderId != nil {
			in.SenderID = deref(s.SenderId.OpenId)
		}
	}
	for _, me := range m.Mentions {
		if me == nil {
			continue
		}
		mention := Mention{Key: deref(me.Key), Name: deref(me.Name)}
		if me.Id != nil {
			mention.OpenID = deref(me.Id.OpenId)
		}
		in.Mentions = append(in.Mentions, mention)
	}
	var err error
	if in.CreateTime, err = ParseTimestamp(deref(m.CreateTime)); err != nil {
		return Input{}, fmt.Errorf("receive event %s: create_time: %w", truncateForError(in.MessageID), err)
	}
	if in.UpdateTime, err = ParseTimestamp(deref(m.UpdateTime)); err != nil {
		return Input{}, fmt.Errorf("receive event %s: update_time: %w", truncateForError(in.MessageID), err)
	}
	return in, nil
}

// FromHistoryMessage converts one item of GET /open-apis/im/v1/messages (or of the
// get-message API) into an Input. The history API names fields differently from the
// event (msg_type, body.content, a flat sender id whose id_type is open_id or app_id,
// mention ids as plain strings) and reports no chat type, so Input.ChatType stays
// empty. deleted and updated are carried over.
func FromHistoryMessage(m *larkim.Message) (Input, error) {
	if m == nil {
		return Input{}, fmt.Errorf("%w: nil history message", ErrMalformedEnvelope)
	}
	in := Input{
		MessageID:      deref(m.MessageId),
		ChatID:         deref(m.ChatId),
		ThreadID:       deref(m.ThreadId),
		RootID:         deref(m.RootId),
		ParentID:       deref(m.ParentId),
		UpperMessageID: deref(m.UpperMessageId),
		MessageType:    deref(m.MsgType),
		SenderType:     SenderUnknown,
		Deleted:        m.Deleted != nil && *m.Deleted,
		Updated:        m.Updated != nil && *m.Updated,
	}
	if m.Body != nil {
		in.Content = deref(m.Body.Content)
	}
	if s := m.Sender; s != nil {
		in.SenderType = ParseSenderType(deref(s.SenderType))
		id := deref(s.Id)
		switch idType := deref(s.IdType); {
		case idType == "open_id":
			in.SenderID = id
		case idType == "app_id":
			in.SenderAppID = id
		case strings.HasPrefix(id, "ou_"):
			in.SenderID = id
		case strings.HasPrefix(id, "cli_"):
			in.SenderAppID = id
		}
	}
	for _, me := range m.Mentions {
		if me == nil {
			continue
		}
		mention := Mention{Key: deref(me.Key), Name: deref(me.Name)}
		if idType := deref(me.IdType); idType == "" || idType == "open_id" {
			mention.OpenID = deref(me.Id)
		}
		in.Mentions = append(in.Mentions, mention)
	}
	var err error
	if in.CreateTime, err = ParseTimestamp(deref(m.CreateTime)); err != nil {
		return Input{}, fmt.Errorf("history message %s: create_time: %w", truncateForError(in.MessageID), err)
	}
	if in.UpdateTime, err = ParseTimestamp(deref(m.UpdateTime)); err != nil {
		return Input{}, fmt.Errorf("history message %s: update_time: %w", truncateForError(in.MessageID), err)
	}
	return in, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// truncateForError bounds untrusted strings quoted in error messages.
func truncateForError(s string) string {
	const maxLen = 32
	if len(s) <= maxLen {
		return s
	}
	return cutAtRune(s, maxLen) + "…"
}
