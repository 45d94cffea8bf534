package windows

import (
	"slices"
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

// msgRef is one evidence version inside an open window.
type msgRef struct {
	ID   string `json:"i"`
	At   int64  `json:"t"` // occurred_at, unix ms
	Hash string `json:"h"`
}

// windowState is the value under a window key.
type windowState struct {
	Start     int64    `json:"s"`           // window start, unix ms
	FirstSeen int64    `json:"f,omitempty"` // wall clock when the first evidence arrived, unix ms
	Msgs      []msgRef `json:"m,omitempty"` // ordered by (At, ID); emptied when closed
	ClosedAt  int64    `json:"c,omitempty"` // 0 while open
	Reason    string   `json:"r,omitempty"`
	Count     int      `json:"n,omitempty"` // evidence count at close
	Late      int      `json:"l,omitempty"` // late records seen after close
}

func (w *windowState) closed() bool { return w.ClosedAt != 0 }

// applyOutcome says what an evidence version did to its window.
type applyOutcome int

const (
	outcomeAdded         applyOutcome = iota + 1 // a message new to the window
	outcomeUpdated                               // a new version (edit, recall) of a message in the window
	outcomeDuplicate                             // the same version again: nothing changes
	outcomeLate                                  // the window is already closed: counted, never reopened
	outcomeDeletedUnseen                         // a recalled message the window never held: nothing to do
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
	}
	return "unknown"
}

// apply records one evidence version in the window. The message list stays ordered by
// (occurred_at, message id), so the closed record is the same whatever order Kafka
// delivered the evidence in.
func (w *windowState) apply(m msgRef, deleted bool, now time.Time) applyOutcome {
	if w.closed() {
		w.Late++
		return outcomeLate
	}
	for i := range w.Msgs {
		if w.Msgs[i].ID != m.ID {
			continue
		}
		if w.Msgs[i].Hash == m.Hash {
			return outcomeDuplicate
		}
		w.Msgs[i].Hash = m.Hash
		if w.Msgs[i].At != m.At { // occurred_at never changes in Lark; keep order correct if it did
			w.Msgs[i].At = m.At
			sortRefs(w.Msgs)
		}
		return outcomeUpdated
	}
	if deleted {
		return outcomeDeletedUnseen
	}
	if len(w.Msgs) == 0 && w.FirstSeen == 0 {
		w.FirstSeen = now.UnixMilli()
	}
	i, _ := slices.BinarySearchFunc(w.Msgs, m, cmpRef)
	w.Msgs = slices.Insert(w.Msgs, i, m)
	return outcomeAdded
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
}

func (c *chatState) empty() bool { return len(c.Open) == 0 && c.CoveredUntil == 0 }

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

// tableValue is the union stored in the group table: exactly one field is set.
type tableValue struct {
	Chat   *chatState   `json:"chat,omitempty"`
	Window *windowState `json:"win,omitempty"`
}

// loopOp is the kind of an internal message on the group's loop topic.
type loopOp string

const (
	opEvidence loopOp = "evidence" // input → window: add or update an evidence version
	opOpened   loopOp = "opened"   // window → chat: the window received its first evidence
	opClose    loopOp = "close"    // chat → window: close now and emit the record
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
}

// parseChatKey is ids.ParseChatKey for table keys.
func parseChatKey(key string) (ids.WorkspaceID, ids.ChatID, error) { return ids.ParseChatKey(key) }
