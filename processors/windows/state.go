package windows

import (
	"math/bits"
	"slices"

	"github.com/larkline/larkline/schemas/ids"
)

// The group table holds one value per chat, under the chat key <workspace>/<chat>
// (ids.ChatKey), the same key the evidence records of the chat hash by
// (ids.PartitionKey). Nothing is kept per message, per window key or per page: a
// chat value holds a few counters per open window, the chat's coverage and a bitmap
// of the windows it closed within the retention horizon, so its size grows with the
// chat's open windows only (at most Retention/Window of them).

// winStatus is where an open window is in its close.
type winStatus uint8

const (
	// statusOpen: the window takes in evidence.
	statusOpen winStatus = 1
	// statusClosing: the window's closed record was emitted (at least once) and is
	// not yet read back from the closed-window topic. Its fields are frozen: every
	// copy of its record is built from them and is byte-identical.
	statusClosing winStatus = 2
)

// window is one open (or closing) window of a chat.
type window struct {
	Start  int64 // window start, unix ms
	Status winStatus
	// Versions counts the evidence versions (records of the evidence topic) the
	// window took in, duplicates at other offsets included.
	Versions int64
	// Low and High are the lowest and highest evidence offsets of those versions on
	// the chat's partition.
	Low, High int64
	// FirstAt and LastAt bound their occurred_at (unix ms).
	FirstAt, LastAt int64
	// FirstSeen is the wall clock when the window opened (unix ms), for the
	// oldest-uncovered gauge.
	FirstSeen int64
	// ClosedAt is the close decision's time (unix ms), set when closing.
	ClosedAt int64
	// Covered: the close waited for history coverage (the record's reason).
	Covered bool
	// EmittedAt is the wall clock of the last emit of its record (unix ms).
	EmittedAt int64
	// Oversized: Versions passed the oversized bound.
	Oversized bool
}

// heldCoverage is the coverage of one checkpoint (or of several merged ones) waiting
// for its barrier.
type heldCoverage struct {
	Until int64 // covered until, unix ms
	// End: the coverage counts once the chat's applied evidence offset reaches this
	// offset (one past the highest offset of the evidence the reconciler produced
	// before the checkpoint).
	End int64
}

// maxHeldCoverage bounds the held checkpoints of a chat. A checkpoint arriving when
// the list is full is merged into its last entry (the later coverage behind the
// higher barrier), which only delays coverage, never advances it early.
const maxHeldCoverage = 8

// chatValue is the value under a chat key.
type chatValue struct {
	// Applied is one past the highest evidence offset of the chat applied; a note
	// below it is a redelivery and changes nothing.
	Applied int64
	// Run is the evidence reader's run whose notes the chat follows, and RunNext one
	// past the offset of the last of them it took (applied or duplicate), D28.
	Run     uint64
	RunNext int64
	// CoveredUntil is the chat collection checkpoint that counts: history is
	// complete up to here (unix ms; 0 = none yet).
	CoveredUntil int64
	// Held is coverage announced by checkpoints whose evidence the chat has not
	// applied yet (the read-your-writes barrier); ascending in Until and End.
	Held []heldCoverage
	// Closed is a bitmap of closed windows by window index (start / window length):
	// bit i of word w is window ClosedBase + 64*w + i. ClosedBase is a multiple of 64.
	ClosedBase int64
	Closed     []uint64
	// Open holds the open and closing windows, ascending by Start.
	Open []window
}

// empty reports whether the value holds nothing worth keeping. A value that follows
// a run's chain of notes (D28) is kept: a note of the run after a deleted value
// could not tell a predecessor that was applied from one that failed.
func (c *chatValue) empty() bool {
	return c.Run == 0 && len(c.Open) == 0 && len(c.Held) == 0 && c.CoveredUntil == 0 && !c.anyClosed()
}

func (c *chatValue) anyClosed() bool {
	for _, w := range c.Closed {
		if w != 0 {
			return true
		}
	}
	return false
}

// find returns the index of the open window starting at start.
func (c *chatValue) find(start int64) (int, bool) {
	return slices.BinarySearchFunc(c.Open, start, func(w window, s int64) int {
		switch {
		case w.Start < s:
			return -1
		case w.Start > s:
			return 1
		}
		return 0
	})
}

// isClosed reports whether window index idx is marked closed.
func (c *chatValue) isClosed(idx int64) bool {
	if idx < c.ClosedBase {
		return false
	}
	off := idx - c.ClosedBase
	w := off / 64
	if w >= int64(len(c.Closed)) {
		return false
	}
	return c.Closed[w]&(1<<uint(off%64)) != 0
}

// markClosed marks window index idx closed, growing the bitmap as needed.
func (c *chatValue) markClosed(idx int64) {
	if len(c.Closed) == 0 {
		c.ClosedBase = floor64(idx)
		c.Closed = []uint64{0}
	}
	if idx < c.ClosedBase {
		nb := floor64(idx)
		c.Closed = append(make([]uint64, (c.ClosedBase-nb)/64), c.Closed...)
		c.ClosedBase = nb
	}
	off := idx - c.ClosedBase
	for off/64 >= int64(len(c.Closed)) {
		c.Closed = append(c.Closed, 0)
	}
	c.Closed[off/64] |= 1 << uint(off%64)
}

// trimClosed drops the bitmap's words wholly below window index keep, and trailing
// and leading zero words.
func (c *chatValue) trimClosed(keep int64) {
	nb := floor64(keep)
	if nb > c.ClosedBase {
		drop := min((nb-c.ClosedBase)/64, int64(len(c.Closed)))
		c.Closed = c.Closed[drop:]
		c.ClosedBase += 64 * drop
	}
	for len(c.Closed) > 0 && c.Closed[0] == 0 {
		c.Closed = c.Closed[1:]
		c.ClosedBase += 64
	}
	for len(c.Closed) > 0 && c.Closed[len(c.Closed)-1] == 0 {
		c.Closed = c.Closed[:len(c.Closed)-1]
	}
	if len(c.Closed) == 0 {
		c.Closed, c.ClosedBase = nil, 0
	}
}

// closedCount is the number of closed windows marked.
func (c *chatValue) closedCount() int {
	n := 0
	for _, w := range c.Closed {
		n += bits.OnesCount64(w)
	}
	return n
}

// floor64 rounds a window index down to a multiple of 64 (a bitmap word).
func floor64(idx int64) int64 {
	if idx >= 0 {
		return idx &^ 63
	}
	return -((-idx + 63) &^ 63)
}

// offer records the coverage of a checkpoint behind its evidence barrier end (0:
// none). Coverage never moves backwards, and a checkpoint's barrier includes the
// barriers of the checkpoints before it: a later checkpoint that does not name the
// earlier evidence (a restarted reconciler) still covers the same history.
func (c *chatValue) offer(until, end int64) {
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

// release moves held coverage whose barrier the applied offset meets into
// CoveredUntil, oldest first.
func (c *chatValue) release() {
	n := 0
	for _, h := range c.Held {
		if h.End > c.Applied {
			break
		}
		c.CoveredUntil = max(c.CoveredUntil, h.Until)
		n++
	}
	if n > 0 {
		c.Held = slices.Delete(c.Held, 0, n)
	}
	if len(c.Held) == 0 {
		c.Held = nil
	}
}

// clone returns a deep copy (the visit decides on a copy, the crash simulator keeps
// snapshots).
func (c *chatValue) clone() *chatValue {
	d := *c
	d.Held = slices.Clone(c.Held)
	d.Closed = slices.Clone(c.Closed)
	d.Open = slices.Clone(c.Open)
	return &d
}

// parseChatKey is ids.ParseChatKey for table keys.
func parseChatKey(key string) (ids.WorkspaceID, ids.ChatID, error) { return ids.ParseChatKey(key) }
