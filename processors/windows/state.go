package windows

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/larkline/larkline/internal/ids"
	"github.com/larkline/larkline/schemas"
)

// The group table holds two kinds of values, told apart by their key:
//
//	<workspace>/<chat>                      chatState: the chat's open windows and coverage
//	<workspace>/<chat>/window/<start>       windowState: one window's evidence, or its closed marker
//
// Both keys hash to the chat's partition (ids.PartitionKey), so one partition processor
// owns a chat and all of its windows. Window keys exist only once evidence arrived for
// them: an idle chat costs nothing.

const windowKeySegment = "/window/"

// windowKey is the group-table key of one window of a chat.
func windowKey(chatKey string, start time.Time) string {
	return chatKey + windowKeySegment + start.UTC().Format(time.RFC3339)
}

// splitWindowKey returns the chat key and window start of a window key.
func splitWindowKey(key string) (chatKey string, start time.Time, ok bool) {
	i := strings.Index(key, windowKeySegment)
	if i < 0 {
		return "", time.Time{}, false
	}
	start, err := time.Parse(time.RFC3339, key[i+len(windowKeySegment):])
	if err != nil {
		return "", time.Time{}, false
	}
	return key[:i], start.UTC(), true
}

// pageKeySegment separates a window key from the number of one of its sealed pages.
const pageKeySegment = "/page/"

// pageKey is the group-table key of sealed page n of a window.
func pageKey(windowKey string, n int) string { return windowKey + pageKeySegment + strconv.Itoa(n) }

// splitPageKey returns the window key, chat key, window start and page number of a
// page key.
func splitPageKey(key string) (wk, chatKey string, start time.Time, page int, ok bool) {
	i := strings.LastIndex(key, pageKeySegment)
	if i < 0 || !strings.Contains(key[:i], windowKeySegment) {
		return "", "", time.Time{}, 0, false
	}
	n, err := strconv.Atoi(key[i+len(pageKeySegment):])
	if err != nil || n < 0 {
		return "", "", time.Time{}, 0, false
	}
	chatKey, start, ok = splitWindowKey(key[:i])
	if !ok {
		return "", "", time.Time{}, 0, false
	}
	return key[:i], chatKey, start, n, true
}

// msgRef is one evidence version inside an open window.
type msgRef struct {
	ID   string `json:"i"`
	At   int64  `json:"t"` // occurred_at, unix ms
	Hash string `json:"h"`
	// Del marks an entry of a paged window's log that has only seen recalls of a
	// message the window could not tell apart from a new one (the message may sit in
	// a sealed page). Folding drops it unless an earlier page holds the message.
	Del bool `json:"d,omitempty"`
	// Upd (source_updated_at, unix ms; 0 when unknown: state written before format 3)
	// and Deleted (the version is a recall) rank this version among the versions of
	// its message by the evidence table's version rule (schemas.EvidenceRank).
	Upd     int64 `json:"u,omitempty"`
	Deleted bool  `json:"x,omitempty"`
}

// rank returns the ref's version rank and whether it is known.
func (r msgRef) rank() (schemas.EvidenceRank, bool) {
	return schemas.EvidenceRank{SourceUpdatedAt: time.UnixMilli(r.Upd), Deleted: r.Deleted}, r.Upd > 0
}

// outranked reports whether version m must not replace version held of the same
// message: the evidence version rule keeps the held one (a version ranked lower
// never replaces a higher one, so a late redelivery of an original cannot undo an
// edit or a recall). Versions of unknown rank replace by arrival, as before format 3.
func outranked(m, held msgRef) bool {
	mr, mok := m.rank()
	hr, hok := held.rank()
	return mok && hok && mr.Compare(hr) < 0
}

// defaultPageSize is how many evidence versions a window keeps in its own value
// before it seals them into a page of their own. It bounds what one update reads
// and rewrites, whatever the size of the window.
const defaultPageSize = 64

// windowState is the value under a window key.
//
// A window holds its evidence in Msgs (ordered by (At, ID), one entry per message)
// until Msgs reaches the page size. It then seals Msgs into page Pages (its own key,
// pageKey), keeps the sealed refs in Pending until the page acknowledges them, and
// starts a new Msgs. From then on Msgs is a log of the versions that arrived after
// the seal: an update to a message of an acknowledged page cannot be told apart
// from a new message without reading the page, so it is kept as an entry and the
// versions are folded, in arrival order, when the window closes (fold).
type windowState struct {
	Start     int64    `json:"s"`           // window start, unix ms
	FirstSeen int64    `json:"f,omitempty"` // wall clock when the first evidence arrived, unix ms
	Msgs      []msgRef `json:"m,omitempty"` // ordered by (At, ID); emptied when closed
	ClosedAt  int64    `json:"c,omitempty"` // 0 while open
	Reason    string   `json:"r,omitempty"`
	Count     int      `json:"n,omitempty"` // evidence count at close (unpaged windows)
	Late      int      `json:"l,omitempty"` // late records seen after close
	Pages     int      `json:"p,omitempty"` // sealed pages, pending one included
	Pending   []msgRef `json:"q,omitempty"` // refs of page Pages-1 until it acknowledges them
}

func (w *windowState) closed() bool { return w.ClosedAt != 0 }

// exact reports whether every evidence version the window holds is in its own value
// (no acknowledged page), so apply can classify each version exactly.
func (w *windowState) exact() bool {
	acked := w.Pages
	if w.Pending != nil {
		acked--
	}
	return acked == 0
}

// applyOutcome says what an evidence version did to its window.
type applyOutcome int

const (
	outcomeAdded         applyOutcome = iota + 1 // a message new to the window
	outcomeUpdated                               // a new version (edit, recall) of a message in the window
	outcomeDuplicate                             // the same version again: nothing changes
	outcomeLate                                  // the window is already closed: counted, never reopened
	outcomeDeletedUnseen                         // a recalled message the window never held: nothing to do
	// outcomeLogged: a version for a paged window whose sealed pages may hold the
	// message; it is logged and resolved (new, edit or duplicate) when the window closes.
	outcomeLogged
	// outcomeStale: an older version (by the evidence version rule) of a message the
	// window holds a newer version of; nothing changes.
	outcomeStale
)

func (o applyOutcome) String() string {
	switch o {
	case outcomeAdded:
		return "added"
	case outcomeUpdated:
		return "updated"
	case outcomeDuplicate:
		return "duplicate"
	case outcomeLate:
		return "late"
	case outcomeDeletedUnseen:
		return "deleted_unseen"
	case outcomeLogged:
		return "logged"
	case outcomeStale:
		return "stale"
	}
	return "unknown"
}

// apply records one evidence version in the window. The message list stays ordered by
// (occurred_at, message id), so the closed record is the same whatever order Kafka
// delivered the evidence in. Its cost is bounded by the page size, not by the window.
func (w *windowState) apply(m msgRef, deleted bool, now time.Time) applyOutcome {
	if w.closed() {
		w.Late++
		return outcomeLate
	}
	m.Del, m.Deleted = false, deleted
	for i := range w.Msgs {
		if w.Msgs[i].ID != m.ID {
			continue
		}
		if w.Msgs[i].Hash == m.Hash {
			return outcomeDuplicate
		}
		// an unseen-recall entry (Del) is no version the window holds: the original
		// arriving after it is taken, as in an unpaged window
		if !w.Msgs[i].Del && outranked(m, w.Msgs[i]) {
			return outcomeStale
		}
		w.Msgs[i].Hash, w.Msgs[i].Upd, w.Msgs[i].Deleted = m.Hash, m.Upd, m.Deleted
		w.Msgs[i].Del = w.Msgs[i].Del && deleted
		if w.Msgs[i].At != m.At { // occurred_at never changes in Lark; keep order correct if it did
			w.Msgs[i].At = m.At
			sortRefs(w.Msgs)
		}
		return outcomeUpdated
	}
	for _, p := range w.Pending {
		if p.ID != m.ID {
			continue
		}
		if p.Hash == m.Hash {
			return outcomeDuplicate
		}
		if !p.Del && outranked(m, p) {
			return outcomeStale
		}
		// the pending page already went out with the older version: log the new one
		m.Del = p.Del && deleted
		w.insert(m)
		return outcomeUpdated
	}
	if !w.exact() {
		m.Del = deleted
		w.insert(m)
		return outcomeLogged
	}
	if deleted {
		return outcomeDeletedUnseen
	}
	if len(w.Msgs) == 0 && w.FirstSeen == 0 {
		w.FirstSeen = now.UnixMilli()
	}
	w.insert(m)
	return outcomeAdded
}

func (w *windowState) insert(m msgRef) {
	i, _ := slices.BinarySearchFunc(w.Msgs, m, cmpRef)
	w.Msgs = slices.Insert(w.Msgs, i, m)
}

// seal moves Msgs into a new pending page once it holds pageSize entries, and
// reports the page to write (its number and refs). While a page is pending, Msgs
// keeps growing, and the pending page is sent again every pageSize entries in case
// the first send was lost with a crash.
func (w *windowState) seal(pageSize int) (page int, refs []msgRef, ok bool) {
	if len(w.Msgs) < pageSize {
		return 0, nil, false
	}
	if w.Pending == nil {
		w.Pending, w.Msgs = w.Msgs, nil
		w.Pages++
		return w.Pages - 1, w.Pending, true
	}
	if len(w.Msgs)%pageSize == 0 {
		return w.Pages - 1, w.Pending, true
	}
	return 0, nil, false
}

// fold replays logged evidence versions, in arrival order, into one ordered list
// with one entry per message, keeping the newest version of each by the evidence
// version rule: the same list apply would have kept had the window never been paged.
type fold struct {
	refs []msgRef
	idx  map[string]int
}

func newFold(acc []msgRef) *fold {
	f := &fold{refs: slices.Clone(acc), idx: make(map[string]int, len(acc))}
	for i, r := range f.refs {
		f.idx[r.ID] = i
	}
	return f
}

func (f *fold) add(refs []msgRef) {
	for _, r := range refs {
		if i, ok := f.idx[r.ID]; ok {
			if f.refs[i].Hash != r.Hash && !outranked(r, f.refs[i]) {
				f.refs[i].Hash, f.refs[i].At, f.refs[i].Upd, f.refs[i].Deleted = r.Hash, r.At, r.Upd, r.Deleted
			}
			continue
		}
		if r.Del {
			continue // a recall of a message the window never held
		}
		r.Del = false
		f.idx[r.ID] = len(f.refs)
		f.refs = append(f.refs, r)
	}
}

func (f *fold) result() []msgRef {
	sortRefs(f.refs)
	return f.refs
}

func cmpRef(a, b msgRef) int {
	if a.At != b.At {
		if a.At < b.At {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ID, b.ID)
}

func sortRefs(r []msgRef) { slices.SortFunc(r, cmpRef) }

// openWindow is a chat's reference to one of its open windows.
type openWindow struct {
	Start     int64 `json:"s"`
	FirstSeen int64 `json:"f,omitempty"`
}

// chatState is the value under a chat key.
type chatState struct {
	Open []openWindow `json:"o,omitempty"` // ascending by Start
	// CoveredUntil is the chat collection checkpoint: history is complete up to here
	// (unix ms; 0 = no checkpoint seen yet).
	CoveredUntil int64 `json:"c,omitempty"`
	// Held is coverage a checkpoint announced that does not count yet: the evidence
	// the reconciler produced before it has not been processed (the read-your-writes
	// barrier). Ascending in Until and End; at most maxHeldCoverage entries.
	Held []heldCoverage `json:"h,omitempty"`
}

// heldCoverage is the coverage of one checkpoint (or of several merged ones) waiting
// for its barrier.
type heldCoverage struct {
	Until int64 `json:"u"` // covered until, unix ms
	// End: the coverage counts once the evidence partition of the chat is processed
	// (or committed by the group) up to this offset (exclusive).
	End int64 `json:"e"`
}

// maxHeldCoverage bounds the held checkpoints of a chat. A checkpoint arriving when
// the list is full is merged into its last entry (the later coverage behind the
// higher barrier), which only delays coverage, never advances it early.
const maxHeldCoverage = 8

func (c *chatState) empty() bool {
	return len(c.Open) == 0 && c.CoveredUntil == 0 && len(c.Held) == 0
}

// offer records the coverage of a checkpoint behind its evidence barrier end (0:
// none). Coverage never moves backwards, and a checkpoint's barrier includes the
// barriers of the checkpoints before it: a later checkpoint that does not name the
// earlier evidence (a restarted reconciler) still covers the same history.
func (c *chatState) offer(until, end int64) {
	last := c.CoveredUntil
	if n := len(c.Held); n > 0 {
		last = c.Held[n-1].Until
		end = max(end, c.Held[n-1].End)
	}
	if until <= last {
		return
	}
	if n := len(c.Held); n > 0 && (c.Held[n-1].End == end || n >= maxHeldCoverage) {
		c.Held[n-1] = heldCoverage{Until: until, End: end}
		return
	}
	c.Held = append(c.Held, heldCoverage{Until: until, End: end})
}

// release moves held coverage whose barrier is met into CoveredUntil, oldest first,
// and reports whether any stays held.
func (c *chatState) release(met func(end int64) bool) (held bool) {
	n := 0
	for _, h := range c.Held {
		if !met(h.End) {
			break
		}
		c.CoveredUntil = max(c.CoveredUntil, h.Until)
		n++
	}
	c.Held = slices.Delete(c.Held, 0, n)
	if len(c.Held) == 0 {
		c.Held = nil
	}
	return len(c.Held) > 0
}

// heldWindows counts the open windows that are due on the wall clock at now and
// covered by held coverage, but not by released coverage: windows the barrier holds.
func (p closePolicy) heldWindows(c *chatState, now time.Time) int {
	if !p.requireCoverage || len(c.Held) == 0 {
		return 0
	}
	heldUntil := c.Held[len(c.Held)-1].Until
	n := 0
	for _, w := range c.Open {
		end := time.UnixMilli(w.Start).Add(p.length)
		if now.Before(end.Add(p.grace)) || end.UnixMilli() > heldUntil {
			break
		}
		if c.CoveredUntil < end.UnixMilli() {
			n++
		}
	}
	return n
}

// opened records a window the chat did not know yet; it reports whether it was new.
func (c *chatState) opened(start, firstSeen int64) bool {
	i, found := slices.BinarySearchFunc(c.Open, start, func(o openWindow, s int64) int {
		switch {
		case o.Start < s:
			return -1
		case o.Start > s:
			return 1
		}
		return 0
	})
	if found {
		return false
	}
	c.Open = slices.Insert(c.Open, i, openWindow{Start: start, FirstSeen: firstSeen})
	return true
}

// closePolicy decides when a window is due.
type closePolicy struct {
	length time.Duration
	grace  time.Duration
	// requireCoverage holds a window until the chat collection checkpoint covers its
	// end (reconciliation enabled).
	requireCoverage bool
}

// Close reasons carried by the closed-window record.
const (
	ReasonGraceElapsed        = schemas.CloseReasonGraceElapsed
	ReasonGraceElapsedCovered = schemas.CloseReasonGraceElapsedHistoryCovered
)

// dueTime is when a window opened at start may close on the wall clock.
func (p closePolicy) dueTime(start int64) time.Time {
	return time.UnixMilli(start).Add(p.length + p.grace)
}

// takeDue removes and returns, oldest first, the windows that may close at now. It
// stops at the first window that is not due, so a younger window never closes before
// an older one of the same chat.
func (p closePolicy) takeDue(c *chatState, now time.Time) (due []openWindow, reason string) {
	reason = ReasonGraceElapsed
	if p.requireCoverage {
		reason = ReasonGraceElapsedCovered
	}
	n := 0
	for _, w := range c.Open {
		end := time.UnixMilli(w.Start).Add(p.length)
		if now.Before(end.Add(p.grace)) {
			break
		}
		if p.requireCoverage && c.CoveredUntil < end.UnixMilli() {
			break
		}
		n++
	}
	if n == 0 {
		return nil, reason
	}
	due = slices.Clone(c.Open[:n])
	c.Open = slices.Delete(c.Open, 0, n)
	return due, reason
}

// nextDue is the earliest wall-clock time at which one of the chat's windows could
// close, or the zero time if none can close without new coverage.
func (p closePolicy) nextDue(c *chatState) time.Time {
	if len(c.Open) == 0 {
		return time.Time{}
	}
	w := c.Open[0]
	end := time.UnixMilli(w.Start).Add(p.length)
	if p.requireCoverage && c.CoveredUntil < end.UnixMilli() {
		return time.Time{}
	}
	return end.Add(p.grace)
}

// pageState is the value under a page key: one sealed page of a window's evidence
// log. It is written once (again only if a seal is resent) and dropped with the
// window's marker after retention.
type pageState struct {
	Refs []msgRef `json:"m"`
}

// tableValue is the union stored in the group table: exactly one field is set.
type tableValue struct {
	Chat   *chatState   `json:"chat,omitempty"`
	Window *windowState `json:"win,omitempty"`
	Page   *pageState   `json:"page,omitempty"`
}

// loopOp is the kind of an internal message on the group's loop topic.
type loopOp string

const (
	opEvidence loopOp = "evidence" // input → window: add or update an evidence version
	opOpened   loopOp = "opened"   // window → chat: the window received its first evidence
	opClose    loopOp = "close"    // chat → window: close now and emit the record
	opSeal     loopOp = "seal"     // window → page: store these refs as page Page
	opSealed   loopOp = "sealed"   // page → window: page Page is stored
	opCollect  loopOp = "collect"  // window → page → next page: fold the pages, emit after the last
)

// loopMsg is the value on the loop topic.
type loopMsg struct {
	Op        loopOp `json:"op"`
	Ref       msgRef `json:"ref,omitzero"`
	Deleted   bool   `json:"del,omitempty"`
	Start     int64  `json:"start,omitempty"`
	FirstSeen int64  `json:"first,omitempty"`
	Reason    string `json:"reason,omitempty"`
	ClosedAt  int64  `json:"closed,omitempty"`
	// seal, sealed, collect
	Page  int `json:"page,omitempty"`
	Pages int `json:"pages,omitempty"` // collect: the window's page count
	// Refs: seal, the page's refs; collect, the evidence folded so far (ordered).
	Refs []msgRef `json:"refs,omitempty"`
	// Pending and Tail (collect): the window's unacknowledged page and its own log,
	// folded after the pages.
	Pending []msgRef `json:"pending,omitempty"`
	Tail    []msgRef `json:"tail,omitempty"`
}

// parseChatKey is ids.ParseChatKey for table keys.
func parseChatKey(key string) (ids.WorkspaceID, ids.ChatID, error) { return ids.ParseChatKey(key) }
