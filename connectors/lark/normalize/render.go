package normalize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/larkline/larkline/schemas"
)

// Bounds of short values copied from content.
const (
	maxNameBytes     = 128 // display names, emoji types, languages
	maxFileNameBytes = 255
	maxRefBytes      = 256
)

// renderer accumulates one message's text, references and metadata.
type renderer struct {
	out        *textSink
	mentions   map[string]string // placeholder key → display name ("" if Lark sent none)
	mentionIDs []string
	mentionAll bool
	refs       []ref
	meta       map[string]any
	listsFull  bool
}

func newRenderer(out *textSink, mentions []Mention, meta map[string]any) *renderer {
	r := &renderer{out: out, meta: meta}
	if len(mentions) > 0 {
		r.mentions = make(map[string]string, len(mentions))
		seen := make(map[string]bool, len(mentions))
		for _, m := range mentions {
			if m.Key != "" {
				r.mentions[m.Key] = cleanString(m.Name, maxNameBytes)
			}
			if m.OpenID != "" && validID(m.OpenID) && !seen[m.OpenID] && len(r.mentionIDs) < maxListItems {
				seen[m.OpenID] = true
				r.mentionIDs = append(r.mentionIDs, m.OpenID)
			}
		}
	}
	return r
}

func (r *renderer) finishMetadata() {
	if len(r.mentionIDs) > 0 {
		r.meta[schemas.MetaMentionOpenIDs] = r.mentionIDs
	}
	if r.mentionAll {
		r.meta[schemas.MetaMentionAll] = true
	}
	if r.listsFull {
		r.meta[schemas.MetaRefsTruncated] = true
	}
}

// text writes user-authored text, replacing Lark's mention placeholders (@_user_N,
// @_all) by "@name". A placeholder whose mention is missing or nameless becomes
// "@user", so placeholders never leak into the text.
func (r *renderer) text(s string) {
	for {
		i := strings.Index(s, "@_")
		if i < 0 {
			r.out.WriteString(s)
			return
		}
		r.out.WriteString(s[:i])
		rest := s[i:]
		key := placeholderAt(rest)
		if key == "" {
			r.out.WriteString("@_")
			s = rest[2:]
			continue
		}
		r.out.WriteString(r.mentionText(key))
		s = rest[len(key):]
	}
}

// placeholderAt returns the mention placeholder at the start of s ("@_user_<digits>"
// or "@_all"), or "".
func placeholderAt(s string) string {
	const user = "@_user_"
	if strings.HasPrefix(s, user) {
		j := len(user)
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j > len(user) {
			return s[:j]
		}
		return ""
	}
	if strings.HasPrefix(s, "@_all") {
		return "@_all"
	}
	return ""
}

// mentionText renders a mention placeholder or post at-tag user id.
func (r *renderer) mentionText(key string) string {
	if key == "@_all" || key == "all" {
		r.mentionAll = true
		return "@all"
	}
	if name := r.mentions[key]; name != "" {
		return "@" + name
	}
	return "@user"
}

// literal writes text that is not subject to mention substitution.
func (r *renderer) literal(s string) { r.out.WriteString(s) }

// placeholder writes a bracketed marker such as "[image]" as its own word.
func (r *renderer) placeholder(s string) {
	r.out.Space()
	r.out.WriteString(s)
	r.out.Space()
}

// scalarRef records a single-valued reference (metadata key = name).
func (r *renderer) scalarRef(name, value string) {
	if !validRef(value) {
		return
	}
	if _, dup := r.meta[name]; dup {
		return
	}
	r.meta[name] = value
	r.refs = append(r.refs, ref{Name: name, Value: value})
}

// listRef appends to a list reference, at most maxListItems values per list.
func (r *renderer) listRef(name, value string) {
	if !validRef(value) {
		return
	}
	list, _ := r.meta[name].([]string)
	if len(list) >= maxListItems {
		r.listsFull = true
		return
	}
	r.meta[name] = append(list, value)
	r.refs = append(r.refs, ref{Name: name, Value: value})
}

func (r *renderer) fileName(name string) string {
	name = cleanString(name, maxFileNameBytes)
	if name != "" {
		r.meta[schemas.MetaFileName] = name
		r.refs = append(r.refs, ref{Name: schemas.MetaFileName, Value: name})
	}
	return name
}

func (r *renderer) duration(v looseString) string {
	ms, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
	if err != nil || ms < 0 {
		return ""
	}
	r.meta[schemas.MetaDurationMS] = ms
	r.refs = append(r.refs, ref{Name: schemas.MetaDurationMS, Value: strconv.FormatInt(ms, 10)})
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// validRef accepts attachment keys and ids: bounded, printable ASCII without spaces.
func validRef(s string) bool {
	if s == "" || len(s) > maxRefBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// looseString decodes a JSON string, number or boolean (kept as its literal) or null.
// Lark is not consistent about quoting numbers (durations, timestamps, status).
type looseString string

func (l *looseString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*l = ""
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*l = looseString(s)
	case b[0] == '{' || b[0] == '[':
		return errShape
	default:
		*l = looseString(b)
	}
	return nil
}

var errShape = errors.New("a field has an undocumented JSON shape")

// decodeObject decodes content, which must be a JSON object, into v.
func decodeObject(content string, v any) error {
	trimmed := strings.TrimSpace(content)
	if !strings.HasPrefix(trimmed, "{") {
		return errNotObject
	}
	return json.Unmarshal([]byte(trimmed), v)
}

var errNotObject = errors.New("content is not a JSON object")

// describeJSONError describes a decoding error without quoting content.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q is a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	case errors.Is(err, errNotObject), errors.Is(err, errShape):
		return err.Error()
	default:
		return "content does not match the documented shape"
	}
}

func formatTime(v looseString) string {
	t, err := ParseTimestamp(string(v))
	if err != nil || t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02 15:04 UTC")
}

// ---- per-type rendering ----

type kind struct {
	render     func(r *renderer, content string) error
	ineligible string
}

// kinds is the message type policy (design §7.3): how each type Lark documents is
// rendered and whether synthesis may read it. Types absent here are rejected with
// ErrUnsupportedMessageType.
var kinds = map[string]kind{
	"text":                 {renderText, schemas.IneligibleNone},
	"post":                 {renderPost, schemas.IneligibleNone},
	"image":                {renderImage, schemas.IneligibleAttachmentOnly},
	"file":                 {renderFile("[file]"), schemas.IneligibleAttachmentOnly},
	"folder":               {renderFile("[folder]"), schemas.IneligibleAttachmentOnly},
	"audio":                {renderAudio, schemas.IneligibleAttachmentOnly},
	"media":                {renderMedia, schemas.IneligibleAttachmentOnly},
	"video":                {renderMedia, schemas.IneligibleAttachmentOnly},
	"sticker":              {renderSticker, schemas.IneligibleAttachmentOnly},
	"interactive":          {renderCard, schemas.IneligibleInteractiveCard},
	"hongbao":              {renderHongbao, schemas.IneligibleNonConversational},
	"share_calendar_event": {renderCalendar("[shared calendar event]"), schemas.IneligibleNone},
	"calendar":             {renderCalendar("[calendar invitation]"), schemas.IneligibleNone},
	"general_calendar":     {renderCalendar("[calendar]"), schemas.IneligibleNone},
	"share_chat":           {renderShareChat, schemas.IneligibleReferenceOnly},
	"share_user":           {renderShareUser, schemas.IneligibleReferenceOnly},
	"system":               {renderSystem, schemas.IneligibleSystem},
	"location":             {renderLocation, schemas.IneligibleReferenceOnly},
	"video_chat":           {renderVideoChat, schemas.IneligibleNone},
	"todo":                 {renderTodo, schemas.IneligibleNone},
	"vote":                 {renderVote, schemas.IneligibleNone},
	"merge_forward":        {renderMergeForward, schemas.IneligibleForwardContainer},
}

// SupportedMessageTypes lists the message types Normalize accepts, sorted.
func SupportedMessageTypes() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func renderText(r *renderer, content string) error {
	var c struct {
		Text string `json:"text"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.text(c.Text)
	return nil
}

// postBody is the received post shape: a title and paragraphs of elements.
type postBody struct {
	Title   string       `json:"title"`
	Content [][]postElem `json:"content"`
}

type postElem struct {
	Tag       string `json:"tag"`
	Text      string `json:"text"`
	UnEscape  bool   `json:"un_escape"`
	Href      string `json:"href"`
	UserID    string `json:"user_id"`
	UserName  string `json:"user_name"`
	ImageKey  string `json:"image_key"`
	FileKey   string `json:"file_key"`
	EmojiType string `json:"emoji_type"`
	Language  string `json:"language"`
}

// postLocales is the order in which a locale-wrapped post's variants are tried.
var postLocales = []string{"zh_cn", "en_us", "ja_jp"}

// decodePost accepts both shapes Lark uses: the received flat {"title","content"} and
// the send-side locale-wrapped {"zh_cn":{...}} (optionally under one "post" key). Of a
// locale-wrapped post the first non-empty variant in postLocales order, then in key
// order, is used.
func decodePost(raw []byte) (postBody, error) { return decodePostLevel(raw, true) }

func decodePostLevel(raw []byte, unwrap bool) (postBody, error) {
	// The received shape is by far the most common: decode it in one pass.
	var flat struct {
		Title   *string       `json:"title"`
		Content *[][]postElem `json:"content"`
	}
	if err := json.Unmarshal(raw, &flat); err != nil {
		return postBody{}, err
	}
	if flat.Title != nil || flat.Content != nil {
		var p postBody
		if flat.Title != nil {
			p.Title = *flat.Title
		}
		if flat.Content != nil {
			p.Content = *flat.Content
		}
		return p, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return postBody{}, err
	}
	if inner, ok := top["post"]; ok && len(top) == 1 && unwrap {
		// One level only: recursing on nested wrappers would make decoding quadratic.
		return decodePostLevel(inner, false)
	}
	keys := make([]string, 0, len(top))
	for _, l := range postLocales {
		if _, ok := top[l]; ok {
			keys = append(keys, l)
		}
	}
	rest := make([]string, 0, len(top))
	for k := range top {
		if !contains(postLocales, k) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	keys = append(keys, rest...)
	for _, k := range keys {
		v := bytes.TrimSpace(top[k])
		if len(v) == 0 || v[0] != '{' {
			continue // not a locale variant (some other field); ignore
		}
		var p postBody
		if err := json.Unmarshal(v, &p); err != nil {
			return postBody{}, err
		}
		if p.Title != "" || len(p.Content) > 0 {
			return p, nil
		}
	}
	return postBody{}, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func renderPost(r *renderer, content string) error {
	trimmed := strings.TrimSpace(content)
	if !strings.HasPrefix(trimmed, "{") {
		return errNotObject
	}
	p, err := decodePost([]byte(trimmed))
	if err != nil {
		return err
	}
	r.post(&p)
	return nil
}

func (r *renderer) post(p *postBody) {
	if p.Title != "" {
		r.text(p.Title)
		r.out.Newline()
	}
	for _, para := range p.Content {
		for i := range para {
			r.postElem(&para[i])
		}
		r.out.Newline()
	}
}

func (r *renderer) postElem(e *postElem) {
	switch e.Tag {
	case "text", "md":
		t := e.Text
		if e.UnEscape {
			t = html.UnescapeString(t)
		}
		r.text(t)
	case "a":
		switch {
		case e.Href == "" || e.Href == e.Text:
			if e.Text != "" {
				r.text(e.Text)
			} else {
				r.literal(e.Href)
			}
		case e.Text == "":
			r.literal(e.Href)
		default:
			r.literal("[")
			r.text(e.Text)
			r.literal("](" + e.Href + ")")
		}
	case "at":
		switch {
		case e.UserID == "all" || e.UserID == "@_all":
			r.literal(r.mentionText("@_all"))
		case e.UserName != "":
			r.literal("@" + cleanString(e.UserName, maxNameBytes))
		default:
			r.literal(r.mentionText(e.UserID))
		}
	case "img":
		r.placeholder("[image]")
		r.listRef(schemas.MetaImageKeys, e.ImageKey)
	case "media":
		r.placeholder("[video]")
		r.listRef(schemas.MetaMediaFileKeys, e.FileKey)
	case "emotion":
		if t := cleanString(e.EmojiType, maxNameBytes); t != "" {
			r.literal("[" + t + "]")
		}
	case "hr":
		r.out.Newline()
		r.literal("---")
		r.out.Newline()
	case "code_block":
		r.out.Newline()
		r.literal("```" + strings.ToLower(cleanString(e.Language, maxNameBytes)))
		r.out.Newline()
		r.literal(e.Text)
		r.out.Newline()
		r.literal("```")
		r.out.Newline()
	default:
		// Tags Lark may add later: keep their visible text, if any.
		if e.Text != "" {
			r.text(e.Text)
		}
	}
}

func renderImage(r *renderer, content string) error {
	var c struct {
		ImageKey string `json:"image_key"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[image]")
	r.scalarRef(schemas.MetaImageKey, c.ImageKey)
	return nil
}

func renderFile(marker string) func(*renderer, string) error {
	return func(r *renderer, content string) error {
		var c struct {
			FileKey  string `json:"file_key"`
			FileName string `json:"file_name"`
		}
		if err := decodeObject(content, &c); err != nil {
			return err
		}
		r.placeholder(marker)
		r.scalarRef(schemas.MetaFileKey, c.FileKey)
		r.literal(r.fileName(c.FileName))
		return nil
	}
}

func renderAudio(r *renderer, content string) error {
	var c struct {
		FileKey  string      `json:"file_key"`
		Duration looseString `json:"duration"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[audio]")
	r.scalarRef(schemas.MetaFileKey, c.FileKey)
	r.literal(r.duration(c.Duration))
	return nil
}

func renderMedia(r *renderer, content string) error {
	var c struct {
		FileKey  string      `json:"file_key"`
		ImageKey string      `json:"image_key"`
		FileName string      `json:"file_name"`
		Duration looseString `json:"duration"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[video]")
	r.scalarRef(schemas.MetaFileKey, c.FileKey)
	r.scalarRef(schemas.MetaImageKey, c.ImageKey)
	r.literal(r.fileName(c.FileName))
	r.out.Space()
	r.literal(r.duration(c.Duration))
	return nil
}

func renderSticker(r *renderer, content string) error {
	var c struct {
		FileKey string `json:"file_key"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[sticker]")
	r.scalarRef(schemas.MetaFileKey, c.FileKey)
	return nil
}

// renderCard keeps a card's title only: the received card content is a lossy
// rendering of the original (lark-api-notes §2), and cards are ineligible for synthesis
// anyway. Both the received shape ({"title": …}) and the original card JSON
// ({"header":{"title":{"content": …}}}) are read.
func renderCard(r *renderer, content string) error {
	var c struct {
		Title  json.RawMessage `json:"title"`
		Header *struct {
			Title *struct {
				Content string `json:"content"`
			} `json:"title"`
		} `json:"header"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	title := ""
	if t := bytes.TrimSpace(c.Title); len(t) > 0 {
		switch t[0] {
		case '"':
			if err := json.Unmarshal(t, &title); err != nil {
				return err
			}
		case '{':
			var obj struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal(t, &obj); err != nil {
				return err
			}
			title = obj.Content
		}
	}
	if title == "" && c.Header != nil && c.Header.Title != nil {
		title = c.Header.Title.Content
	}
	r.placeholder("[card]")
	r.text(title)
	return nil
}

func renderHongbao(r *renderer, content string) error {
	var c struct {
		Text string `json:"text"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	if c.Text == "" {
		c.Text = "[red packet]"
	}
	r.literal(c.Text)
	return nil
}

func renderCalendar(marker string) func(*renderer, string) error {
	return func(r *renderer, content string) error {
		var c struct {
			Summary        string      `json:"summary"`
			StartTime      looseString `json:"start_time"`
			EndTime        looseString `json:"end_time"`
			OpenCalendarID string      `json:"open_calendar_id"`
			OpenEventID    string      `json:"open_event_id"`
		}
		if err := decodeObject(content, &c); err != nil {
			return err
		}
		r.placeholder(marker)
		r.text(c.Summary)
		start, end := formatTime(c.StartTime), formatTime(c.EndTime)
		switch {
		case start != "" && end != "":
			r.literal(" (" + start + " – " + end + ")")
		case start != "":
			r.literal(" (" + start + ")")
		}
		r.scalarRef(schemas.MetaCalendarID, c.OpenCalendarID)
		r.scalarRef(schemas.MetaCalendarEventID, c.OpenEventID)
		return nil
	}
}

func renderShareChat(r *renderer, content string) error {
	var c struct {
		ChatID string `json:"chat_id"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[shared chat]")
	if validID(c.ChatID) {
		r.literal(c.ChatID)
		r.scalarRef(schemas.MetaShareChatID, c.ChatID)
	}
	return nil
}

func renderShareUser(r *renderer, content string) error {
	var c struct {
		UserID string `json:"user_id"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[shared user]")
	if validID(c.UserID) {
		r.literal(c.UserID)
		r.scalarRef(schemas.MetaShareUserID, c.UserID)
	}
	return nil
}

// renderSystem fills a system message template ("{from_user} invited {to_chatters} to
// this chat.") from the same-named keys: lists of display names are joined, objects
// contribute their "text". Unknown variables render as nothing.
func renderSystem(r *renderer, content string) error {
	var c map[string]json.RawMessage
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	var tmpl string
	if raw, ok := c["template"]; ok {
		if err := json.Unmarshal(raw, &tmpl); err != nil {
			return err
		}
	}
	values := make(map[string]string, len(c))
	for tmpl != "" {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			r.literal(tmpl)
			break
		}
		closing := strings.IndexByte(tmpl[open:], '}')
		if closing < 0 {
			r.literal(tmpl)
			break
		}
		r.literal(tmpl[:open])
		name := tmpl[open+1 : open+closing]
		if isTemplateVar(name) {
			v, ok := values[name]
			if !ok {
				var err error
				if v, err = systemValue(c[name]); err != nil {
					return err
				}
				values[name] = v // a template may repeat a variable: decode it once
			}
			r.literal(v)
		} else {
			r.literal(tmpl[open : open+closing+1])
		}
		tmpl = tmpl[open+closing+1:]
	}
	return nil
}

func isTemplateVar(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// systemValue renders one template variable's value.
func systemValue(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", nil
	}
	switch raw[0] {
	case '[':
		var names []looseString
		if err := json.Unmarshal(raw, &names); err != nil {
			return "", err
		}
		parts := make([]string, 0, len(names))
		for _, n := range names {
			parts = append(parts, cleanString(string(n), maxNameBytes))
		}
		return strings.Join(parts, ", "), nil
	case '{':
		var v struct {
			Text     string            `json:"text"`
			I18NText map[string]string `json:"i18n_text"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", err
		}
		t := v.Text
		for _, l := range postLocales {
			if t != "" {
				break
			}
			t = v.I18NText[l]
		}
		return t, nil
	default:
		var v looseString
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", err
		}
		return string(v), nil
	}
}

func renderLocation(r *renderer, content string) error {
	var c struct {
		Name string `json:"name"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[location]")
	r.literal(c.Name)
	return nil
}

func renderVideoChat(r *renderer, content string) error {
	var c struct {
		Topic     string      `json:"topic"`
		StartTime looseString `json:"start_time"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[video call]")
	r.text(c.Topic)
	if start := formatTime(c.StartTime); start != "" {
		r.literal(" (" + start + ")")
	}
	return nil
}

// renderTodo renders a shared task: its summary is a post body (or, defensively, a
// plain string).
func renderTodo(r *renderer, content string) error {
	var c struct {
		TaskID  string          `json:"task_id"`
		Summary json.RawMessage `json:"summary"`
		DueTime looseString     `json:"due_time"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[task]")
	if s := bytes.TrimSpace(c.Summary); len(s) > 0 {
		switch s[0] {
		case '{':
			p, err := decodePost(s)
			if err != nil {
				return err
			}
			r.post(&p)
		case '"':
			var t string
			if err := json.Unmarshal(s, &t); err != nil {
				return err
			}
			r.text(t)
		}
	}
	if due := formatTime(c.DueTime); due != "" {
		r.out.Newline()
		r.literal("due " + due)
	}
	r.scalarRef(schemas.MetaTaskID, c.TaskID)
	return nil
}

func renderVote(r *renderer, content string) error {
	var c struct {
		Topic   string        `json:"topic"`
		Options []looseString `json:"options"`
		Status  looseString   `json:"status"`
	}
	if err := decodeObject(content, &c); err != nil {
		return err
	}
	r.placeholder("[vote]")
	r.text(c.Topic)
	for i, o := range c.Options {
		if i == 0 {
			r.literal(": ")
		} else {
			r.literal(" / ")
		}
		r.text(string(o))
	}
	if st := strings.TrimSpace(string(c.Status)); st != "" && st != "0" {
		r.literal(" (closed)")
	}
	return nil
}

// renderMergeForward renders the container of a merged forward. Its content carries
// no meaning (a fixed placeholder, often not even JSON); the forwarded messages come
// separately with upper_message_id. Older content lists the forwarded ids, which are
// kept as references.
func renderMergeForward(r *renderer, content string) error {
	r.placeholder("[merged forward]")
	var c struct {
		CreateMessageIDs []string `json:"create_message_ids"`
	}
	if decodeObject(content, &c) != nil {
		return nil // not JSON, or not the legacy shape: nothing to keep
	}
	for _, id := range c.CreateMessageIDs {
		if strings.HasPrefix(id, "om_") && validID(id) {
			r.listRef(schemas.MetaForwardedMessageIDs, id)
		}
	}
	return nil
}
