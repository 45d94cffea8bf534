package windows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lovoo/goka"

	"github.com/larkline/larkline/internal/ids"
	"github.com/larkline/larkline/schemas"
)

// onEvidence routes one evidence version to its window. It keeps no per-message state
// of its own: dedup happens in the window, which holds the versions it has seen.
func (p *Processor) onEvidence(ctx goka.Context, msg any) {
	// Whatever becomes of the record, it is processed once this callback returns; a
	// loopback it sends precedes any close a later callback of the partition sends.
	defer p.barrier.evidenceSeen(ctx.Partition(), ctx.Offset())
	raw, _ := msg.([]byte)
	if raw == nil {
		// A tombstone: retention removed the message's evidence. Closed windows never
		// change, and open ones are long gone by then.
		p.m.evidence.WithLabelValues("tombstone").Inc()
		return
	}
	ev, err := p.decodeEvidence(ctx.Key(), raw)
	if err != nil {
		p.deadLetter(ctx, err, raw)
		return
	}
	if !ev.SynthesisEligible && !ev.Deleted {
		// own-app messages, cards, attachments and system messages stay evidence but
		// never open a window (design §7.3). A recall is never eligible, yet it must
		// reach the window that holds the message.
		p.m.evidence.WithLabelValues("ineligible").Inc()
		return
	}
	now := p.opts.Clock()
	start := ids.WindowStart(ev.OccurredAt, p.opts.Window)
	if start.Add(p.opts.Window).Before(now.Add(-p.opts.Retention)) {
		p.m.evidence.WithLabelValues("aged_out").Inc()
		return
	}
	chatKey := ids.ChatKey(ev.WorkspaceID, ev.ChatID)
	ctx.Loopback(windowKey(chatKey, start), &loopMsg{
		Op: opEvidence,
		Ref: msgRef{ID: string(ev.MessageID), At: ev.OccurredAt.UnixMilli(), Hash: ev.ContentHash,
			Upd: ev.SourceUpdatedAt.UnixMilli(), Deleted: ev.Deleted},
		Deleted: ev.Deleted,
	})
}

// onCheckpoint records how far history is collected and closes what that uncovered.
func (p *Processor) onCheckpoint(ctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	if raw == nil {
		return // a compacted-away checkpoint: coverage never moves backwards
	}
	cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
	cp, err := p.opts.Codecs.Checkpoint.Decode(cctx, raw)
	cancel()
	if err == nil && cp.Key() != ctx.Key() {
		err = fmt.Errorf("%w: checkpoint for %s under key %s", ErrKeyMismatch, cp.Key(), ctx.Key())
	}
	if err != nil {
		p.deadLetter(ctx, err, raw)
		return
	}
	st := p.chat(ctx)
	st.offer(cp.CoveredUntil.UnixMilli(), cp.EvidenceEndOffset)
	p.closeDue(ctx, st, p.opts.Clock())
}

func (p *Processor) onLoop(ctx goka.Context, msg any) {
	m, ok := msg.(*loopMsg)
	if !ok || m == nil {
		return
	}
	switch m.Op {
	case opEvidence:
		p.onWindowEvidence(ctx, m)
	case opOpened:
		st := p.chat(ctx)
		st.opened(m.Start, m.FirstSeen)
		p.noteDue(p.policy.dueTime(m.Start))
		p.closeDue(ctx, st, p.opts.Clock())
	case opClose:
		p.onWindowClose(ctx, m)
	case opSeal:
		// a page stores its refs (again, if a seal was resent) and tells its window
		wk, _, _, page, ok := splitPageKey(ctx.Key())
		if !ok || page != m.Page {
			return
		}
		ctx.SetValue(&tableValue{Page: &pageState{Refs: m.Refs}})
		ctx.Loopback(wk, &loopMsg{Op: opSealed, Page: m.Page})
	case opSealed:
		p.onPageSealed(ctx, m)
	case opCollect:
		p.onCollect(ctx, m)
	}
}

func (p *Processor) onWindowEvidence(ctx goka.Context, m *loopMsg) {
	chatKey, start, ok := splitWindowKey(ctx.Key())
	if !ok {
		return
	}
	w, isNew := p.window(ctx, start)
	now := p.opts.Clock()
	out := w.apply(m.Ref, m.Deleted, now)
	p.m.evidence.WithLabelValues(out.String()).Inc()
	switch out {
	case outcomeDuplicate, outcomeDeletedUnseen:
		// nothing changed; a recalled message the window never held has nothing to synthesize
		return
	case outcomeLate:
		p.m.late.Inc()
		p.log.Info("late evidence for a closed window; counted, not reopened",
			"window_key", ctx.Key(), "message_id", m.Ref.ID, "content_hash", m.Ref.Hash)
	}
	if page, refs, seal := w.seal(p.pageSize()); seal {
		ctx.Loopback(pageKey(ctx.Key(), page), &loopMsg{Op: opSeal, Page: page, Refs: refs})
		p.m.pagesSealed.Inc()
	}
	ctx.SetValue(&tableValue{Window: w})
	if isNew {
		ctx.Loopback(chatKey, &loopMsg{Op: opOpened, Start: w.Start, FirstSeen: w.FirstSeen})
	}
}

func (p *Processor) pageSize() int {
	if p.opts.pageSize > 0 {
		return p.opts.pageSize
	}
	return defaultPageSize
}

// onPageSealed drops the window's copy of a page once the page stored it.
func (p *Processor) onPageSealed(ctx goka.Context, m *loopMsg) {
	v, _ := ctx.Value().(*tableValue)
	if v == nil || v.Window == nil {
		return
	}
	w := v.Window
	if w.closed() || w.Pending == nil || m.Page != w.Pages-1 {
		return // an acknowledgement of a resent or already folded page
	}
	w.Pending = nil
	ctx.SetValue(&tableValue{Window: w})
}

func (p *Processor) onWindowClose(ctx goka.Context, m *loopMsg) {
	chatKey, start, ok := splitWindowKey(ctx.Key())
	if !ok {
		return
	}
	w, isNew := p.window(ctx, start)
	if isNew || w.closed() {
		return // already closed (a redelivered close) or never existed
	}
	if w.Pages == 0 {
		if !p.emitClosed(ctx, chatKey, start, w.Msgs, m.ClosedAt, m.Reason) {
			return
		}
		w.Count = len(w.Msgs)
	} else {
		// The pages are folded in order, each in its own callback, and the last one
		// emits the record. The window's own refs travel with the fold.
		c := &loopMsg{Op: opCollect, Start: w.Start, ClosedAt: m.ClosedAt, Reason: m.Reason,
			Page: 0, Pages: w.Pages, Pending: w.Pending, Tail: w.Msgs}
		ctx.Loopback(pageKey(ctx.Key(), 0), c)
	}
	w.Msgs, w.Pending, w.ClosedAt, w.Reason = nil, nil, m.ClosedAt, m.Reason
	ctx.SetValue(&tableValue{Window: w})
}

// onCollect folds one sealed page into a closing window's evidence and passes the
// fold on to the next page; the last page emits the closed record. Pages stay until
// retention drops them with the window's marker, so a redelivered fold finds them.
func (p *Processor) onCollect(ctx goka.Context, m *loopMsg) {
	wk, chatKey, start, page, ok := splitPageKey(ctx.Key())
	if !ok || page != m.Page || m.Page >= m.Pages {
		return
	}
	f := newFold(m.Refs)
	if v, _ := ctx.Value().(*tableValue); v != nil && v.Page != nil {
		f.add(v.Page.Refs)
	} else if m.Page == m.Pages-1 && m.Pending != nil {
		f.add(m.Pending) // the seal of the last page had not arrived; the window kept it
	} else {
		p.m.pagesMissing.Inc()
		p.log.Error("sealed page of a closing window is missing; its evidence is not in the closed record",
			"window_key", wk, "page", page)
	}
	if m.Page+1 < m.Pages {
		next := *m
		next.Page, next.Refs = m.Page+1, f.result()
		ctx.Loopback(pageKey(wk, next.Page), &next)
		return
	}
	f.add(m.Tail)
	p.emitClosed(ctx, chatKey, start, f.result(), m.ClosedAt, m.Reason)
}

// emitClosed builds and emits the closed-window record of one window with the given
// (ordered) evidence. It reports false after failing the processor.
func (p *Processor) emitClosed(ctx goka.Context, chatKey string, start time.Time, refs []msgRef, closedAtMS int64, reason string) bool {
	rec, err := p.closedRecord(chatKey, start, refs, closedAtMS, reason)
	if err != nil {
		return false
	}
	cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
	b, err := p.opts.Codecs.ClosedWindow.Encode(cctx, rec)
	cancel()
	if err != nil {
		// Our own record failed to encode: a bug, not bad input. Fail the processor
		// rather than lose the window; the state is untouched, so a restart retries.
		p.fail(ctx, err)
		return false
	}
	if size := len(chatKey) + len(b); size > p.opts.MaxRecordBytes {
		p.m.tooLarge.Inc()
		p.log.Error("closed-window record exceeds the record limit; the processor stops, and emits the window after a restart with larger limits",
			"window_key", windowKey(chatKey, start), "evidence_count", len(refs), "record_bytes", size,
			"max_record_bytes", p.opts.MaxRecordBytes)
		p.fail(ctx, fmt.Errorf("%w: window %s of %d messages is %d bytes, more than %d",
			ErrRecordTooLarge, windowKey(chatKey, start), len(refs), size, p.opts.MaxRecordBytes))
		return false
	}
	ctx.Emit(goka.Stream(p.opts.ClosedTopic), chatKey, b)
	p.m.closedBytes.Observe(float64(len(chatKey) + len(b)))
	p.m.closed.WithLabelValues(reason).Inc()
	p.m.closedEvidence.Observe(float64(len(refs)))
	p.log.Debug("window closed", "window_key", windowKey(chatKey, start), "evidence_count", len(refs),
		"aggregate_hash", rec.AggregateHash, "reason", reason)
	return true
}

// closedRecord builds the closed-window record of one window with the given
// (ordered) evidence.
func (p *Processor) closedRecord(chatKey string, start time.Time, refs []msgRef, closedAtMS int64, reason string) (schemas.ClosedWindow, error) {
	ws, chat, err := parseChatKey(chatKey)
	if err != nil {
		return schemas.ClosedWindow{}, err
	}
	rec := schemas.ClosedWindow{
		WorkspaceID:      ws,
		ChatID:           chat,
		WindowStart:      start,
		WindowEnd:        start.Add(p.opts.Window),
		ProcessorVersion: p.opts.ProcessorVersion,
		EvidenceCount:    len(refs),
		Evidence:         make([]schemas.WindowEvidence, len(refs)),
		ClosedAt:         time.UnixMilli(closedAtMS).UTC(),
		Reason:           reason,
	}
	for i, r := range refs {
		rec.Evidence[i] = schemas.WindowEvidence{
			Key:         chatKey + "/" + r.ID,
			MessageID:   ids.MessageID(r.ID),
			OccurredAt:  time.UnixMilli(r.At).UTC(),
			ContentHash: r.Hash,
		}
		if r.Upd > 0 {
			rec.Evidence[i].SourceUpdatedAt, rec.Evidence[i].Deleted = time.UnixMilli(r.Upd).UTC(), r.Deleted
		}
	}
	rec.AggregateHash = schemas.WindowAggregateHash(rec.Evidence)
	return rec, nil
}

// onVisit is the watcher's pass over every key: chats close their due windows, closed
// markers past retention are dropped.
func (p *Processor) onVisit(ctx goka.Context, meta any) {
	now, ok := meta.(time.Time)
	if !ok {
		return
	}
	if _, _, start, _, isPage := splitPageKey(ctx.Key()); isPage {
		// pages go with their window's marker
		if start.Add(p.opts.Window + p.opts.Retention).Before(now) {
			ctx.Delete()
		}
		return
	}
	if _, _, isWindow := splitWindowKey(ctx.Key()); isWindow {
		v, _ := ctx.Value().(*tableValue)
		if v != nil && v.Window != nil && v.Window.closed() &&
			time.UnixMilli(v.Window.Start).Add(p.opts.Window+p.opts.Retention).Before(now) {
			ctx.Delete()
			p.m.markersDropped.Inc()
		}
		return
	}
	v, _ := ctx.Value().(*tableValue)
	if v == nil || v.Chat == nil {
		return
	}
	st := v.Chat
	p.closeDue(ctx, st, now)
	p.scanMu.Lock()
	p.scan.open += len(st.Open)
	p.scan.held += p.policy.heldWindows(st, now)
	for _, o := range st.Open {
		if o.FirstSeen > 0 && (p.scan.oldestSeen == 0 || o.FirstSeen < p.scan.oldestSeen) {
			p.scan.oldestSeen = o.FirstSeen
		}
	}
	if d := p.policy.nextDue(st); !d.IsZero() && (p.scan.nextDue.IsZero() || d.Before(p.scan.nextDue)) {
		p.scan.nextDue = d
	}
	p.scanMu.Unlock()
}

// closeDue closes, oldest first, every window of the chat that is due at now, and
// stores the chat state (deleting it once it holds nothing worth keeping).
func (p *Processor) closeDue(ctx goka.Context, st *chatState, now time.Time) {
	if len(st.Held) > 0 {
		partition := ctx.Partition()
		st.release(func(end int64) bool { return p.barrier.met(partition, end) })
	}
	due, reason := p.policy.takeDue(st, now)
	for _, w := range due {
		ctx.Loopback(windowKey(ctx.Key(), time.UnixMilli(w.Start)), &loopMsg{
			Op: opClose, Start: w.Start, Reason: reason, ClosedAt: now.UnixMilli(),
		})
	}
	if len(st.Open) == 0 && st.CoveredUntil > 0 &&
		time.UnixMilli(st.CoveredUntil).Before(now.Add(-p.opts.Retention)) {
		st.CoveredUntil = 0 // coverage this old no longer gates anything
	}
	if st.empty() {
		if ctx.Value() != nil {
			ctx.Delete()
		}
		return
	}
	ctx.SetValue(&tableValue{Chat: st})
}

// chat returns the chat state of the current key (a copy the caller may change).
func (p *Processor) chat(ctx goka.Context) *chatState {
	if v, _ := ctx.Value().(*tableValue); v != nil && v.Chat != nil {
		return v.Chat
	}
	return &chatState{}
}

// window returns the window state of the current key, or a new one.
func (p *Processor) window(ctx goka.Context, start time.Time) (*windowState, bool) {
	if v, _ := ctx.Value().(*tableValue); v != nil && v.Window != nil {
		return v.Window, false
	}
	return &windowState{Start: start.UnixMilli()}, true
}

// fail stops the processor from a callback with err. Goka reports a callback's
// failure as text only, so the first cause is also kept for Run to return wrapped.
func (p *Processor) fail(ctx goka.Context, err error) {
	p.failedMu.Lock()
	if p.failed == nil {
		p.failed = err
	}
	p.failedMu.Unlock()
	ctx.Fail(err)
}

// decodeTimeout bounds a decode or encode that has to ask the schema registry.
const decodeTimeout = 10 * time.Second

// ErrKeyMismatch means a record's key does not match the ids in its value.
var ErrKeyMismatch = errors.New("windows: record key does not match its value")

func (p *Processor) decodeEvidence(key string, raw []byte) (schemas.EvidenceRecord, error) {
	cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
	defer cancel()
	ev, err := p.opts.Codecs.Evidence.Decode(cctx, raw)
	if err == nil && ev.Key() != key {
		err = fmt.Errorf("%w: evidence for %s under key %s", ErrKeyMismatch, ev.Key(), key)
	}
	return ev, err
}

// deadLetter parks an input record that cannot be used and lets the processor go on.
// A registry outage is not bad input: the processor fails and retries after restart
// rather than parking records that would decode a minute later.
func (p *Processor) deadLetter(ctx goka.Context, cause error, raw []byte) {
	if schemas.IsRetryable(cause) {
		p.fail(ctx, fmt.Errorf("windows: decoding %s/%d@%d: %w", ctx.Topic(), ctx.Partition(), ctx.Offset(), cause))
		return
	}
	reason := schemas.ReasonOf(cause)
	if errors.Is(cause, ErrKeyMismatch) {
		reason = "key_mismatch"
	}
	p.m.deadLettered.WithLabelValues(reason).Inc()
	p.log.Warn("input record parked in the dead-letter topic",
		"topic", string(ctx.Topic()), "partition", ctx.Partition(), "offset", ctx.Offset(),
		"key", ctx.Key(), "reason", reason, "err", cause)
	cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
	defer cancel()
	dl := schemas.NewDeadLetter("windows", cause, string(ctx.Topic()), ctx.Partition(), ctx.Offset(),
		[]byte(ctx.Key()), raw, p.opts.Clock())
	dl.Reason = reason
	b, err := p.opts.Codecs.DeadLetter.Encode(cctx, dl)
	if err != nil {
		p.fail(ctx, err)
		return
	}
	ctx.Emit(goka.Stream(p.opts.DeadLetterTopic), ctx.Key(), b)
}
