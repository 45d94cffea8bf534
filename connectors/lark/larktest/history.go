package larktest

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/larkline/larkline/schemas/ids"
)

// History API limits and values (lark-api-notes.md §4.1).
const (
	DefaultPageSize = 20
	MaxPageSize     = 50
	SortAsc         = "ByCreateTimeAsc"
	SortDesc        = "ByCreateTimeDesc"
	ContainerChat   = "chat"
	ContainerThread = "thread"
)

// historyItem is one items[] entry of GET /open-apis/im/v1/messages, with the
// field names and order of Lark's answer.
type historyItem struct {
	MessageID      string           `json:"message_id"`
	RootID         string           `json:"root_id,omitempty"`
	ParentID       string           `json:"parent_id,omitempty"`
	ThreadID       string           `json:"thread_id,omitempty"`
	MsgType        string           `json:"msg_type"`
	CreateTime     string           `json:"create_time"`
	UpdateTime     string           `json:"update_time"`
	Deleted        bool             `json:"deleted"`
	Updated        bool             `json:"updated"`
	ChatID         string           `json:"chat_id"`
	Sender         historySender    `json:"sender"`
	Body           historyBody      `json:"body"`
	Mentions       []historyMention `json:"mentions,omitempty"`
	UpperMessageID string           `json:"upper_message_id,omitempty"`
}

type historySender struct {
	ID         string `json:"id"`
	IDType     string `json:"id_type"`
	SenderType string `json:"sender_type"`
	TenantKey  string `json:"tenant_key"`
}

type historyBody struct {
	Content string `json:"content"`
}

// historyMention is a mention as history shows it: id is the open_id string.
type historyMention struct {
	Key       string `json:"key"`
	ID        string `json:"id"`
	IDType    string `json:"id_type"`
	Name      string `json:"name"`
	TenantKey string `json:"tenant_key"`
}

// listQuery is a validated history request.
type listQuery struct {
	containerType string
	containerID   string
	startSec      *int64
	endSec        *int64
	sort          string
	pageSize      int
	cursor        *pageCursor
}

type pageCursor struct {
	ms int64
	id ids.MessageID
}

// fingerprint identifies the parameters a page token belongs to; Lark rejects
// a page_token used with changed parameters.
func (q listQuery) fingerprint() string {
	var b strings.Builder
	b.WriteString(q.containerType + "\x00" + q.containerID + "\x00" + q.sort)
	for _, p := range []*int64{q.startSec, q.endSec} {
		b.WriteByte(0)
		if p != nil {
			b.WriteString(strconv.FormatInt(*p, 10))
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:6])
}

func encodePageToken(fp string, c pageCursor) string {
	return base64.URLEncoding.EncodeToString([]byte(fp + "|" + strconv.FormatInt(c.ms, 10) + "|" + string(c.id)))
}

// errParam is a 230001 answer with its ext text.
type errParam string

func (e errParam) Error() string { return string(e) }

func decodePageToken(tok, fp string) (*pageCursor, error) {
	raw, err := base64.URLEncoding.DecodeString(tok)
	if err != nil {
		return nil, errParam("invalid page_token")
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 {
		return nil, errParam("invalid page_token")
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil, errParam("invalid page_token")
	}
	if parts[0] != fp {
		return nil, errParam("the request parameters have changed, page_token is invalid")
	}
	return &pageCursor{ms: ms, id: ids.MessageID(parts[2])}, nil
}

// parseListQuery validates the query of a history request as Lark does.
func parseListQuery(get func(string) string) (listQuery, error) {
	q := listQuery{
		containerType: get("container_id_type"),
		containerID:   get("container_id"),
		sort:          cmp.Or(get("sort_type"), SortAsc),
		pageSize:      DefaultPageSize,
	}
	switch q.containerType {
	case ContainerChat:
		if _, err := ids.ParseChatID(q.containerID); err != nil {
			return q, errParam("invalid container_id")
		}
	case ContainerThread:
		if !strings.HasPrefix(q.containerID, "omt_") || len(q.containerID) > ids.MaxIDLen {
			return q, errParam("invalid container_id")
		}
	default:
		return q, errParam("invalid container_id_type")
	}
	if q.sort != SortAsc && q.sort != SortDesc {
		return q, errParam("invalid sort_type")
	}
	for _, f := range []struct {
		name string
		dst  **int64
	}{{"start_time", &q.startSec}, {"end_time", &q.endSec}} {
		v := get(f.name)
		if v == "" {
			continue
		}
		// Lark: "thread 容器类型暂不支持获取指定时间范围内的消息". Answering
		// with an error (rather than silently ignoring the range) makes a
		// client that relies on the range for threads fail in tests.
		if q.containerType == ContainerThread {
			return q, errParam("invalid " + f.name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return q, errParam("invalid " + f.name)
		}
		*f.dst = &n
	}
	if q.startSec != nil && q.endSec != nil && *q.endSec < *q.startSec {
		return q, errParam("The end_time is earlier than the start_time")
	}
	if v := get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1:
			return q, errParam("invalid page_size")
		case n > MaxPageSize:
			return q, errParam("The page_size exceeds the limit")
		}
		q.pageSize = n
	}
	if tok := get("page_token"); tok != "" {
		c, err := decodePageToken(tok, q.fingerprint())
		if err != nil {
			return q, err
		}
		q.cursor = c
	}
	return q, nil
}

// historyIndex orders a scenario's messages by container. It depends only on
// which messages exist, so it is rebuilt when a message is added, not per
// request; time (what is visible now) is applied by historyView.
type historyIndex struct {
	// chats holds each chat's container: every message but thread replies,
	// sorted by (create time, id).
	chats map[ids.ChatID][]*message
	// threads holds each thread's container: the root and its replies, sorted.
	threads map[string][]*message
	// roots maps a thread root to its thread and first reply.
	roots map[ids.MessageID]rootThread
	// bound chats are chats the bot is in even without messages.
	bound map[ids.ChatID]bool
}

func buildIndex(sc *Scenario) *historyIndex {
	idx := &historyIndex{
		chats:   map[ids.ChatID][]*message{},
		threads: map[string][]*message{},
		roots:   sc.rootThreads(),
		bound:   map[ids.ChatID]bool{},
	}
	for _, b := range sc.bindings {
		idx.bound[b.ChatID] = true
	}
	for _, id := range sc.order {
		m := sc.msgs[id]
		if m.threadID != "" {
			idx.threads[m.threadID] = append(idx.threads[m.threadID], m)
		} else if rt, ok := idx.roots[m.id]; ok {
			idx.threads[rt.thread] = append(idx.threads[rt.thread], m)
		}
		if m.threadID == "" || m.rootID == "" {
			idx.chats[m.chat] = append(idx.chats[m.chat], m)
		}
	}
	for _, l := range idx.chats {
		slices.SortFunc(l, byCreate)
	}
	for _, l := range idx.threads {
		slices.SortFunc(l, byCreate)
	}
	return idx
}

func byCreate(a, b *message) int {
	return cmp.Or(cmp.Compare(a.createMs, b.createMs), cmp.Compare(a.id, b.id))
}

// historyView renders the scenario's messages as the history API shows them
// at one instant.
type historyView struct {
	sc    *Scenario
	idx   *historyIndex
	appID string
	nowMs int64
}

func (h *historyView) visible(m *message) bool { return m.createMs <= h.nowMs }

// threadOf is the thread of m as history shows it now: its own thread, or for
// a root the thread of its replies once the first reply exists.
func (h *historyView) threadOf(m *message) string {
	if m.threadID != "" {
		return m.threadID
	}
	if t, ok := h.idx.roots[m.id]; ok && t.firstMs <= h.nowMs {
		return t.thread
	}
	return ""
}

// knownChat reports whether the bot is a member of chat: it is when the chat
// is bound or has any message in the scenario.
func (h *historyView) knownChat(chat ids.ChatID) bool {
	return h.idx.bound[chat] || len(h.idx.chats[chat]) > 0
}

// knownThread reports whether a thread exists now: it has a visible message
// of its own, or a reply already made to its root.
func (h *historyView) knownThread(thread string) bool {
	l := h.idx.threads[thread]
	for _, m := range l {
		if m.threadID == thread && h.visible(m) {
			return true
		}
		if m.createMs > h.nowMs {
			break
		}
	}
	return false
}

// list answers one page: the items, has_more and the next page token.
func (h *historyView) list(q listQuery) ([]historyItem, bool, string) {
	var all []*message
	switch q.containerType {
	case ContainerChat:
		all = h.idx.chats[ids.ChatID(q.containerID)]
	case ContainerThread:
		all = h.idx.threads[q.containerID]
	}
	// The window: visible now and inside start_time/end_time (whole seconds).
	hiMs := h.nowMs
	if q.endSec != nil {
		hiMs = min(hiMs, *q.endSec*1000+999)
	}
	lo := 0
	if q.startSec != nil {
		lo, _ = slices.BinarySearchFunc(all, *q.startSec*1000, func(m *message, ms int64) int { return cmp.Compare(m.createMs, ms) })
	}
	hi, _ := slices.BinarySearchFunc(all, hiMs+1, func(m *message, ms int64) int { return cmp.Compare(m.createMs, ms) })
	if lo >= hi {
		return []historyItem{}, false, ""
	}
	// A thread root is in its container from the first reply on; the
	// handler answers only for threads that exist now, so it is there.
	win := all[lo:hi]
	var page []*message
	more := false
	if q.sort == SortDesc {
		end := len(win)
		if c := q.cursor; c != nil {
			end, _ = slices.BinarySearchFunc(win, *c, cmpCursor)
		}
		start := max(0, end-q.pageSize)
		page = slices.Clone(win[start:end])
		slices.Reverse(page)
		more = start > 0
	} else {
		start := 0
		if c := q.cursor; c != nil {
			start, _ = slices.BinarySearchFunc(win, *c, cmpCursor)
			if start < len(win) && cmpCursor(win[start], *c) == 0 {
				start++
			}
		}
		end := min(start+q.pageSize, len(win))
		page = win[start:end]
		more = end < len(win)
	}
	items := make([]historyItem, 0, len(page))
	for _, m := range page {
		items = append(items, h.item(m))
	}
	if !more {
		return items, false, ""
	}
	last := page[len(page)-1]
	return items, true, encodePageToken(q.fingerprint(), pageCursor{ms: last.createMs, id: last.id})
}

func cmpCursor(m *message, c pageCursor) int {
	return cmp.Or(cmp.Compare(m.createMs, c.ms), cmp.Compare(m.id, c.id))
}

// item renders m as a history item at the view's instant: the latest edit
// already made applies; a recall already made shows as deleted.
func (h *historyView) item(m *message) historyItem {
	it := historyItem{
		MessageID:  string(m.id),
		RootID:     string(m.rootID),
		ParentID:   string(m.parentID),
		ThreadID:   h.threadOf(m),
		MsgType:    m.msgType,
		CreateTime: strconv.FormatInt(m.createMs, 10),
		ChatID:     string(m.chat),
		Body:       historyBody{Content: m.content},
		Mentions:   slices.Clone(m.mentions),
	}
	update := m.updateMs
	for _, e := range m.edits {
		if e.ms <= h.nowMs {
			it.Body.Content, it.Updated, update = e.content, true, e.ms
		}
	}
	if m.recallMs != 0 && m.recallMs <= h.nowMs {
		it.Deleted, it.Body.Content, it.Mentions = true, RecalledContent, nil
		update = max(update, m.recallMs)
	}
	it.UpdateTime = strconv.FormatInt(update, 10)
	switch {
	case h.sc.app != nil && m.senderOpenID == h.sc.app.BotOpenID:
		it.Sender = historySender{ID: h.appID, IDType: "app_id", SenderType: "app", TenantKey: m.senderTenant}
	case m.senderType == SenderTypeUser:
		it.Sender = historySender{ID: m.senderOpenID, IDType: "open_id", SenderType: "user", TenantKey: m.senderTenant}
	default:
		// Another bot: history calls every bot sender an app.
		it.Sender = historySender{ID: m.senderOpenID, IDType: "open_id", SenderType: "app", TenantKey: m.senderTenant}
	}
	return it
}

// get returns one visible message.
func (h *historyView) get(id ids.MessageID) (historyItem, bool) {
	m, ok := h.sc.msgs[id]
	if !ok || !h.visible(m) {
		return historyItem{}, false
	}
	return h.item(m), true
}

func (e errParam) ext() string {
	return fmt.Sprintf("Your request contains an invalid request parameter, ext=%s.", string(e))
}
