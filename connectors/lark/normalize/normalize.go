package normalize

import (
	"fmt"
	"time"

	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Defaults and bounds of Options.
const (
	DefaultMaxTextBytes = 8192
	MinMaxTextBytes     = 64
	// MaxMaxTextBytes keeps one evidence record (text, metadata, hash) well under
	// Kafka's default 1 MiB message size.
	MaxMaxTextBytes        = 512 << 10
	DefaultMaxContentBytes = 1 << 20
	MaxMaxContentBytes     = 16 << 20
)

// Options configure a Normalizer.
type Options struct {
	// SelfAppID is larkline's own Lark app id (cli_…). Required: messages sent by this
	// app are kept as evidence but never fed to synthesis.
	SelfAppID string
	// SelfBotOpenID is the open_id of larkline's bot, when known. Events identify a bot
	// sender by open_id only, so without it own messages are recognized only when Lark
	// reports the app id (the history API does).
	SelfBotOpenID string
	// MaxTextBytes bounds Message.Text (UTF-8 bytes, marker included). 0 means
	// DefaultMaxTextBytes; otherwise it must lie in [MinMaxTextBytes, MaxMaxTextBytes].
	MaxTextBytes int
	// MaxContentBytes bounds the raw content JSON accepted. 0 means
	// DefaultMaxContentBytes; at most MaxMaxContentBytes. Lark's own limits are far
	// lower (150 KB for text, 30 KB for cards).
	MaxContentBytes int
}

// Normalizer turns Inputs into Messages. It is immutable after New and safe for
// concurrent use.
type Normalizer struct {
	selfAppID       string
	selfBotOpenID   string
	maxTextBytes    int
	maxContentBytes int
}

// New validates opts once and returns a Normalizer.
func New(opts Options) (*Normalizer, error) {
	p := opts.problems()
	if opts.SelfAppID == "" {
		p.Add("SelfAppID", nil, "is required")
	}
	if err := p.Err(ErrInvalidOptions); err != nil {
		return nil, err
	}
	n := &Normalizer{
		selfAppID:       opts.SelfAppID,
		selfBotOpenID:   opts.SelfBotOpenID,
		maxTextBytes:    opts.MaxTextBytes,
		maxContentBytes: opts.MaxContentBytes,
	}
	if n.maxTextBytes == 0 {
		n.maxTextBytes = DefaultMaxTextBytes
	}
	if n.maxContentBytes == 0 {
		n.maxContentBytes = DefaultMaxContentBytes
	}
	return n, nil
}

// Check reports every value of opts that breaks the normalizer's rules, as an
// *options.Error naming the fields, or nil. SelfAppID may be empty here (New
// requires it): the configuration layer calls Check for files that run no Lark
// role too.
func (opts Options) Check() error { return opts.problems().Err(ErrInvalidOptions) }

func (opts Options) problems() *options.Problems {
	p := new(options.Problems)
	if opts.SelfAppID != "" && !validID(opts.SelfAppID) {
		p.Add("SelfAppID", opts.SelfAppID, "must be a Lark app id")
	}
	if opts.SelfBotOpenID != "" && !validID(opts.SelfBotOpenID) {
		p.Add("SelfBotOpenID", opts.SelfBotOpenID, "must be a Lark open_id")
	}
	if t := opts.MaxTextBytes; t != 0 && (t < MinMaxTextBytes || t > MaxMaxTextBytes) {
		p.Add("MaxTextBytes", t, "must be between %d and %d so one evidence record stays well under Kafka's default 1 MiB message size", MinMaxTextBytes, MaxMaxTextBytes)
	}
	if c := opts.MaxContentBytes; c < 0 || c > MaxMaxContentBytes {
		p.Add("MaxContentBytes", c, "must be between 1 and %d", MaxMaxContentBytes)
	}
	return p
}

// maxListItems bounds every list in Metadata.
const maxListItems = 50

// Message is a normalized Lark message: the design's NormalizedLarkMessage (§7.4) plus
// the content hash and the synthesis policy decision.
type Message struct {
	MessageID ids.MessageID
	ChatID    ids.ChatID
	ThreadID  string
	RootID    ids.MessageID
	ParentID  ids.MessageID
	// SenderOpenID is the sender's open_id; empty for an app sender Lark identified by
	// app id only, and for anonymous senders.
	SenderOpenID string
	SenderAppID  string
	SenderType   string
	MessageType  string
	// Text is the rendered, cleaned, bounded text (at most MaxTextBytes bytes of valid
	// UTF-8 with no control characters other than newline and tab).
	Text      string
	CreatedAt time.Time
	// UpdatedAt is the update time, or CreatedAt when the message was never updated.
	UpdatedAt time.Time
	Deleted   bool
	Metadata  map[string]any
	// ContentHash is the hex SHA-256 of the semantic content (type, text, attachment
	// references, deletion flag); see schemas.ContentHash.
	ContentHash string
	// SynthesisEligible reports whether timeline synthesis may read this message;
	// IneligibleReason says why not (one of the schemas.Ineligible* constants).
	SynthesisEligible bool
	IneligibleReason  string
}

var (
	minPlausibleTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxPlausibleTime = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Normalize validates in and renders it. A rejection wraps one of the package's
// sentinel errors and carries no message text. A message that Input.Deleted marks as
// recalled is returned redacted (as Redact would), whatever its content.
func (n *Normalizer) Normalize(in Input) (Message, error) {
	m, err := n.base(in)
	if err != nil {
		return Message{}, err
	}
	k, ok := kinds[in.MessageType]
	if !ok {
		return Message{}, fmt.Errorf("%w: %q (message %s)", ErrUnsupportedMessageType, truncateForError(in.MessageType), m.MessageID)
	}
	if in.Deleted {
		return Redact(m, time.Time{}), nil
	}
	if len(in.Content) > n.maxContentBytes {
		return Message{}, fmt.Errorf("%w: %d bytes > %d (message %s)", ErrContentTooLarge, len(in.Content), n.maxContentBytes, m.MessageID)
	}

	r := newRenderer(newTextSink(n.maxTextBytes, len(in.Content)), in.Mentions, m.Metadata)
	if err := k.render(r, in.Content); err != nil {
		return Message{}, fmt.Errorf("%w: %s message %s: %s", ErrMalformedContent, in.MessageType, m.MessageID, describeJSONError(err))
	}
	text, truncated, total, digest := r.out.finish()
	r.finishMetadata()
	m.Text = text
	if truncated {
		m.Metadata[schemas.MetaTruncated] = true
		m.Metadata[schemas.MetaTextBytes] = total
	}
	m.ContentHash = schemas.ContentHash(m.MessageType, digest, r.refs, false)

	switch {
	case n.isOwn(in):
		m.IneligibleReason = schemas.IneligibleOwnApp
	case k.ineligible != schemas.IneligibleNone:
		m.IneligibleReason = k.ineligible
	case text == "":
		m.IneligibleReason = schemas.IneligibleEmptyText
	}
	m.SynthesisEligible = m.IneligibleReason == schemas.IneligibleNone
	return m, nil
}

func (n *Normalizer) isOwn(in Input) bool {
	return (in.SenderAppID != "" && in.SenderAppID == n.selfAppID) ||
		(n.selfBotOpenID != "" && in.SenderID == n.selfBotOpenID)
}

// base validates identifiers, chat type, sender and times, and returns the Message
// with every field that does not depend on content, including its base metadata.
func (n *Normalizer) base(in Input) (Message, error) {
	if in.MessageID == "" {
		return Message{}, fmt.Errorf("%w: message_id", ErrMissingID)
	}
	msgID, err := ids.ParseMessageID(in.MessageID)
	if err != nil {
		return Message{}, fmt.Errorf("%w: message_id is not a Lark message id", ErrInvalidID)
	}
	if in.ChatID == "" {
		return Message{}, fmt.Errorf("%w: chat_id (message %s)", ErrMissingID, msgID)
	}
	chatID, err := ids.ParseChatID(in.ChatID)
	if err != nil {
		return Message{}, fmt.Errorf("%w: chat_id is not a Lark chat id (message %s)", ErrInvalidID, msgID)
	}
	switch in.ChatType {
	case "", ChatTypeGroup, ChatTypeTopicGroup:
	case ChatTypeP2P:
		return Message{}, fmt.Errorf("%w (message %s)", errP2PChat, msgID)
	default:
		return Message{}, fmt.Errorf("%w: %q (message %s)", ErrUnsupportedChatType, truncateForError(in.ChatType), msgID)
	}

	m := Message{
		MessageID:   msgID,
		ChatID:      chatID,
		MessageType: in.MessageType,
		Metadata:    make(map[string]any, 8),
	}
	if m.RootID, err = optionalMessageID("root_id", in.RootID, msgID); err != nil {
		return Message{}, err
	}
	if m.ParentID, err = optionalMessageID("parent_id", in.ParentID, msgID); err != nil {
		return Message{}, err
	}
	upper, err := optionalMessageID("upper_message_id", in.UpperMessageID, msgID)
	if err != nil {
		return Message{}, err
	}
	if in.ThreadID != "" && !validID(in.ThreadID) {
		return Message{}, fmt.Errorf("%w: thread_id is not a Lark id (message %s)", ErrInvalidID, msgID)
	}
	m.ThreadID = in.ThreadID

	if err := n.sender(in, &m); err != nil {
		return Message{}, err
	}
	if err := times(in, &m); err != nil {
		return Message{}, err
	}

	md := m.Metadata
	md[schemas.MetaChatID] = string(chatID)
	md[schemas.MetaMessageType] = in.MessageType
	md[schemas.MetaSenderType] = m.SenderType
	setNonEmpty(md, schemas.MetaChatType, in.ChatType)
	setNonEmpty(md, schemas.MetaThreadID, m.ThreadID)
	setNonEmpty(md, schemas.MetaRootID, string(m.RootID))
	setNonEmpty(md, schemas.MetaParentID, string(m.ParentID))
	setNonEmpty(md, schemas.MetaUpperMessageID, string(upper))
	setNonEmpty(md, schemas.MetaSenderAppID, m.SenderAppID)
	if in.Updated {
		md[schemas.MetaEdited] = true
	}
	return m, nil
}

func (n *Normalizer) sender(in Input, m *Message) error {
	switch in.SenderType {
	case SenderUser, SenderApp, SenderAnonymous, SenderUnknown:
		m.SenderType = in.SenderType
	default:
		m.SenderType = ParseSenderType(in.SenderType)
	}
	if in.SenderID != "" && !validID(in.SenderID) {
		return fmt.Errorf("%w: sender open_id is not a Lark id (message %s)", ErrInvalidID, m.MessageID)
	}
	if in.SenderAppID != "" && !validID(in.SenderAppID) {
		return fmt.Errorf("%w: sender app_id is not a Lark id (message %s)", ErrInvalidID, m.MessageID)
	}
	switch {
	case m.SenderType == SenderUser && in.SenderID == "":
		return fmt.Errorf("%w: sender open_id of a user message (message %s)", ErrMissingID, m.MessageID)
	case m.SenderType == SenderApp && in.SenderID == "" && in.SenderAppID == "":
		return fmt.Errorf("%w: sender id of an app message (message %s)", ErrMissingID, m.MessageID)
	}
	m.SenderOpenID = in.SenderID
	m.SenderAppID = in.SenderAppID
	return nil
}

func times(in Input, m *Message) error {
	if in.CreateTime.IsZero() {
		return fmt.Errorf("%w: missing create_time (message %s)", ErrInvalidTimestamp, m.MessageID)
	}
	if in.CreateTime.Before(minPlausibleTime) || !in.CreateTime.Before(maxPlausibleTime) {
		return fmt.Errorf("%w: create_time %d ms is implausible (message %s)", ErrInvalidTimestamp, in.CreateTime.UnixMilli(), m.MessageID)
	}
	m.CreatedAt = in.CreateTime.UTC()
	m.UpdatedAt = m.CreatedAt
	if !in.UpdateTime.IsZero() {
		if !in.UpdateTime.Before(maxPlausibleTime) {
			return fmt.Errorf("%w: update_time %d ms is implausible (message %s)", ErrInvalidTimestamp, in.UpdateTime.UnixMilli(), m.MessageID)
		}
		if in.UpdateTime.After(m.CreatedAt) {
			m.UpdatedAt = in.UpdateTime.UTC()
		}
	}
	return nil
}

// Redact returns the recalled version of m: no text, no attachment references, no
// mentions, Deleted set, synthesis-ineligible, and a content hash that differs from
// every non-deleted version yet is the same for every redaction of the message (so a
// recall event and a later history read agree). recalledAt, when later than
// m.UpdatedAt, becomes the new UpdatedAt; pass the zero time when unknown.
func Redact(m Message, recalledAt time.Time) Message {
	out := m
	out.Text = ""
	out.Deleted = true
	out.SynthesisEligible = false
	out.IneligibleReason = schemas.IneligibleDeleted
	out.ContentHash = schemas.RedactedContentHash(m.MessageType)
	if recalledAt.After(out.UpdatedAt) {
		out.UpdatedAt = recalledAt.UTC()
	}
	out.Metadata = schemas.RedactMetadata(m.Metadata)
	return out
}

func optionalMessageID(field, s string, msgID ids.MessageID) (ids.MessageID, error) {
	if s == "" {
		return "", nil
	}
	id, err := ids.ParseMessageID(s)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not a Lark message id (message %s)", ErrInvalidID, field, msgID)
	}
	return id, nil
}

// validID reports whether s looks like a Lark identifier (open_id, app id, thread id,
// attachment key): 1..ids.MaxIDLen bytes of letters, digits, '_', '-', '.', ':'.
func validID(s string) bool {
	if s == "" || len(s) > ids.MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

func setNonEmpty(md map[string]any, key, value string) {
	if value != "" {
		md[key] = value
	}
}
