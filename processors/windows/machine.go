package windows

import (
	"time"

	"github.com/larkline/larkline/schemas"
)

// The window processor's logic as pure functions of (chat value, message, clock):
// the Goka callbacks (callbacks.go) and the crash-point simulator (sim_test.go) run
// the same code. Each function changes the chat value it is given and returns what
// to produce; none does I/O.

// noteKind says what an evidence record was, as far as windows care.
type noteKind uint8

const (
	kindEligible   noteKind = 1 // a synthesis-eligible version: opens or grows its window
	kindRecall     noteKind = 2 // a recall: grows the window that holds the message, never opens one
	kindIneligible noteKind = 3 // evidence that never opens a window (own app, cards, system, ...)
	kindTombstone  noteKind = 4 // a null value (retention removed the message)
	kindDead       noteKind = 5 // parked in the dead-letter topic
)

// loopOp is the kind of a message on the group's loop topic; every one goes to a
// chat key.
type loopOp uint8

const (
	// opNote: one evidence record of the chat (every record sends exactly one, so
	// evidence commits advance in order).
	opNote loopOp = 1
	// opClose: the scan decided that windows up to Start are due (or that the
	// closing window Start is to be emitted again).
	opClose loopOp = 2
	// opTidy: the scan found the value prunable (aged bitmap words, old coverage).
	opTidy loopOp = 3
)

// loopMsg is the value on the loop topic.
type loopMsg struct {
	Op loopOp
	// note
	Offset int64 // the evidence record's offset
	// Run is the id of the evidence reader's run that sent the note (0: a note of
	// format 4, which has none); After is one past the offset of the note the run
	// sent the chat before (0: the run's first). D28, chains.go.
	Run   uint64
	After int64
	Kind  noteKind
	At    int64 // occurred_at, unix ms (eligible and recall)
	// close: the window and the decision's time (unix ms)
	Start   int64
	Decided int64
}

// Outcomes of a note, the label of larkline_windows_evidence_total.
const (
	outOpened         = "opened"          // a new window
	outAdded          = "added"           // a version into an open window
	outRecalled       = "recalled"        // a recall into an open window
	outDuplicate      = "duplicate"       // a redelivered record (offset already applied)
	outOvertaken      = "overtaken"       // landed after an earlier note of its run that failed (D28)
	outLateEdit       = "late_edit"       // an eligible version for a closing or closed window
	outLateRecall     = "late_recall"     // a recall for a closing or closed window
	outRecallUnopened = "recall_unopened" // a recall for a window that has no evidence
	outAgedOut        = "aged_out"        // older than the retention horizon
	outIneligible     = "ineligible"
	outTombstone      = "tombstone"
	outDeadLettered   = "dead_lettered"
)

// machine holds the window rules of one processor version.
type machine struct {
	length      int64 // window length, ms
	grace       int64 // ms
	retention   int64 // ms
	coverage    bool  // windows wait for history coverage
	maxVersions int64 // a window with more versions is flagged oversized
	reemitAfter int64 // ms: a window closing for longer is emitted again
	version     string
}

func newMachine(o Options) machine {
	return machine{
		length: o.Window.Milliseconds(), grace: o.Grace.Milliseconds(), retention: o.Retention.Milliseconds(),
		coverage: o.RequireCoverage, maxVersions: int64(*o.OversizedVersions), reemitAfter: o.ReemitAfter.Milliseconds(),
		version: o.ProcessorVersion,
	}
}

// index is the window index of a window start (or of any instant in the window).
func (m machine) index(ms int64) int64 {
	if ms >= 0 {
		return ms / m.length
	}
	return -((-ms + m.length - 1) / m.length)
}

// start is the window start of an instant.
func (m machine) start(ms int64) int64 { return m.index(ms) * m.length }

// agedOut reports whether the window starting at start ended before the retention
// horizon: its evidence is no longer taken in, and its closed mark may go.
func (m machine) agedOut(start, now int64) bool { return start+m.length < now-m.retention }

// horizon is the lowest window index that is not aged out at now, less one bitmap
// word of margin for clocks that differ between instances.
func (m machine) horizon(now int64) int64 { return m.index(now-m.retention) - 1 - 64 }

// due reports whether an open window may close at now: its grace has passed and,
// with coverage, history covers its end.
func (m machine) due(c *chatValue, w *window, now int64) bool {
	end := w.Start + m.length
	if now < end+m.grace {
		return false
	}
	return !m.coverage || c.CoveredUntil >= end
}

// passed reports whether the input barrier safe (unix ms) is at or past the window's
// end + grace: every record in the partition when the grace passed is applied.
func (m machine) passed(w *window, safe int64) bool { return w.Start+m.length+m.grace <= safe }

// inputHeld counts the open windows due at now (wall clock and coverage) that the
// input barrier safe still holds: on-time evidence may still be waiting unread.
func (m machine) inputHeld(c *chatValue, now, safe int64) int {
	n := 0
	for i := range c.Open {
		w := &c.Open[i]
		if w.Status != statusOpen {
			continue
		}
		if !m.due(c, w, now) {
			break
		}
		if !m.passed(w, safe) {
			n++
		}
	}
	return n
}

// note applies one evidence record's note and returns its outcome and whether the
// window it grew just became oversized.
//
// A note of a run (D28) counts only when it extends the chain of that run the chat
// saw: a note whose predecessor never arrived overtook a failed produce, and changes
// nothing; the next run sends both again, in order. So the chat's applied evidence
// is always all of its offsets below Applied, and a note below it is a duplicate.
func (m machine) note(c *chatValue, n *loopMsg, now int64) (outcome string, oversized bool) {
	if n.Run != 0 {
		switch {
		case n.Run == c.Run && n.Offset < c.RunNext:
			return outDuplicate, false // a redelivered note of the current chain
		case n.Run == c.Run && n.After != c.RunNext, n.Run != c.Run && n.After != 0:
			return outOvertaken, false
		}
		c.Run, c.RunNext = n.Run, n.Offset+1
	}
	if n.Offset < c.Applied {
		return outDuplicate, false
	}
	c.Applied = n.Offset + 1
	outcome, oversized = m.classify(c, n, now)
	c.release()
	m.tidy(c, now)
	return outcome, oversized
}

func (m machine) classify(c *chatValue, n *loopMsg, now int64) (string, bool) {
	switch n.Kind {
	case kindIneligible:
		return outIneligible, false
	case kindTombstone:
		return outTombstone, false
	case kindEligible, kindRecall:
	default:
		return outDeadLettered, false
	}
	recall := n.Kind == kindRecall
	start := m.start(n.At)
	if m.agedOut(start, now) {
		return outAgedOut, false
	}
	late := outLateEdit
	if recall {
		late = outLateRecall
	}
	i, found := c.find(start)
	if found {
		w := &c.Open[i]
		if w.Status != statusOpen {
			return late, false
		}
		w.Versions++
		w.Low, w.High = min(w.Low, n.Offset), max(w.High, n.Offset)
		w.FirstAt, w.LastAt = min(w.FirstAt, n.At), max(w.LastAt, n.At)
		became := !w.Oversized && m.maxVersions > 0 && w.Versions > m.maxVersions
		w.Oversized = w.Oversized || became
		if recall {
			return outRecalled, became
		}
		return outAdded, became
	}
	if c.isClosed(m.index(start)) {
		return late, false
	}
	if recall {
		return outRecallUnopened, false
	}
	w := window{Start: start, Status: statusOpen, Versions: 1, Low: n.Offset, High: n.Offset,
		FirstAt: n.At, LastAt: n.At, FirstSeen: now}
	w.Oversized = m.maxVersions > 0 && w.Versions > m.maxVersions
	c.Open = append(c.Open, window{})
	copy(c.Open[i+1:], c.Open[i:])
	c.Open[i] = w
	return outOpened, w.Oversized
}

// Reasons of larkline_windows_late_edits_total: where the window of a late edit was.
const (
	lateClosing = "window_closing" // closed, its record not read back yet
	lateClosed  = "window_closed"  // closed and read back (its closed mark)
)

// lateReason says why an eligible version at (unix ms) was late for the chat, after
// note counted it late_edit.
func (m machine) lateReason(c *chatValue, at int64) string {
	if _, found := c.find(m.start(at)); found {
		return lateClosing
	}
	return lateClosed
}

// checkpoint applies a collection checkpoint: coverage until (unix ms), held until
// the chat has applied its evidence up to end.
func (m machine) checkpoint(c *chatValue, until, end int64, now int64) {
	c.offer(until, end)
	c.release()
	m.tidy(c, now)
}

// closeWindows acts on a close decision for the one window msg.Start: an open window
// that is due at the decision's time, with no older window of the chat still open,
// is marked closing with the decision's time; a window closing (announced) for at
// least reemitAfter is announced again as it is. It returns the windows to emit (none, or that one). A decision names its
// window and carries its time, so a redelivered decision applied to state that has
// moved on gives the same record as the first time, or none.
func (m machine) closeWindows(c *chatValue, msg *loopMsg, now int64) []window {
	i, found := c.find(msg.Start)
	if !found {
		m.tidy(c, now)
		return nil // closed and read back already, or never opened
	}
	w := &c.Open[i]
	var out []window
	switch {
	case w.Status == statusClosing && now-w.EmittedAt >= m.reemitAfter:
		// announced long enough ago and not read back: announce again
		w.EmittedAt = now
		out = append(out, *w)
	case w.Status == statusClosing:
		// a second decision taken before the first was applied: already announced
	case m.due(c, w, msg.Decided) && (i == 0 || !m.anyOpenBefore(c, i)):
		w.Status, w.ClosedAt, w.Covered, w.EmittedAt = statusClosing, msg.Decided, m.coverage, now
		out = append(out, *w)
	}
	m.tidy(c, now)
	return out
}

// anyOpenBefore reports whether a window older than c.Open[i] is still open (not
// closing): the younger one must wait for it (oldest first per chat).
func (m machine) anyOpenBefore(c *chatValue, i int) bool {
	for j := range i {
		if c.Open[j].Status == statusOpen {
			return true
		}
	}
	return false
}

// closed applies a closed record of this processor version read back from the
// closed-window topic: the window is closed for good. It reports whether the value
// changed.
func (m machine) closed(c *chatValue, start int64, now int64) bool {
	changed := false
	if i, found := c.find(start); found {
		c.Open = append(c.Open[:i], c.Open[i+1:]...)
		changed = true
	}
	if !m.agedOut(start, now) && !c.isClosed(m.index(start)) {
		c.markClosed(m.index(start))
		changed = true
	}
	m.tidy(c, now)
	return changed
}

// tidy drops what no longer gates anything at now: closed marks and coverage of
// windows past the retention horizon. Open windows are never dropped, however old:
// they close.
func (m machine) tidy(c *chatValue, now int64) {
	if len(c.Closed) > 0 {
		c.trimClosed(m.horizon(now))
	}
	if len(c.Open) == 0 && len(c.Held) == 0 && c.CoveredUntil > 0 && c.CoveredUntil < now-m.retention-m.length {
		c.CoveredUntil = 0
	}
}

// needsTidy reports whether tidy would change the value at now.
func (m machine) needsTidy(c *chatValue, now int64) bool {
	if len(c.Closed) > 0 && floor64(m.horizon(now)) > c.ClosedBase {
		return true
	}
	return len(c.Open) == 0 && len(c.Held) == 0 && c.CoveredUntil > 0 && c.CoveredUntil < now-m.retention-m.length
}

// decide is the scan's part: it reads the value and returns the loop messages that
// act on it, writing nothing. Every due window gets a close, oldest first, up to the
// first open window that is not due; a window closing for longer than reemitAfter
// gets one to be emitted again; a prunable value gets a tidy. safe is the input
// barrier of the chat's partition (barrier.go, D23): every record that was in the
// partition at safe is applied, so a window whose end + grace is after safe may
// still have on-time evidence waiting and is not due yet.
func (m machine) decide(c *chatValue, now, safe int64) []loopMsg {
	var out []loopMsg
	blocked := false
	for i := range c.Open {
		w := &c.Open[i]
		if w.Status == statusClosing {
			if now-w.EmittedAt >= m.reemitAfter {
				out = append(out, loopMsg{Op: opClose, Start: w.Start, Decided: w.ClosedAt})
			}
			continue
		}
		if blocked || !m.due(c, w, now) || !m.passed(w, safe) {
			blocked = true
			continue
		}
		out = append(out, loopMsg{Op: opClose, Start: w.Start, Decided: now})
	}
	if len(out) == 0 && m.needsTidy(c, now) {
		out = append(out, loopMsg{Op: opTidy})
	}
	return out
}

// nextDue is the earliest wall-clock time at which one of the chat's open windows
// could close, or 0 if none can close without new coverage.
func (m machine) nextDue(c *chatValue) int64 {
	for i := range c.Open {
		w := &c.Open[i]
		if w.Status != statusOpen {
			continue
		}
		end := w.Start + m.length
		if m.coverage && c.CoveredUntil < end {
			return 0
		}
		return end + m.grace
	}
	return 0
}

// heldWindows counts the open windows due on the wall clock and covered by held
// coverage but not by released coverage: windows the evidence barrier holds.
func (m machine) heldWindows(c *chatValue, now int64) int {
	if !m.coverage || len(c.Held) == 0 {
		return 0
	}
	heldUntil := c.Held[len(c.Held)-1].Until
	n := 0
	for i := range c.Open {
		w := &c.Open[i]
		end := w.Start + m.length
		if w.Status != statusOpen {
			continue
		}
		if now < end+m.grace || end > heldUntil {
			break
		}
		if c.CoveredUntil < end {
			n++
		}
	}
	return n
}

// record builds the (version 3) closed record of a closing window of the chat whose
// evidence is on partition, from the window's state alone: every copy of it is
// byte-identical.
func (m machine) record(chatKey string, partition int32, w *window) (schemas.ClosedWindow, error) {
	ws, chat, err := parseChatKey(chatKey)
	if err != nil {
		return schemas.ClosedWindow{}, err
	}
	return schemas.ClosedWindow{
		WorkspaceID:       ws,
		ChatID:            chat,
		WindowStart:       msTime(w.Start),
		WindowEnd:         msTime(w.Start + m.length),
		ProcessorVersion:  m.version,
		EvidenceCount:     int(min(w.Versions, 1<<31-1)),
		ClosedAt:          msTime(w.ClosedAt),
		Reason:            w.reason(),
		EvidencePartition: partition,
		EvidenceLowOffset: w.Low,
		EvidenceEndOffset: w.High + 1,
		FirstOccurredAt:   msTime(w.FirstAt),
		LastOccurredAt:    msTime(w.LastAt),
		Oversized:         w.Oversized,
	}, nil
}

// reason is the close reason a closing window's record carries.
func (w *window) reason() string {
	if w.Covered {
		return schemas.CloseReasonGraceElapsedHistoryCovered
	}
	return schemas.CloseReasonGraceElapsed
}

// Close reasons carried by the closed-window record.
const (
	ReasonGraceElapsed        = schemas.CloseReasonGraceElapsed
	ReasonGraceElapsedCovered = schemas.CloseReasonGraceElapsedHistoryCovered
)

// msTime turns unix ms into a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
