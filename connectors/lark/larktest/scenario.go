package larktest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// Delivery says what happens to a scenario event on the webhook.
type Delivery string

// The three deliveries of docs/scenario.md.
const (
	// DeliverOnce posts the event once (and redelivers it on failure, as Lark does).
	DeliverOnce Delivery = "once"
	// DeliverTwice posts the event, then posts it again after every other
	// event's first delivery, as Lark's at-least-once pushes sometimes do.
	DeliverTwice Delivery = "twice"
	// DeliverDrop never posts the event; its message is only in history.
	DeliverDrop Delivery = "drop"
)

// Scenario kinds (the "kind" of each JSON line).
const (
	KindApp       = "app"
	KindWorkspace = "workspace"
	KindBinding   = "binding"
	KindUser      = "user"
	KindEvent     = "event"
	KindEdit      = "edit"
)

const (
	// maxLineErrors bounds how many bad lines one Parse reports.
	maxLineErrors = 100
	// maxLineBytes bounds one scenario line.
	maxLineBytes = 4 << 20
	// RecalledContent is the history body.content of a recalled message.
	RecalledContent = "This message was recalled"
)

// Sane range of scenario timestamps; a value outside is reported as a bad time
// (it catches seconds or microseconds given where milliseconds belong).
var (
	minTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// LineError is a problem with one scenario line. Line 0 means a problem with
// the scenario as a whole. It matches ErrInvalidScenario under errors.Is.
type LineError struct {
	Line int
	Kind string
	Err  error
}

func (e *LineError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("scenario: %v", e.Err)
	case e.Kind == "":
		return fmt.Sprintf("scenario line %d: %v", e.Line, e.Err)
	default:
		return fmt.Sprintf("scenario line %d (%s): %v", e.Line, e.Kind, e.Err)
	}
}

// Unwrap exposes ErrInvalidScenario and the cause.
func (e *LineError) Unwrap() []error { return []error{ErrInvalidScenario, e.Err} }

// Problems of scenario lines; LineError wraps one of them (or a wrapped
// ids.ErrInvalidID / time parse error) as its cause.
var (
	ErrUnknownKind   = errors.New("unknown kind")
	ErrMissingField  = errors.New("missing field")
	ErrBadTime       = errors.New("bad time")
	ErrBadValue      = errors.New("bad value")
	ErrEventType     = errors.New("event of another type")
	ErrDuplicate     = errors.New("duplicate")
	ErrUnknownTarget = errors.New("refers to something not declared on an earlier line")
)

// App is the larkline app itself: messages sent by BotOpenID are our own bot's.
type App struct {
	AppID     string `json:"app_id"`
	BotOpenID string `json:"bot_open_id"`
	// Name is optional.
	Name string `json:"name,omitempty"`
}

// Workspace is an incident workspace of the scenario.
type Workspace struct {
	Line      int
	ID        ids.WorkspaceID
	Type      string
	Status    string
	CreatedAt time.Time
}

// Binding binds a chat to a workspace.
type Binding struct {
	Line        int
	WorkspaceID ids.WorkspaceID
	ChatID      ids.ChatID
}

// User is one entry of the contact directory. EnName, UnionID and UserID are
// optional additions to the format.
type User struct {
	Line    int
	OpenID  string
	Name    string
	EnName  string
	UnionID string
	UserID  string
}

// Event is one scenario event: a raw v2 envelope and how to deliver it.
type Event struct {
	Line    int
	Deliver Delivery
	// Body is the envelope exactly as given (compact JSON).
	Body      json.RawMessage
	Type      string
	EventID   string
	MessageID ids.MessageID
	ChatID    ids.ChatID
	// Time is the message's create_time (receive) or the recall_time (recall).
	Time time.Time
}

// Edit changes a message's content in history (Lark sends no event for it).
type Edit struct {
	Line       int
	MessageID  ids.MessageID
	UpdateTime time.Time
	Content    string
}

// MessageInfo summarises one message of the scenario for assertions.
type MessageInfo struct {
	Line     int
	ID       ids.MessageID
	ChatID   ids.ChatID
	ChatType string
	Type     string
	// ThreadID is the thread as history shows it (a root gets its replies' thread).
	ThreadID     string
	RootID       ids.MessageID
	ParentID     ids.MessageID
	SenderOpenID string
	SenderType   string
	// FromApp is true for messages of the scenario's own bot.
	FromApp    bool
	CreateTime time.Time
	Deliver    Delivery
	Edits      int
	Recalled   bool
	RecallTime time.Time
}

// message is the scenario's record of one received message.
type message struct {
	line         int
	event        int // index into Scenario.events
	id           ids.MessageID
	chat         ids.ChatID
	chatType     string
	threadID     string
	rootID       ids.MessageID
	parentID     ids.MessageID
	msgType      string
	content      string
	createMs     int64
	updateMs     int64
	senderOpenID string
	senderType   string
	senderTenant string
	mentions     []historyMention
	edits        []editRec
	recallMs     int64
}

type editRec struct {
	ms      int64
	content string
}

// Scenario is a loaded scenario. Build it with Parse, LoadFile, NewScenario or
// Incident; extend it with the Add methods, which validate exactly as Parse
// does. A Scenario is not safe for concurrent mutation; a Server keeps its own
// copy.
type Scenario struct {
	app        *App
	appLine    int
	workspaces []Workspace
	bindings   []Binding
	users      []User
	events     []Event
	edits      []Edit
	msgs       map[ids.MessageID]*message
	order      []ids.MessageID
	eventIDs   map[string]int
	// threadOf maps a thread root to its thread, as soon as it has one.
	threadOf map[ids.MessageID]string
	lastLine int
}

// Chat modes of the chat info API (GET /open-apis/im/v1/chats/:chat_id, field
// chat_mode).
const (
	ChatModeGroup = "group"
	ChatModeTopic = "topic"
	ChatModeP2P   = "p2p"
)

// ChatMode is the chat info API's chat_mode of chat: the chat_type its messages'
// events carry (p2p → ChatModeP2P, topic_group → ChatModeTopic, anything else →
// ChatModeGroup); a chat without messages is a group.
func (s *Scenario) ChatMode(chat ids.ChatID) string { return s.chatMode(chat) }

func (s *Scenario) chatMode(chat ids.ChatID) string {
	for _, id := range s.order {
		m := s.msgs[id]
		if m.chat != chat {
			continue
		}
		switch m.chatType {
		case "p2p":
			return ChatModeP2P
		case "topic_group":
			return ChatModeTopic
		}
		return ChatModeGroup
	}
	return ChatModeGroup
}

// NewScenario starts an empty scenario for app.
func NewScenario(app App) (*Scenario, error) {
	s := newScenario()
	if err := s.setApp(1, app); err != nil {
		return nil, err
	}
	return s, nil
}

func newScenario() *Scenario {
	return &Scenario{msgs: map[ids.MessageID]*message{}, eventIDs: map[string]int{}, threadOf: map[ids.MessageID]string{}}
}

// LoadFile parses the scenario file at path.
func LoadFile(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("larktest: open scenario: %w", err)
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse reads a scenario in JSON Lines (docs/scenario.md). Blank lines are
// skipped. Every bad line is reported (up to 100) as a *LineError naming the
// line; the result is then nil and the error matches ErrInvalidScenario.
func Parse(r io.Reader) (*Scenario, error) {
	s := newScenario()
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if err := s.addLine(line, raw); err != nil {
			errs = append(errs, err)
			if len(errs) >= maxLineErrors {
				errs = append(errs, fmt.Errorf("%w: stopped after %d bad lines", ErrInvalidScenario, maxLineErrors))
				return nil, errors.Join(errs...)
			}
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &LineError{Line: line + 1, Err: fmt.Errorf("reading: %w", err)})
	}
	if s.app == nil && len(errs) == 0 {
		errs = append(errs, &LineError{Err: fmt.Errorf("%w: no %q line", ErrMissingField, KindApp)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// line shapes; pointer fields detect missing ones.
type (
	kindLine struct {
		Kind *string `json:"kind"`
	}
	appLine struct {
		AppID     *string `json:"app_id"`
		BotOpenID *string `json:"bot_open_id"`
		Name      string  `json:"name"`
	}
	workspaceLine struct {
		ID        *string `json:"id"`
		Type      *string `json:"type"`
		Status    *string `json:"status"`
		CreatedAt *string `json:"created_at"`
	}
	bindingLine struct {
		WorkspaceID *string `json:"workspace_id"`
		ChatID      *string `json:"chat_id"`
	}
	userLine struct {
		OpenID  *string `json:"open_id"`
		Name    *string `json:"name"`
		EnName  string  `json:"en_name"`
		UnionID string  `json:"union_id"`
		UserID  string  `json:"user_id"`
	}
	eventLine struct {
		Deliver *string         `json:"deliver"`
		Body    json.RawMessage `json:"body"`
	}
	editLine struct {
		MessageID  *string `json:"message_id"`
		UpdateTime *string `json:"update_time"`
		Content    *string `json:"content"`
	}
)

// addLine parses one scenario line. Long on purpose: one case per line kind of
// docs/scenario.md, each with its own field checks and line-numbered error.
func (s *Scenario) addLine(line int, raw []byte) error {
	var k kindLine
	if err := json.Unmarshal(raw, &k); err != nil {
		return &LineError{Line: line, Err: fmt.Errorf("%w: not a JSON object: %w", ErrBadValue, err)}
	}
	if k.Kind == nil || *k.Kind == "" {
		return &LineError{Line: line, Err: fmt.Errorf("%w: kind", ErrMissingField)}
	}
	kind := *k.Kind
	lerr := func(err error) error { return &LineError{Line: line, Kind: kind, Err: err} }
	strict := func(v any) error {
		if err := json.Unmarshal(raw, v); err != nil {
			return lerr(fmt.Errorf("%w: %w", ErrBadValue, err))
		}
		return nil
	}
	switch kind {
	case KindApp:
		var a appLine
		if err := strict(&a); err != nil {
			return err
		}
		if err := missing(map[string]*string{"app_id": a.AppID, "bot_open_id": a.BotOpenID}); err != nil {
			return lerr(err)
		}
		return s.setApp(line, App{AppID: *a.AppID, BotOpenID: *a.BotOpenID, Name: a.Name})
	case KindWorkspace:
		var w workspaceLine
		if err := strict(&w); err != nil {
			return err
		}
		if err := missing(map[string]*string{"id": w.ID, "type": w.Type, "status": w.Status, "created_at": w.CreatedAt}); err != nil {
			return lerr(err)
		}
		at, err := time.Parse(time.RFC3339Nano, *w.CreatedAt)
		if err != nil {
			return lerr(fmt.Errorf("%w: created_at %q is not RFC 3339: %w", ErrBadTime, *w.CreatedAt, err))
		}
		id, err := ids.ParseWorkspaceID(*w.ID)
		if err != nil {
			return lerr(err)
		}
		return s.addWorkspace(line, Workspace{ID: id, Type: *w.Type, Status: *w.Status, CreatedAt: at})
	case KindBinding:
		var b bindingLine
		if err := strict(&b); err != nil {
			return err
		}
		if err := missing(map[string]*string{"workspace_id": b.WorkspaceID, "chat_id": b.ChatID}); err != nil {
			return lerr(err)
		}
		return s.addBinding(line, ids.WorkspaceID(*b.WorkspaceID), ids.ChatID(*b.ChatID))
	case KindUser:
		var u userLine
		if err := strict(&u); err != nil {
			return err
		}
		if err := missing(map[string]*string{"open_id": u.OpenID, "name": u.Name}); err != nil {
			return lerr(err)
		}
		return s.addUser(line, User{OpenID: *u.OpenID, Name: *u.Name, EnName: u.EnName, UnionID: u.UnionID, UserID: u.UserID})
	case KindEvent:
		var e eventLine
		if err := strict(&e); err != nil {
			return err
		}
		if e.Deliver == nil || *e.Deliver == "" {
			return lerr(fmt.Errorf("%w: deliver", ErrMissingField))
		}
		if len(e.Body) == 0 || string(e.Body) == "null" {
			return lerr(fmt.Errorf("%w: body", ErrMissingField))
		}
		return s.addEvent(line, Delivery(*e.Deliver), e.Body)
	case KindEdit:
		var e editLine
		if err := strict(&e); err != nil {
			return err
		}
		if err := missing(map[string]*string{"message_id": e.MessageID, "update_time": e.UpdateTime, "content": e.Content}); err != nil {
			return lerr(err)
		}
		at, err := parseMs("update_time", *e.UpdateTime)
		if err != nil {
			return lerr(err)
		}
		return s.addEdit(line, Edit{MessageID: ids.MessageID(*e.MessageID), UpdateTime: at, Content: *e.Content})
	default:
		return &LineError{Line: line, Err: fmt.Errorf("%w %q (want app, workspace, binding, user, event or edit)", ErrUnknownKind, kind)}
	}
}

// missing reports the first absent or empty field, in name order.
func missing(fields map[string]*string) error {
	var names []string
	for name, v := range fields {
		if v == nil || *v == "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return fmt.Errorf("%w: %s", ErrMissingField, strings.Join(names, ", "))
}

// parseMs parses a Lark millisecond timestamp string.
func parseMs(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("%w: %s", ErrMissingField, field)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q is not milliseconds since the epoch", ErrBadTime, field, v)
	}
	t := time.UnixMilli(n).UTC()
	if t.Before(minTime) || !t.Before(maxTime) {
		return time.Time{}, fmt.Errorf("%w: %s %q is outside 2000..2200 as milliseconds (seconds or microseconds given?)", ErrBadTime, field, v)
	}
	return t, nil
}

// nextLine is the line number of the next programmatic addition; it is
// taken (by seen) only when the addition succeeds.
func (s *Scenario) nextLine() int { return s.lastLine + 1 }

func (s *Scenario) seen(line int) {
	if line > s.lastLine {
		s.lastLine = line
	}
}

func (s *Scenario) setApp(line int, a App) error {
	lerr := func(err error) error { return &LineError{Line: line, Kind: KindApp, Err: err} }
	if s.app != nil {
		return lerr(fmt.Errorf("%w: the app is already declared on line %d", ErrDuplicate, s.appLine))
	}
	if err := missing(map[string]*string{"app_id": &a.AppID, "bot_open_id": &a.BotOpenID}); err != nil {
		return lerr(err)
	}
	if !strings.HasPrefix(a.AppID, "cli_") {
		return lerr(fmt.Errorf("%w: app_id %q does not start with cli_", ErrBadValue, a.AppID))
	}
	if !strings.HasPrefix(a.BotOpenID, "ou_") {
		return lerr(fmt.Errorf("%w: bot_open_id %q does not start with ou_", ErrBadValue, a.BotOpenID))
	}
	s.app, s.appLine = &a, line
	s.seen(line)
	return nil
}

// AddWorkspace appends a workspace line.
func (s *Scenario) AddWorkspace(w Workspace) error { return s.addWorkspace(s.nextLine(), w) }

func (s *Scenario) addWorkspace(line int, w Workspace) error {
	lerr := func(err error) error { return &LineError{Line: line, Kind: KindWorkspace, Err: err} }
	if _, err := ids.ParseWorkspaceID(string(w.ID)); err != nil {
		return lerr(err)
	}
	if w.Type == "" || w.Status == "" {
		return lerr(fmt.Errorf("%w: type and status are required", ErrMissingField))
	}
	if w.CreatedAt.Before(minTime) || !w.CreatedAt.Before(maxTime) {
		return lerr(fmt.Errorf("%w: created_at %s is outside 2000..2200", ErrBadTime, w.CreatedAt.Format(time.RFC3339)))
	}
	for _, o := range s.workspaces {
		if o.ID == w.ID {
			return lerr(fmt.Errorf("%w: workspace %s already declared on line %d", ErrDuplicate, w.ID, o.Line))
		}
	}
	w.Line = line
	w.CreatedAt = w.CreatedAt.UTC()
	s.workspaces = append(s.workspaces, w)
	s.seen(line)
	return nil
}

// AddBinding appends a binding line; the workspace must already be declared.
func (s *Scenario) AddBinding(w ids.WorkspaceID, c ids.ChatID) error {
	return s.addBinding(s.nextLine(), w, c)
}

func (s *Scenario) addBinding(line int, w ids.WorkspaceID, c ids.ChatID) error {
	lerr := func(err error) error { return &LineError{Line: line, Kind: KindBinding, Err: err} }
	if _, err := ids.ParseChatID(string(c)); err != nil {
		return lerr(err)
	}
	if !slices.ContainsFunc(s.workspaces, func(o Workspace) bool { return o.ID == w }) {
		return lerr(fmt.Errorf("%w: workspace %q", ErrUnknownTarget, w))
	}
	for _, o := range s.bindings {
		if o.WorkspaceID == w && o.ChatID == c {
			return lerr(fmt.Errorf("%w: binding %s/%s already declared on line %d", ErrDuplicate, w, c, o.Line))
		}
	}
	s.bindings = append(s.bindings, Binding{Line: line, WorkspaceID: w, ChatID: c})
	s.seen(line)
	return nil
}

// AddUser appends a contact directory entry.
func (s *Scenario) AddUser(u User) error { return s.addUser(s.nextLine(), u) }

func (s *Scenario) addUser(line int, u User) error {
	lerr := func(err error) error { return &LineError{Line: line, Kind: KindUser, Err: err} }
	if err := missing(map[string]*string{"open_id": &u.OpenID, "name": &u.Name}); err != nil {
		return lerr(err)
	}
	if !strings.HasPrefix(u.OpenID, "ou_") {
		return lerr(fmt.Errorf("%w: open_id %q does not start with ou_", ErrBadValue, u.OpenID))
	}
	for _, o := range s.users {
		if o.OpenID == u.OpenID {
			return lerr(fmt.Errorf("%w: user %s already declared on line %d", ErrDuplicate, u.OpenID, o.Line))
		}
	}
	u.Line = line
	s.users = append(s.users, u)
	s.seen(line)
	return nil
}

// AddEvent appends an event line built with a Builder.
func (s *Scenario) AddEvent(d Delivery, env Envelope) error {
	body, err := env.JSON()
	if err != nil {
		return &LineError{Line: s.nextLine(), Kind: KindEvent, Err: fmt.Errorf("%w: %w", ErrBadValue, err)}
	}
	return s.addEvent(s.nextLine(), d, body)
}

// AddRawEvent appends an event line whose body is raw envelope JSON.
func (s *Scenario) AddRawEvent(d Delivery, body []byte) error {
	return s.addEvent(s.nextLine(), d, body)
}

// envelope views; pointer fields detect missing ones.
type (
	bodyView struct {
		Schema *string          `json:"schema"`
		Header *headerView      `json:"header"`
		Event  *json.RawMessage `json:"event"`
	}
	headerView struct {
		EventID    *string `json:"event_id"`
		EventType  *string `json:"event_type"`
		CreateTime *string `json:"create_time"`
	}
	receiveView struct {
		Sender *struct {
			SenderID *struct {
				OpenID  *string `json:"open_id"`
				UnionID *string `json:"union_id"`
				UserID  *string `json:"user_id"`
			} `json:"sender_id"`
			SenderType *string `json:"sender_type"`
			TenantKey  *string `json:"tenant_key"`
		} `json:"sender"`
		Message *struct {
			MessageID   *string `json:"message_id"`
			RootID      *string `json:"root_id"`
			ParentID    *string `json:"parent_id"`
			CreateTime  *string `json:"create_time"`
			UpdateTime  *string `json:"update_time"`
			ChatID      *string `json:"chat_id"`
			ThreadID    *string `json:"thread_id"`
			ChatType    *string `json:"chat_type"`
			MessageType *string `json:"message_type"`
			Content     *string `json:"content"`
			Mentions    []struct {
				Key string `json:"key"`
				ID  *struct {
					OpenID *string `json:"open_id"`
				} `json:"id"`
				Name      string `json:"name"`
				TenantKey string `json:"tenant_key"`
			} `json:"mentions"`
		} `json:"message"`
	}
	recalledView struct {
		MessageID  *string `json:"message_id"`
		ChatID     *string `json:"chat_id"`
		RecallTime *string `json:"recall_time"`
		RecallType *string `json:"recall_type"`
	}
)

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Scenario) addEvent(line int, d Delivery, body []byte) error {
	lerr := func(err error) error { return &LineError{Line: line, Kind: KindEvent, Err: err} }
	switch d {
	case DeliverOnce, DeliverTwice, DeliverDrop:
	default:
		return lerr(fmt.Errorf("%w: deliver %q (want once, twice or drop)", ErrBadValue, d))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return lerr(fmt.Errorf("%w: body is not JSON: %w", ErrBadValue, err))
	}
	var v bodyView
	if err := json.Unmarshal(compact.Bytes(), &v); err != nil {
		return lerr(fmt.Errorf("%w: body is not an envelope object: %w", ErrBadValue, err))
	}
	if v.Schema == nil || v.Header == nil || v.Event == nil {
		return lerr(fmt.Errorf("%w: body needs schema, header and event (a v2 envelope)", ErrMissingField))
	}
	if *v.Schema != "2.0" {
		return lerr(fmt.Errorf("%w: body.schema %q (want \"2.0\")", ErrBadValue, *v.Schema))
	}
	h := v.Header
	if err := missing(map[string]*string{"body.header.event_id": h.EventID, "body.header.event_type": h.EventType, "body.header.create_time": h.CreateTime}); err != nil {
		return lerr(err)
	}
	if _, err := parseMs("body.header.create_time", *h.CreateTime); err != nil {
		return lerr(err)
	}
	if prev, ok := s.eventIDs[*h.EventID]; ok {
		return lerr(fmt.Errorf("%w: event_id %s already used on line %d", ErrDuplicate, *h.EventID, prev))
	}
	ev := Event{Line: line, Deliver: d, Body: json.RawMessage(compact.Bytes()), Type: *h.EventType, EventID: *h.EventID}
	switch *h.EventType {
	case EventTypeMessageReceive:
		m, err := s.checkReceive(*v.Event)
		if err != nil {
			return lerr(err)
		}
		m.line, m.event = line, len(s.events)
		ev.MessageID, ev.ChatID, ev.Time = m.id, m.chat, time.UnixMilli(m.createMs).UTC()
		s.msgs[m.id] = m
		s.order = append(s.order, m.id)
		switch {
		case m.threadID != "" && m.rootID != "":
			s.threadOf[m.rootID] = m.threadID
		case m.threadID != "":
			s.threadOf[m.id] = m.threadID
		}
	case EventTypeMessageRecalled:
		m, at, err := s.checkRecall(*v.Event)
		if err != nil {
			return lerr(err)
		}
		m.recallMs = at.UnixMilli()
		ev.MessageID, ev.ChatID, ev.Time = m.id, m.chat, at
	default:
		return lerr(fmt.Errorf("%w: %q (want %s or %s)", ErrEventType, *h.EventType, EventTypeMessageReceive, EventTypeMessageRecalled))
	}
	s.eventIDs[ev.EventID] = line
	s.events = append(s.events, ev)
	s.seen(line)
	return nil
}

func (s *Scenario) checkReceive(raw json.RawMessage) (*message, error) {
	var v receiveView
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: body.event: %w", ErrBadValue, err)
	}
	if v.Sender == nil || v.Sender.SenderID == nil || v.Message == nil {
		return nil, fmt.Errorf("%w: body.event needs sender.sender_id and message", ErrMissingField)
	}
	msg := v.Message
	if err := missing(map[string]*string{
		"body.event.message.message_id":       msg.MessageID,
		"body.event.message.chat_id":          msg.ChatID,
		"body.event.message.create_time":      msg.CreateTime,
		"body.event.message.chat_type":        msg.ChatType,
		"body.event.message.message_type":     msg.MessageType,
		"body.event.message.content":          msg.Content,
		"body.event.sender.sender_id.open_id": v.Sender.SenderID.OpenID,
		"body.event.sender.sender_type":       v.Sender.SenderType,
	}); err != nil {
		return nil, err
	}
	id, err := ids.ParseMessageID(*msg.MessageID)
	if err != nil {
		return nil, err
	}
	if prev, ok := s.msgs[id]; ok {
		return nil, fmt.Errorf("%w: message %s already received on line %d (use deliver \"twice\" for a duplicate push)", ErrDuplicate, id, prev.line)
	}
	chat, err := ids.ParseChatID(*msg.ChatID)
	if err != nil {
		return nil, err
	}
	created, err := parseMs("body.event.message.create_time", *msg.CreateTime)
	if err != nil {
		return nil, err
	}
	updated := created
	if u := str(msg.UpdateTime); u != "" {
		if updated, err = parseMs("body.event.message.update_time", u); err != nil {
			return nil, err
		}
		if updated.Before(created) {
			return nil, fmt.Errorf("%w: update_time is before create_time", ErrBadTime)
		}
	}
	m := &message{
		id: id, chat: chat, chatType: *msg.ChatType, msgType: *msg.MessageType, content: *msg.Content,
		createMs: created.UnixMilli(), updateMs: updated.UnixMilli(),
		senderOpenID: *v.Sender.SenderID.OpenID, senderType: *v.Sender.SenderType, senderTenant: str(v.Sender.TenantKey),
		threadID: str(msg.ThreadID),
	}
	if r := str(msg.RootID); r != "" {
		if m.rootID, err = ids.ParseMessageID(r); err != nil {
			return nil, fmt.Errorf("root_id: %w", err)
		}
	}
	if p := str(msg.ParentID); p != "" {
		if m.parentID, err = ids.ParseMessageID(p); err != nil {
			return nil, fmt.Errorf("parent_id: %w", err)
		}
		if m.rootID == "" {
			return nil, fmt.Errorf("%w: body.event.message.root_id (a reply with parent_id always has root_id)", ErrMissingField)
		}
	}
	if m.threadID != "" && !strings.HasPrefix(m.threadID, "omt_") {
		return nil, fmt.Errorf("%w: thread_id %q does not start with omt_", ErrBadValue, m.threadID)
	}
	if m.threadID != "" && m.rootID != "" {
		if t, ok := s.threadOf[m.rootID]; ok && t != m.threadID {
			return nil, fmt.Errorf("%w: root %s already has thread %s, not %s", ErrBadValue, m.rootID, t, m.threadID)
		}
	}
	for i, mn := range msg.Mentions {
		if mn.Key == "" || mn.ID == nil || str(mn.ID.OpenID) == "" {
			return nil, fmt.Errorf("%w: body.event.message.mentions[%d] needs key and id.open_id", ErrMissingField, i)
		}
		m.mentions = append(m.mentions, historyMention{Key: mn.Key, ID: *mn.ID.OpenID, IDType: "open_id", Name: mn.Name, TenantKey: mn.TenantKey})
	}
	return m, nil
}

func (s *Scenario) checkRecall(raw json.RawMessage) (*message, time.Time, error) {
	var v recalledView
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: body.event: %w", ErrBadValue, err)
	}
	if err := missing(map[string]*string{
		"body.event.message_id": v.MessageID, "body.event.chat_id": v.ChatID,
		"body.event.recall_time": v.RecallTime, "body.event.recall_type": v.RecallType,
	}); err != nil {
		return nil, time.Time{}, err
	}
	m, ok := s.msgs[ids.MessageID(*v.MessageID)]
	if !ok {
		return nil, time.Time{}, fmt.Errorf("%w: recalled message %q", ErrUnknownTarget, *v.MessageID)
	}
	if string(m.chat) != *v.ChatID {
		return nil, time.Time{}, fmt.Errorf("%w: chat_id %s but message %s is in %s", ErrBadValue, *v.ChatID, m.id, m.chat)
	}
	if m.recallMs != 0 {
		return nil, time.Time{}, fmt.Errorf("%w: message %s is already recalled", ErrDuplicate, m.id)
	}
	at, err := parseMs("body.event.recall_time", *v.RecallTime)
	if err != nil {
		return nil, time.Time{}, err
	}
	if at.UnixMilli() < m.createMs {
		return nil, time.Time{}, fmt.Errorf("%w: recall_time is before the message's create_time", ErrBadTime)
	}
	if n := len(m.edits); n > 0 && at.UnixMilli() < m.edits[n-1].ms {
		return nil, time.Time{}, fmt.Errorf("%w: recall_time is before the message's last edit", ErrBadTime)
	}
	return m, at, nil
}

// AddEdit appends an edit line; the message must already be received.
func (s *Scenario) AddEdit(e Edit) error { return s.addEdit(s.nextLine(), e) }

// editableTypes are the message types whose content can change in history.
var editableTypes = map[string]bool{"text": true, "post": true, "interactive": true}

func (s *Scenario) addEdit(line int, e Edit) error {
	lerr := func(err error) error { return &LineError{Line: line, Kind: KindEdit, Err: err} }
	m, ok := s.msgs[e.MessageID]
	if !ok {
		return lerr(fmt.Errorf("%w: message %q", ErrUnknownTarget, e.MessageID))
	}
	if !editableTypes[m.msgType] {
		return lerr(fmt.Errorf("%w: a %s message cannot be edited (text, post and interactive can)", ErrBadValue, m.msgType))
	}
	if e.Content == "" {
		return lerr(fmt.Errorf("%w: content", ErrMissingField))
	}
	if !json.Valid([]byte(e.Content)) {
		return lerr(fmt.Errorf("%w: content must be the message's content JSON as a string", ErrBadValue))
	}
	at := e.UpdateTime.UnixMilli()
	if e.UpdateTime.Before(minTime) || !e.UpdateTime.Before(maxTime) {
		return lerr(fmt.Errorf("%w: update_time outside 2000..2200", ErrBadTime))
	}
	if at < m.updateMs {
		return lerr(fmt.Errorf("%w: update_time is before the message's update_time", ErrBadTime))
	}
	if n := len(m.edits); n > 0 && at <= m.edits[n-1].ms {
		return lerr(fmt.Errorf("%w: update_time is not after the previous edit", ErrBadTime))
	}
	if m.recallMs != 0 && at >= m.recallMs {
		return lerr(fmt.Errorf("%w: message %s is recalled before this edit", ErrBadValue, m.id))
	}
	e.Line = line
	e.UpdateTime = time.UnixMilli(at).UTC()
	m.edits = append(m.edits, editRec{ms: at, content: e.Content})
	s.edits = append(s.edits, e)
	s.seen(line)
	return nil
}

// App returns the scenario's app (zero if none was declared).
func (s *Scenario) App() App {
	if s.app == nil {
		return App{}
	}
	return *s.app
}

// Workspaces returns the workspace lines in file order.
func (s *Scenario) Workspaces() []Workspace { return slices.Clone(s.workspaces) }

// Bindings returns the binding lines in file order.
func (s *Scenario) Bindings() []Binding { return slices.Clone(s.bindings) }

// Users returns the contact directory in file order.
func (s *Scenario) Users() []User { return slices.Clone(s.users) }

// Events returns the event lines in file order (the delivery order).
func (s *Scenario) Events() []Event {
	out := slices.Clone(s.events)
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out
}

// Edits returns the edit lines in file order.
func (s *Scenario) Edits() []Edit { return slices.Clone(s.edits) }

// Messages summarises every received message in file order.
func (s *Scenario) Messages() []MessageInfo {
	threads := s.rootThreads()
	out := make([]MessageInfo, 0, len(s.order))
	for _, id := range s.order {
		m := s.msgs[id]
		info := MessageInfo{
			Line: m.line, ID: m.id, ChatID: m.chat, ChatType: m.chatType, Type: m.msgType,
			ThreadID: m.threadID, RootID: m.rootID, ParentID: m.parentID,
			SenderOpenID: m.senderOpenID, SenderType: m.senderType,
			FromApp:    s.app != nil && m.senderOpenID == s.app.BotOpenID,
			CreateTime: time.UnixMilli(m.createMs).UTC(),
			Deliver:    s.events[m.event].Deliver,
			Edits:      len(m.edits),
			Recalled:   m.recallMs != 0,
		}
		if info.ThreadID == "" {
			info.ThreadID = threads[m.id].thread
		}
		if m.recallMs != 0 {
			info.RecallTime = time.UnixMilli(m.recallMs).UTC()
		}
		out = append(out, info)
	}
	return out
}

type rootThread struct {
	thread  string
	firstMs int64
}

// rootThreads maps a thread root to the thread its replies carry and the
// create time of its first reply.
func (s *Scenario) rootThreads() map[ids.MessageID]rootThread {
	out := map[ids.MessageID]rootThread{}
	for _, id := range s.order {
		m := s.msgs[id]
		if m.rootID == "" || m.threadID == "" {
			continue
		}
		if cur, ok := out[m.rootID]; !ok || m.createMs < cur.firstMs {
			out[m.rootID] = rootThread{thread: m.threadID, firstMs: m.createMs}
		}
	}
	return out
}

// Bounds returns the earliest and latest instant of the scenario: workspace
// creation, message, event, edit and recall times. Both are zero when the
// scenario holds no time at all.
func (s *Scenario) Bounds() (first, last time.Time) {
	see := func(t time.Time) {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if last.IsZero() || t.After(last) {
			last = t
		}
	}
	for _, w := range s.workspaces {
		see(w.CreatedAt)
	}
	for _, e := range s.events {
		see(e.Time)
		if hdr, err := headerTime(e.Body); err == nil {
			see(hdr)
		}
	}
	for _, e := range s.edits {
		see(e.UpdateTime)
	}
	return first, last
}

func headerTime(body []byte) (time.Time, error) {
	var v bodyView
	if err := json.Unmarshal(body, &v); err != nil || v.Header == nil {
		return time.Time{}, fmt.Errorf("%w: no header", ErrBadValue)
	}
	return parseMs("create_time", str(v.Header.CreateTime))
}

// Shift returns a copy of the scenario with every time moved by d: workspace
// created_at, header create_time, message create/update times, recall times
// and edit times. d is applied in whole milliseconds.
func (s *Scenario) Shift(d time.Duration) (*Scenario, error) {
	ms := d.Milliseconds()
	out := newScenario()
	type entry struct {
		line int
		add  func() error
	}
	var entries []entry
	if s.app != nil {
		app := *s.app
		entries = append(entries, entry{s.appLine, func() error { return out.setApp(s.appLine, app) }})
	}
	for _, w := range s.workspaces {
		w.CreatedAt = w.CreatedAt.Add(time.Duration(ms) * time.Millisecond)
		entries = append(entries, entry{w.Line, func() error { return out.addWorkspace(w.Line, w) }})
	}
	for _, b := range s.bindings {
		entries = append(entries, entry{b.Line, func() error { return out.addBinding(b.Line, b.WorkspaceID, b.ChatID) }})
	}
	for _, u := range s.users {
		entries = append(entries, entry{u.Line, func() error { return out.addUser(u.Line, u) }})
	}
	for _, e := range s.events {
		body, err := shiftBody(e.Body, e.Type, ms)
		if err != nil {
			return nil, &LineError{Line: e.Line, Kind: KindEvent, Err: err}
		}
		entries = append(entries, entry{e.Line, func() error { return out.addEvent(e.Line, e.Deliver, body) }})
	}
	for _, e := range s.edits {
		e.UpdateTime = e.UpdateTime.Add(time.Duration(ms) * time.Millisecond)
		entries = append(entries, entry{e.Line, func() error { return out.addEdit(e.Line, e) }})
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.line - b.line })
	for _, e := range entries {
		if err := e.add(); err != nil {
			return nil, fmt.Errorf("larktest: shift by %s: %w", d, err)
		}
	}
	out.lastLine = s.lastLine
	return out, nil
}

// ShiftBefore shifts the scenario by a whole number of units (for example
// 10-minute windows) so that its last instant lies strictly before t, as
// close to t as possible. It returns the shifted copy and the shift.
func (s *Scenario) ShiftBefore(t time.Time, unit time.Duration) (*Scenario, time.Duration, error) {
	if unit <= 0 {
		return nil, 0, fmt.Errorf("%w: shift unit %s must be positive", ErrInvalidOptions, unit)
	}
	_, last := s.Bounds()
	if last.IsZero() {
		c, err := s.Shift(0)
		return c, 0, err
	}
	gap := t.Sub(last) - time.Nanosecond // strictly before t
	k := gap / unit
	if gap < 0 && gap%unit != 0 {
		k--
	}
	d := k * unit
	out, err := s.Shift(d)
	return out, d, err
}

// shiftBody moves the times inside an envelope by ms milliseconds. The
// rewritten objects have their keys in alphabetical order (as Lark emits them).
func shiftBody(body []byte, eventType string, ms int64) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	if err := shiftField(top, "header", ms, "create_time"); err != nil {
		return nil, err
	}
	switch eventType {
	case EventTypeMessageReceive:
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(top["event"], &ev); err != nil {
			return nil, fmt.Errorf("%w: event: %w", ErrBadValue, err)
		}
		if err := shiftField(ev, "message", ms, "create_time", "update_time"); err != nil {
			return nil, err
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadValue, err)
		}
		top["event"] = raw
	case EventTypeMessageRecalled:
		if err := shiftField(top, "event", ms, "recall_time"); err != nil {
			return nil, err
		}
	}
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	return out, nil
}

// shiftField shifts the millisecond strings fields of the object parent[key].
func shiftField(parent map[string]json.RawMessage, key string, ms int64, fields ...string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(parent[key], &obj); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadValue, key, err)
	}
	for _, f := range fields {
		raw, ok := obj[f]
		if !ok {
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%w: %s.%s is not a string", ErrBadTime, key, f)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %s.%s %q", ErrBadTime, key, f, v)
		}
		obj[f], _ = json.Marshal(strconv.FormatInt(n+ms, 10))
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	parent[key] = raw
	return nil
}

// Clone returns an independent deep copy.
func (s *Scenario) Clone() *Scenario {
	c := &Scenario{
		appLine:    s.appLine,
		workspaces: slices.Clone(s.workspaces),
		bindings:   slices.Clone(s.bindings),
		users:      slices.Clone(s.users),
		events:     s.Events(),
		edits:      slices.Clone(s.edits),
		msgs:       make(map[ids.MessageID]*message, len(s.msgs)),
		order:      slices.Clone(s.order),
		eventIDs:   maps.Clone(s.eventIDs),
		threadOf:   maps.Clone(s.threadOf),
		lastLine:   s.lastLine,
	}
	if s.app != nil {
		app := *s.app
		c.app = &app
	}
	for id, m := range s.msgs {
		cp := *m
		cp.mentions = slices.Clone(m.mentions)
		cp.edits = slices.Clone(m.edits)
		c.msgs[id] = &cp
	}
	return c
}

// WriteTo writes the scenario as JSON Lines, every line in its original order.
func (s *Scenario) WriteTo(w io.Writer) (int64, error) {
	type entry struct {
		line int
		v    any
	}
	var entries []entry
	if s.app != nil {
		entries = append(entries, entry{s.appLine, struct {
			Kind string `json:"kind"`
			App
		}{KindApp, *s.app}})
	}
	for _, ws := range s.workspaces {
		entries = append(entries, entry{ws.Line, struct {
			Kind      string `json:"kind"`
			ID        string `json:"id"`
			Type      string `json:"type"`
			Status    string `json:"status"`
			CreatedAt string `json:"created_at"`
		}{KindWorkspace, string(ws.ID), ws.Type, ws.Status, ws.CreatedAt.Format(time.RFC3339Nano)}})
	}
	for _, b := range s.bindings {
		entries = append(entries, entry{b.Line, struct {
			Kind        string `json:"kind"`
			WorkspaceID string `json:"workspace_id"`
			ChatID      string `json:"chat_id"`
		}{KindBinding, string(b.WorkspaceID), string(b.ChatID)}})
	}
	for _, u := range s.users {
		entries = append(entries, entry{u.Line, struct {
			Kind    string `json:"kind"`
			OpenID  string `json:"open_id"`
			Name    string `json:"name"`
			EnName  string `json:"en_name,omitempty"`
			UnionID string `json:"union_id,omitempty"`
			UserID  string `json:"user_id,omitempty"`
		}{KindUser, u.OpenID, u.Name, u.EnName, u.UnionID, u.UserID}})
	}
	for _, e := range s.events {
		entries = append(entries, entry{e.Line, struct {
			Kind    string          `json:"kind"`
			Deliver Delivery        `json:"deliver"`
			Body    json.RawMessage `json:"body"`
		}{KindEvent, e.Deliver, e.Body}})
	}
	for _, e := range s.edits {
		entries = append(entries, entry{e.Line, struct {
			Kind       string `json:"kind"`
			MessageID  string `json:"message_id"`
			UpdateTime string `json:"update_time"`
			Content    string `json:"content"`
		}{KindEdit, string(e.MessageID), Ms(e.UpdateTime), e.Content}})
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.line - b.line })
	var n int64
	for _, e := range entries {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e.v); err != nil {
			return n, fmt.Errorf("larktest: encode scenario line %d: %w", e.line, err)
		}
		k, err := w.Write(buf.Bytes())
		n += int64(k)
		if err != nil {
			return n, fmt.Errorf("larktest: write scenario: %w", err)
		}
	}
	return n, nil
}
