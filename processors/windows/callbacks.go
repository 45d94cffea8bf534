package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lovoo/goka"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// The Goka callbacks. Each one follows three rules that make the processor correct
// under a crash at any point, given what Goka v1.1.14 guarantees (doc.go):
//
//   - an input callback produces exactly one record to the loop or table partition
//     of its chat, so the offsets Goka marks on one input partition are acknowledged
//     in input order and a commit never passes an earlier record whose produce is
//     still in flight;
//   - a loop callback makes exactly one table write (SetValue, or Delete for a value
//     that holds nothing), even when nothing changed: rewriting the value pushes a
//     write that reached local storage but not the changelog before a crash to the
//     changelog before the loop message is committed.
//   - no callback emits a closed record: a close callback freezes the window's
//     fields in its table write and announces it there; the publisher emits the
//     record from the changelog (publisher.go).
//
// Visits (the scan) write nothing; they only loop decisions to the chat keys.

// onEvidence turns one evidence record into one note to its chat.
func (p *Processor) onEvidence(ctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	n := loopMsg{Op: opNote, Offset: ctx.Offset()}
	chatKey := chatKeyOf(ctx.Key())
	switch {
	case raw == nil:
		n.Kind = kindTombstone
	default:
		ev, err := p.decodeEvidence(ctx.Key(), raw)
		switch {
		case err != nil:
			if !p.deadLetter(ctx, err, raw) {
				return
			}
			n.Kind = kindDead
		case ev.Deleted:
			n.Kind, n.At = kindRecall, ev.OccurredAt.UnixMilli()
			chatKey = ids.ChatKey(ev.WorkspaceID, ev.ChatID)
		case ev.SynthesisEligible:
			n.Kind, n.At = kindEligible, ev.OccurredAt.UnixMilli()
			chatKey = ids.ChatKey(ev.WorkspaceID, ev.ChatID)
		default:
			// own-app messages, cards, attachments and system messages stay evidence but
			// never open a window (design §7.3)
			n.Kind = kindIneligible
		}
	}
	n.Run, n.After = p.chains.link(ctx.Partition(), n.Offset, chatKey)
	ctx.Loopback(chatKey, &n)
}

// chatKeyOf is the chat key of an evidence key (<workspace>/<chat>/<message>), or
// the key itself when it has no message part: its note then goes to the partition
// the key hashes to, which is the one it was read from.
func chatKeyOf(key string) string {
	if i := strings.LastIndexByte(key, '/'); i > 0 && strings.Count(key, "/") == 2 {
		return key[:i]
	}
	return key
}

// onLoop applies one loop message to its chat value.
func (p *Processor) onLoop(ctx goka.Context, msg any) {
	m, ok := msg.(*loopMsg)
	if !ok || m == nil {
		p.fail(ctx, fmt.Errorf("%w: loop message of type %T", ErrStateFormat, msg))
		return
	}
	c := p.value(ctx)
	now := p.opts.Clock().UnixMilli()
	switch m.Op {
	case opNote:
		out, oversized := p.mach.note(c, m, now)
		p.m.evidence.WithLabelValues(out).Inc()
		switch out {
		case outLateEdit, outLateRecall:
			p.m.late.WithLabelValues(out).Inc()
			if out == outLateEdit {
				p.m.lateEdits.WithLabelValues(p.mach.lateReason(c, m.At)).Inc()
			}
			p.log.Debug("late evidence for a closing or closed window; counted, not reopened",
				"chat_key", ctx.Key(), "evidence_offset", m.Offset, "window_start", msTime(p.mach.start(m.At)), "outcome", out)
		case outOpened:
			p.noteDue(p.mach.nextDue(c))
		}
		if oversized {
			p.m.oversized.Inc()
			i, _ := c.find(p.mach.start(m.At))
			p.log.Warn("window passed the oversized bound; it closes as usual, flagged",
				"chat_key", ctx.Key(), "window_start", msTime(c.Open[i].Start), "versions", c.Open[i].Versions,
				"oversized_versions", *p.opts.OversizedVersions)
		}
	case opClose:
		closed := p.mach.closeWindows(c, m, now)
		if d := p.mach.nextDue(c); d > 0 {
			p.noteDue(d)
		}
		if len(closed) > 0 {
			p.announce(ctx, c, closed)
			return
		}
	case opTidy:
		p.mach.tidy(c, now)
	}
	p.store(ctx, c)
}

// onCheckpoint records how far history is collected.
func (p *Processor) onCheckpoint(ctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	c := p.value(ctx)
	if raw != nil {
		cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
		cp, err := p.opts.Codecs.Checkpoint.Decode(cctx, raw)
		cancel()
		if err == nil && cp.Key() != ctx.Key() {
			err = fmt.Errorf("%w: checkpoint for %s under key %s", ErrKeyMismatch, cp.Key(), ctx.Key())
		}
		if err != nil {
			if !p.deadLetter(ctx, err, raw) {
				return
			}
		} else {
			p.mach.checkpoint(c, cp.CoveredUntil.UnixMilli(), cp.EvidenceEndOffset, p.opts.Clock().UnixMilli())
			if d := p.mach.nextDue(c); d > 0 {
				p.noteDue(d)
			}
		}
	}
	// a compacted-away checkpoint (nil) changes nothing: coverage never moves backwards
	p.store(ctx, c)
}

// onClosed reads this processor's closed records back: a window whose record is in
// the closed-window topic is closed for good.
func (p *Processor) onClosed(ctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	c := p.value(ctx)
	if raw != nil && p.ours(ctx) {
		cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
		rec, err := p.opts.Codecs.ClosedWindow.Decode(cctx, raw)
		cancel()
		switch {
		case err != nil && schemas.IsRetryable(err):
			p.fail(ctx, fmt.Errorf("windows: decoding closed record %s/%d@%d: %w", ctx.Topic(), ctx.Partition(), ctx.Offset(), err))
			return
		case err != nil:
			// Not ours to park: the closed-window topic's consumers see it too.
			p.m.readBack.WithLabelValues("undecodable").Inc()
			p.log.Warn("closed-window record does not decode; ignored by the read-back",
				"partition", ctx.Partition(), "offset", ctx.Offset(), "reason", schemas.ReasonOf(err))
		case rec.ProcessorVersion != p.opts.ProcessorVersion || rec.Key() != ctx.Key():
			p.m.readBack.WithLabelValues("foreign").Inc()
		default:
			if p.mach.closed(c, rec.WindowStart.UnixMilli(), p.opts.Clock().UnixMilli()) {
				p.m.readBack.WithLabelValues("closed").Inc()
			} else {
				p.m.readBack.WithLabelValues("duplicate").Inc()
			}
		}
	} else if raw != nil {
		p.m.readBack.WithLabelValues("foreign").Inc()
	}
	p.store(ctx, c)
}

// ours reports whether a closed record may be this processor version's: its
// processor-version header names this version (records without the header are
// decoded to tell).
func (p *Processor) ours(ctx goka.Context) bool {
	v, ok := ctx.Headers()[HeaderProcessorVersion]
	return !ok || string(v) == p.opts.ProcessorVersion
}

// HeaderProcessorVersion is the record header naming the processor version that
// emitted a closed-window record, so other versions skip it without decoding.
const HeaderProcessorVersion = "larkline-processor-version"

// value returns the chat value of the current key (a fresh one when there is none).
func (p *Processor) value(ctx goka.Context) *chatValue {
	if c, _ := ctx.Value().(*chatValue); c != nil {
		return c
	}
	return &chatValue{}
}

// store makes the callback's one table write: the value, or a delete once it holds
// nothing that gates anything. The applied offset may go with it: a chat value is
// empty only when no window of the chat within the retention horizon ever had
// evidence, so a redelivered record of the chat can only age out or be ineligible
// again.
func (p *Processor) store(ctx goka.Context, c *chatValue) {
	if c.empty() {
		ctx.Delete()
		return
	}
	ctx.SetValue(c)
}

// announce is a close callback's one table write: the value, with the header that
// has the publisher emit the closed records of the windows it closed (publisher.go).
// Under Goka's tester (unit tests: no changelog to read) the records are emitted
// here instead.
func (p *Processor) announce(ctx goka.Context, c *chatValue, closed []window) {
	starts := make([]int64, len(closed))
	for i := range closed {
		starts[i] = closed[i].Start
		if p.opts.inlineEmit && !p.emitClosed(ctx, &closed[i]) {
			return
		}
	}
	ctx.SetValue(c, goka.WithCtxEmitHeaders(goka.Headers{HeaderAnnounce: encodeStarts(starts)}))
}

// emitClosed emits the closed record of a closing window from the callback (tests
// under Goka's tester only). It reports false after failing the processor.
func (p *Processor) emitClosed(ctx goka.Context, w *window) bool {
	rec, err := p.mach.record(ctx.Key(), ctx.Partition(), w)
	if err == nil {
		cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
		var b []byte
		b, err = p.opts.Codecs.ClosedWindow.Encode(cctx, rec)
		cancel()
		if err == nil {
			ctx.Emit(goka.Stream(p.opts.ClosedTopic), ctx.Key(), b,
				goka.WithCtxEmitHeaders(goka.Headers{HeaderProcessorVersion: []byte(p.opts.ProcessorVersion)}))
			p.m.closed.WithLabelValues(rec.Reason).Inc()
			p.m.closedBytes.Observe(float64(len(ctx.Key()) + len(b)))
			p.m.closedEvidence.Observe(float64(w.Versions))
			p.log.Debug("window closed", "window_key", ctx.Key()+"/"+msTime(w.Start).Format(time.RFC3339),
				"versions", w.Versions, "evidence_end_offset", w.High+1, "reason", rec.Reason)
			return true
		}
	}
	// Our own record failed to build or encode: a bug or a registry outage, not bad
	// input. Fail rather than lose the window; nothing is committed, so a restart
	// retries.
	p.fail(ctx, fmt.Errorf("windows: closed record of %s: %w", ctx.Key(), err))
	return false
}

// onVisit is the scan's pass over one chat value: it decides, writes nothing.
func (p *Processor) onVisit(ctx goka.Context, meta any) {
	sm, ok := meta.(*scanMeta)
	if !ok {
		return
	}
	c, _ := ctx.Value().(*chatValue)
	if c == nil {
		return
	}
	nowMS := sm.now.UnixMilli()
	safe := sm.safeOf(ctx.Partition())
	for _, m := range p.mach.decide(c, nowMS, safe) {
		if m.Op == opClose {
			if i, ok := c.find(m.Start); ok && c.Open[i].Status == statusClosing {
				p.m.reemits.Inc()
			} else {
				p.m.closeInputLag.Observe(float64(max(0, nowMS-safe)) / 1000)
			}
		}
		ctx.Loopback(ctx.Key(), &m)
	}
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	p.scan.open += len(c.Open)
	p.scan.held += p.mach.heldWindows(c, nowMS)
	p.scan.inputHeld += p.mach.inputHeld(c, nowMS, safe)
	for i := range c.Open {
		w := &c.Open[i]
		if w.Status == statusClosing {
			p.scan.closing++
		}
		if w.Status == statusOpen && w.FirstSeen > 0 && (p.scan.oldestSeen == 0 || w.FirstSeen < p.scan.oldestSeen) {
			p.scan.oldestSeen = w.FirstSeen
		}
		if w.Oversized {
			p.scan.oversized++
		}
	}
	if d := p.mach.nextDue(c); d > 0 && (p.scan.nextDue == 0 || d < p.scan.nextDue) {
		p.scan.nextDue = d
	}
}

// fail stops the processor from a callback with err, and never returns. Goka reports
// a callback's failure as text only, so the first cause is also kept for Run to
// return wrapped.
//
// Goka's Fail panics (unwinding the callback before its offset is marked) only while
// the partition runs: once the partition's context is done (it is stopping because
// another partition failed first, or the processor is shutting down) Fail records
// the error and returns, and a callback that then returned would have its offset
// marked and committed when the session ends: a restart would skip the record. An
// outage fails every partition at once, so this is the common case then (the
// registry outage test lost records this way). So fail unwinds the callback itself.
func (p *Processor) fail(ctx goka.Context, err error) {
	p.failedMu.Lock()
	if p.failed == nil {
		p.failed = err
	}
	p.failedMu.Unlock()
	ctx.Fail(err)
	panic(err) // Goka recovers it as the callback's failure, like Fail's own panic
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

// deadLetter parks an input record that cannot be used, synchronously: it returns
// once the dead-letter topic acknowledged the record, so the note or write that
// follows (and the commit after it) can never pass a parked record that was lost. A
// registry outage is not bad input: the processor fails and retries after restart
// rather than parking records that would decode a minute later. It reports false
// after failing the processor.
func (p *Processor) deadLetter(ctx goka.Context, cause error, raw []byte) bool {
	if schemas.IsRetryable(cause) {
		p.fail(ctx, fmt.Errorf("windows: decoding %s/%d@%d: %w", ctx.Topic(), ctx.Partition(), ctx.Offset(), cause))
		return false
	}
	reason := schemas.ReasonOf(cause)
	if errors.Is(cause, ErrKeyMismatch) {
		reason = "key_mismatch"
	}
	cctx, cancel := context.WithTimeout(context.Background(), decodeTimeout)
	defer cancel()
	dl := schemas.NewDeadLetter(ids.StageWindows, cause, string(ctx.Topic()), ctx.Partition(), ctx.Offset(),
		[]byte(ctx.Key()), raw, p.opts.Clock())
	dl.Reason = reason
	if string(ctx.Topic()) == p.opts.EvidenceTopic {
		dl.ByReference() // chat text stays in the evidence topic (issue #19)
	}
	b, err := p.opts.Codecs.DeadLetter.Encode(cctx, dl)
	if err == nil {
		err = p.dead.WriteDeadLetter(cctx, ctx.Key(), b)
	}
	if err != nil {
		p.fail(ctx, fmt.Errorf("windows: parking %s/%d@%d in the dead-letter topic: %w", ctx.Topic(), ctx.Partition(), ctx.Offset(), err))
		return false
	}
	p.m.deadLettered.WithLabelValues(reason).Inc()
	p.log.Warn("input record parked in the dead-letter topic",
		"topic", string(ctx.Topic()), "partition", ctx.Partition(), "offset", ctx.Offset(),
		"key", ctx.Key(), "reason", reason, "err", cause)
	return true
}
