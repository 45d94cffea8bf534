package larktest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// Event types a scenario may carry.
const (
	EventTypeMessageReceive  = "im.message.receive_v1"
	EventTypeMessageRecalled = "im.message.recalled_v1"
)

// Sender types of im.message.receive_v1 (the history API says "user"/"app").
const (
	SenderTypeUser = "user"
	SenderTypeBot  = "bot"
)

// Recall types of im.message.recalled_v1.
const (
	RecallByOwner      = "message_owner"
	RecallByGroupOwner = "group_owner"
	RecallByManager    = "group_manager"
)

// Envelope is a Lark v2 event envelope exactly as it travels (before
// encryption): {"schema":"2.0","header":{…},"event":{…}}. Event is a
// *ReceiveEvent or a *RecalledEvent when built here.
type Envelope struct {
	Schema string      `json:"schema"`
	Header EventHeader `json:"header"`
	Event  any         `json:"event"`
}

// EventHeader is the v2 envelope header. CreateTime is milliseconds as a string.
type EventHeader struct {
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	CreateTime string `json:"create_time"`
	Token      string `json:"token"`
	AppID      string `json:"app_id"`
	TenantKey  string `json:"tenant_key"`
}

// ReceiveEvent is the event object of im.message.receive_v1.
type ReceiveEvent struct {
	Sender  EventSender  `json:"sender"`
	Message EventMessage `json:"message"`
}

// EventSender is event.sender of im.message.receive_v1.
type EventSender struct {
	SenderID   UserIDs `json:"sender_id"`
	SenderType string  `json:"sender_type"`
	TenantKey  string  `json:"tenant_key"`
}

// UserIDs is the {union_id, user_id, open_id} triple of events. Lark returns
// user_id only to apps with the employee-id scope, so it is often empty.
type UserIDs struct {
	UnionID string `json:"union_id,omitempty"`
	UserID  string `json:"user_id,omitempty"`
	OpenID  string `json:"open_id"`
}

// EventMessage is event.message of im.message.receive_v1. Times are
// milliseconds as strings; Content is a JSON string whose shape depends on
// MessageType.
type EventMessage struct {
	MessageID   string         `json:"message_id"`
	RootID      string         `json:"root_id,omitempty"`
	ParentID    string         `json:"parent_id,omitempty"`
	CreateTime  string         `json:"create_time"`
	UpdateTime  string         `json:"update_time,omitempty"`
	ChatID      string         `json:"chat_id"`
	ThreadID    string         `json:"thread_id,omitempty"`
	ChatType    string         `json:"chat_type"`
	MessageType string         `json:"message_type"`
	Content     string         `json:"content"`
	Mentions    []EventMention `json:"mentions,omitempty"`
}

// EventMention is one entry of event.message.mentions.
type EventMention struct {
	Key       string  `json:"key"`
	ID        UserIDs `json:"id"`
	Name      string  `json:"name"`
	TenantKey string  `json:"tenant_key"`
}

// RecalledEvent is the event object of im.message.recalled_v1.
type RecalledEvent struct {
	MessageID  string `json:"message_id"`
	ChatID     string `json:"chat_id"`
	RecallTime string `json:"recall_time"`
	RecallType string `json:"recall_type"`
}

// JSON returns the envelope as compact JSON (no HTML escaping, as Lark sends it).
func (e Envelope) JSON() ([]byte, error) {
	b, err := marshal(e)
	if err != nil {
		return nil, fmt.Errorf("larktest: marshal envelope %s: %w", e.Header.EventID, err)
	}
	return b, nil
}

// marshal is json.Marshal without HTML escaping and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Builder makes event envelopes with the documented shapes, so tests need no
// hand-written JSON. The zero value works; AppID, TenantKey and Token fill the
// header (a Server stamps token and app_id again when it delivers).
type Builder struct {
	AppID     string
	TenantKey string
	Token     string
}

// Msg describes one message for the Builder. ID, Chat, From.OpenID and At are
// required by the scenario loader; everything else has a default.
type Msg struct {
	ID   ids.MessageID
	Chat ids.ChatID
	// ChatType defaults to "group".
	ChatType string
	From     Author
	// At is the message's create_time; Updated defaults to At.
	At      time.Time
	Updated time.Time
	// RootID and ParentID make the message a reply; ThreadID puts it in a
	// thread (omt_…). A thread's root message carries no thread_id in its own
	// event: it gets one in history once the first reply exists.
	RootID   ids.MessageID
	ParentID ids.MessageID
	ThreadID string
	Mentions []Mention
	// EventID defaults to a value derived from the message id.
	EventID string
	// Delay is added to At for the header's create_time (defaults to 0).
	Delay time.Duration
}

// Author identifies who sent a message. Type defaults to "user"; use
// SenderTypeBot for a bot (such as the scenario's own app).
type Author struct {
	OpenID    string
	UnionID   string
	UserID    string
	Type      string
	TenantKey string
}

// Mention is one @-mention; Key is the placeholder used in the content ("@_user_1").
type Mention struct {
	Key     string
	OpenID  string
	UnionID string
	UserID  string
	Name    string
}

// Elem is one element of post content or of an interactive card's received
// rendering. Build it with TextElem, LinkElem, AtElem, ImageElem, CodeElem,
// HRElem, ButtonElem or NoteElem.
type Elem struct {
	Tag       string   `json:"tag"`
	Text      string   `json:"text,omitempty"`
	Href      string   `json:"href,omitempty"`
	UserID    string   `json:"user_id,omitempty"`
	UserName  *string  `json:"user_name,omitempty"`
	ImageKey  string   `json:"image_key,omitempty"`
	FileKey   string   `json:"file_key,omitempty"`
	Language  string   `json:"language,omitempty"`
	EmojiType string   `json:"emoji_type,omitempty"`
	Type      string   `json:"type,omitempty"`
	Style     []string `json:"style,omitempty"`
	Elements  []Elem   `json:"elements,omitempty"`
}

// TextElem is {"tag":"text","text":…} with optional styles (bold, underline, lineThrough, italic).
func TextElem(text string, style ...string) Elem {
	return Elem{Tag: "text", Text: text, Style: style}
}

// LinkElem is {"tag":"a","href":…,"text":…}.
func LinkElem(text, href string) Elem { return Elem{Tag: "a", Text: text, Href: href} }

// AtElem is {"tag":"at","user_id":"@_user_N","user_name":…}.
func AtElem(key, name string) Elem { return Elem{Tag: "at", UserID: key, UserName: &name} }

// ImageElem is {"tag":"img","image_key":…}.
func ImageElem(imageKey string) Elem { return Elem{Tag: "img", ImageKey: imageKey} }

// CodeElem is {"tag":"code_block","language":…,"text":…}.
func CodeElem(language, code string) Elem {
	return Elem{Tag: "code_block", Language: language, Text: code}
}

// HRElem is {"tag":"hr"}.
func HRElem() Elem { return Elem{Tag: "hr"} }

// ButtonElem is a card button as Lark renders it in received content.
func ButtonElem(text, kind string) Elem { return Elem{Tag: "button", Text: text, Type: kind} }

// NoteElem is a card note holding further elements.
func NoteElem(elems ...Elem) Elem { return Elem{Tag: "note", Elements: elems} }

// Ms formats t as Lark's millisecond string.
func Ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Text builds a text message: content {"text": …}. Mentions are written as
// their keys ("@_user_1") inside text, as Lark does.
func (b Builder) Text(m Msg, text string) Envelope {
	return b.Message(m, "text", map[string]string{"text": text})
}

// Post builds a rich-text message: content {"title": …, "content": [[elem…]…]}.
func (b Builder) Post(m Msg, title string, paragraphs ...[]Elem) Envelope {
	if paragraphs == nil {
		paragraphs = [][]Elem{}
	}
	return b.Message(m, "post", struct {
		Title   string   `json:"title"`
		Content [][]Elem `json:"content"`
	}{title, paragraphs})
}

// Image builds an image message: content {"image_key": …}.
func (b Builder) Image(m Msg, imageKey string) Envelope {
	return b.Message(m, "image", map[string]string{"image_key": imageKey})
}

// File builds a file message: content {"file_key": …, "file_name": …}.
func (b Builder) File(m Msg, fileKey, fileName string) Envelope {
	return b.Message(m, "file", struct {
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
	}{fileKey, fileName})
}

// Card builds an interactive message in its received form:
// content {"title": …, "elements": [[elem…]…]} (not the card JSON that was sent).
func (b Builder) Card(m Msg, title string, rows ...[]Elem) Envelope {
	if rows == nil {
		rows = [][]Elem{}
	}
	return b.Message(m, "interactive", struct {
		Title    string   `json:"title"`
		Elements [][]Elem `json:"elements"`
	}{title, rows})
}

// Message builds an im.message.receive_v1 envelope of any message type.
// content is used verbatim when it is a string or json.RawMessage and
// JSON-encoded otherwise (a value that cannot be encoded yields content "").
func (b Builder) Message(m Msg, messageType string, content any) Envelope {
	var c string
	switch v := content.(type) {
	case string:
		c = v
	case json.RawMessage:
		c = string(v)
	default:
		if raw, err := marshal(v); err == nil {
			c = string(raw)
		}
	}
	chatType := m.ChatType
	chatType = cmp.Or(chatType, "group")
	senderType := m.From.Type
	senderType = cmp.Or(senderType, SenderTypeUser)
	senderTenant := m.From.TenantKey
	senderTenant = cmp.Or(senderTenant, b.TenantKey)
	updated := m.Updated
	if updated.IsZero() {
		updated = m.At
	}
	var mentions []EventMention
	for _, mn := range m.Mentions {
		mentions = append(mentions, EventMention{
			Key:       mn.Key,
			ID:        UserIDs{UnionID: mn.UnionID, UserID: mn.UserID, OpenID: mn.OpenID},
			Name:      mn.Name,
			TenantKey: b.TenantKey,
		})
	}
	eventID := m.EventID
	eventID = cmp.Or(eventID, DeriveEventID(EventTypeMessageReceive, string(m.ID)))
	return Envelope{
		Schema: "2.0",
		Header: b.header(eventID, EventTypeMessageReceive, m.At.Add(m.Delay)),
		Event: &ReceiveEvent{
			Sender: EventSender{
				SenderID:   UserIDs{UnionID: m.From.UnionID, UserID: m.From.UserID, OpenID: m.From.OpenID},
				SenderType: senderType,
				TenantKey:  senderTenant,
			},
			Message: EventMessage{
				MessageID:   string(m.ID),
				RootID:      string(m.RootID),
				ParentID:    string(m.ParentID),
				CreateTime:  Ms(m.At),
				UpdateTime:  Ms(updated),
				ChatID:      string(m.Chat),
				ThreadID:    m.ThreadID,
				ChatType:    chatType,
				MessageType: messageType,
				Content:     c,
				Mentions:    mentions,
			},
		},
	}
}

// Recall builds an im.message.recalled_v1 envelope. recallType defaults to
// "message_owner".
func (b Builder) Recall(id ids.MessageID, chat ids.ChatID, at time.Time, recallType string) Envelope {
	recallType = cmp.Or(recallType, RecallByOwner)
	return Envelope{
		Schema: "2.0",
		Header: b.header(DeriveEventID(EventTypeMessageRecalled, string(id)), EventTypeMessageRecalled, at),
		Event: &RecalledEvent{
			MessageID:  string(id),
			ChatID:     string(chat),
			RecallTime: Ms(at),
			RecallType: recallType,
		},
	}
}

func (b Builder) header(eventID, eventType string, at time.Time) EventHeader {
	return EventHeader{
		EventID:    eventID,
		EventType:  eventType,
		CreateTime: Ms(at),
		Token:      b.Token,
		AppID:      b.AppID,
		TenantKey:  b.TenantKey,
	}
}

// DeriveEventID is the deterministic 32-hex event id the Builder gives an
// event of eventType about message id (Lark's event ids look the same).
func DeriveEventID(eventType, id string) string {
	sum := sha256.Sum256([]byte(eventType + "\x00" + id))
	return hex.EncodeToString(sum[:16])
}
