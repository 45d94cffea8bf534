package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

const (
	// progressLogEvery: a long run logs its progress every this many chat pages.
	progressLogEvery = 10
	// seedPageSize and maxSeedPages bound the evidence read that seeds a chat's
	// known threads.
	seedPageSize = 500
	maxSeedPages = 20
	// diagnosticsTimeout bounds the write of a failure's diagnostics.
	diagnosticsTimeout = 5 * time.Second
)

// stopSignal is how Run asks its chat runs to stop between two pages. c is done
// once Run's ctx is done or Close is called (lifecycle ends it synchronously);
// stopped also asks run, Run's own ctx, so a run that starts a page after its caller
// saw that ctx done is refused even while c, a derived context, is still being
// closed. The zero value never stops (RunOnce and Refresh are cancelled through
// their ctx).
type stopSignal struct {
	c, run <-chan struct{}
}

func (s stopSignal) stopped() bool {
	select {
	case <-s.run:
		return true
	case <-s.c:
		return true
	default:
		return false
	}
}

// job is one chat to reconcile for one workspace.
type job struct {
	ws   store.Workspace
	chat ids.ChatID
	// manual runs skip the eligibility check and read the whole bounded range.
	manual bool
	// stop ends the run between two pages (graceful shutdown).
	stop stopSignal
	// coverage: a coverage pass's run for the window ending at windowEnd: it waits
	// for a running run of the chat and never turns into a refresh (schedule.go).
	coverage  bool
	windowEnd time.Time
	// scheduled: an interval pass's run, which skips an incremental read of a chat a
	// coverage run read to its end within max(ReconcileInterval, Window) (fresh).
	scheduled bool
	// continued: the continuation of a run that used its page budget moments ago: it
	// starts at the checkpoint, without re-reading the overlap that run read.
	continued bool
}

func (j job) key() string { return ids.ChatKey(j.ws.ID, j.chat) }

// chatRun is the state of one chat run.
type chatRun struct {
	r        *Reconciler
	job      job
	plan     plan
	now      time.Time
	cp       *store.Checkpoint
	maxPages int
	used     int // pages read, chat and thread
	rep      *ChatReport
	seen     map[ids.MessageID]bool
	scanned  map[string]bool
	// refused are the chat's refused threads (store.CheckpointMeta.RefusedThreads),
	// loaded with the checkpoint and written with every checkpoint change.
	refused map[string]store.RefusedThread
	log     *slog.Logger
}

// runChat reconciles one chat of one workspace: the range of its plan, page by
// page, advancing the checkpoint after each page batch Kafka acknowledged.
func (r *Reconciler) runChat(ctx context.Context, j job) (rep ChatReport) {
	began := r.opts.Clock()
	rep = ChatReport{Workspace: j.ws.ID, Chat: j.chat, Kind: KindIncremental}
	if j.manual {
		rep.Kind = KindManual
	}
	log := r.log.With("workspace_id", j.ws.ID, "chat_id", j.chat)
	defer func() {
		rep.Duration = r.opts.Clock().Sub(began)
		r.m.duration.WithLabelValues(string(rep.Kind)).Observe(rep.Duration.Seconds())
		r.m.runs.WithLabelValues(string(rep.Kind), rep.result()).Inc()
		r.logReport(log, &rep)
	}()

	unlock, ok := r.lockChat(ctx, j, &rep)
	if !ok {
		return rep
	}
	defer unlock()
	if !r.groupChat(ctx, j, &rep) {
		return rep
	}
	c := &chatRun{r: r, job: j, rep: &rep, seen: map[ids.MessageID]bool{}, scanned: map[string]bool{},
		refused: map[string]store.RefusedThread{}, log: log, maxPages: r.opts.MaxPagesPerRun}
	if j.manual {
		c.maxPages = r.opts.MaxPagesPerManualRefresh
	}
	r.outcome(ctx, c, c.run(ctx))
	return rep
}

// lockChat takes the chat's lock: manual, coverage and continued runs wait for
// a running one, scheduled runs skip the chat (rep.Skipped) when it is taken. It
// reports false when the run must end, rep saying why.
func (r *Reconciler) lockChat(ctx context.Context, j job, rep *ChatReport) (func(), bool) {
	if j.manual || j.coverage || j.continued {
		u, err := r.locks.lock(ctx, j.key())
		if err != nil {
			rep.Err = fail(reasonCanceled, fmt.Errorf("wait for the running reconciliation of chat %s: %w", j.chat, err))
			return nil, false
		}
		return u, true
	}
	u, ok := r.locks.tryLock(j.key())
	if !ok {
		rep.Skipped = true
		return nil, false
	}
	return u, true
}

// groupChat refuses a single (p2p) chat before any page is read: history items
// carry no chat type (design §6, §15). It reports false when the run must end,
// rep saying why.
func (r *Reconciler) groupChat(ctx context.Context, j job, rep *ChatReport) bool {
	err := r.opts.Chats.Check(ctx, j.chat, chats.PathReconcile)
	if err == nil {
		return true
	}
	if errors.Is(err, chats.ErrRefused) {
		rep.Stopped = fmt.Errorf("%w: %w", ErrNotGroupChat, err)
		return false
	}
	reason := reasonChatLookup
	if ctx.Err() != nil {
		reason = reasonCanceled
	}
	rep.Err = fail(reason, fmt.Errorf("check the type of chat %s: %w", j.chat, err))
	if reason != reasonCanceled {
		r.m.failures.WithLabelValues(reason).Inc()
	}
	return false
}

// outcome records how the run ended: a coverage, a stop (page budget, no longer
// eligible, shutting down; a truncated automatic run is continued at once), or a
// failure, counted and recorded on the checkpoint.
func (r *Reconciler) outcome(ctx context.Context, c *chatRun, err error) {
	j, rep := c.job, c.rep
	switch {
	case err == nil && rep.Complete && j.coverage:
		r.noteCovered(j.key(), c.now)
		if !rep.CoveredUntil.Before(j.windowEnd) {
			r.m.windowCoverage.Observe(r.opts.Clock().Sub(j.windowEnd).Seconds())
		}
	case err == nil:
	case errors.Is(err, ErrPageBudget), errors.Is(err, ErrIneligible), errors.Is(err, ErrShuttingDown):
		rep.Stopped = err
		if errors.Is(err, ErrPageBudget) && c.plan.kind == KindRefresh {
			c.endTruncatedRefresh(ctx)
		}
		if errors.Is(err, ErrPageBudget) && !j.manual && rep.CoveredUntil.Before(c.plan.end) {
			r.queueContinuation(j)
		}
	default:
		rep.Err = err
		reason := failureReason(err)
		if reason != reasonCanceled {
			r.m.failures.WithLabelValues(reason).Inc()
			c.recordFailure(ctx, err)
		}
	}
}

// run reads the chat's range: the checkpoint and the plan, then the threads
// (seeded, refused earlier, known), then the chat container page by page.
func (c *chatRun) run(ctx context.Context) error {
	if err := c.loadCheckpoint(ctx); err != nil {
		return err
	}
	c.makePlan()
	if c.alreadyCovered() {
		c.rep.Fresh = true
		return nil
	}
	if err := c.gate(ctx); err != nil {
		return err
	}
	if c.plan.empty() {
		c.rep.Complete = true
		return nil
	}
	if err := c.seedThreads(ctx); err != nil {
		return err
	}
	// Threads Lark refused in earlier runs, whose ranges the checkpoint has passed,
	// are read again from where the refusal left them (threads.go).
	if err := c.retryRefused(ctx); err != nil {
		return err
	}
	if err := c.readKnownThreads(ctx); err != nil {
		return err
	}
	return c.readChat(ctx)
}

// loadCheckpoint reads the chat's checkpoint, if any, with its refused threads,
// and publishes it again when an earlier publish is pending.
func (c *chatRun) loadCheckpoint(ctx context.Context) error {
	r, j := c.r, c.job
	cp, err := r.opts.Store.GetCheckpoint(ctx, j.ws.ID, j.chat)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fail(reasonStore, fmt.Errorf("read checkpoint of chat %s: %w", j.chat, err))
	default:
		c.cp = &cp
		c.rep.CoveredUntil = cp.Position.Time
		for _, th := range cp.Meta.RefusedThreads {
			c.refused[th.ID] = th
		}
		if r.isPending(j.key()) {
			r.publish(ctx, cp)
		}
	}
	return nil
}

// makePlan decides the run's kind and range from the checkpoint and the clock.
func (c *chatRun) makePlan() {
	r, j := c.r, c.job
	c.now = r.opts.Clock()
	c.plan = makePlan(planInput{
		now: c.now, workspaceCreated: j.ws.CreatedAt, checkpoint: c.cp, manual: j.manual,
		coverage: j.coverage, continued: j.continued,
		lookback: r.opts.IngestionLookback, retention: r.opts.Retention, settle: r.opts.Settle,
		overlap: r.opts.ReconcileOverlap, refreshInterval: r.opts.EvidenceRefreshInterval,
		refreshLookback: r.opts.EvidenceRefreshLookback,
	})
	c.rep.Kind, c.rep.Bound, c.rep.Start, c.rep.End = c.plan.kind, c.plan.bound, c.plan.start, c.plan.end
}

// alreadyCovered reports a run that needs no history call: a scheduled
// incremental run of a chat a coverage run read moments ago, or a coverage run
// of a window another run covered already.
func (c *chatRun) alreadyCovered() bool {
	r, j := c.r, c.job
	if j.scheduled && r.opts.Window > 0 && c.plan.kind == KindIncremental && r.fresh(j.key(), c.now) {
		return true
	}
	return j.coverage && c.cp != nil && !c.cp.Position.Time.Before(j.windowEnd)
}

// readKnownThreads reads the chat's known threads first: a reply to a thread
// whose root lies before the range is visible only in the thread container, and
// the checkpoint may not pass it. Refresh, manual and first backfill runs read
// every known thread; runs that continue from a checkpoint only those active
// within ThreadActiveWindow.
func (c *chatRun) readKnownThreads(ctx context.Context) error {
	r, j := c.r, c.job
	var since time.Time
	if c.plan.kind == KindIncremental || (c.plan.kind == KindBackfill && c.cp != nil) {
		since = c.now.Add(-r.opts.ThreadActiveWindow)
	}
	var batch []*larkim.Message
	for _, th := range r.threads.threads(j.chat, since) {
		items, err := c.readThread(ctx, th, c.plan.start)
		if err != nil {
			return err
		}
		batch = append(batch, items...)
	}
	return c.commit(ctx, batch)
}

// readChat pages the chat container over the plan's range, committing and
// advancing the checkpoint after every page.
//
// The overlap before the checkpoint is re-read to catch messages history shows
// late. It may not use more than half the page budget: a burst inside the overlap
// larger than the budget would otherwise make every run re-read the same pages and
// never get past the checkpoint (coverage, and so every window, would stall). Past
// half the budget the run jumps to the checkpoint, which pages already committed.
// Refresh and manual runs re-read their whole range on purpose (edits, recalls).
func (c *chatRun) readChat(ctx context.Context) error {
	r, j := c.r, c.job
	var resumeAt time.Time
	if (c.plan.kind == KindIncremental || c.plan.kind == KindBackfill) && c.cp != nil && c.plan.start.Before(c.cp.Position.Time) {
		resumeAt = c.cp.Position.Time
	}
	start, token := c.plan.start, ""
	for {
		if err := c.gate(ctx); err != nil {
			return err
		}
		page, err := r.list(ctx, larkapi.ListQuery{
			ContainerType: larkapi.ContainerChat, ContainerID: string(j.chat),
			Start: start, End: c.plan.end, PageToken: token,
		})
		if err != nil {
			return fail(larkFailureReason(err), err)
		}
		c.used++
		c.rep.Pages++
		r.m.pages.WithLabelValues(larkapi.ContainerChat).Inc()

		pos, final, err := c.commitPage(ctx, page)
		if err != nil {
			return err
		}
		if c.rep.Pages%progressLogEvery == 0 {
			c.log.Info("reconcile progress", "kind", c.plan.kind, "pages", c.rep.Pages, "thread_pages", c.rep.ThreadPages,
				"messages", c.rep.Messages, "produced", c.rep.Produced, "covered_until", c.rep.CoveredUntil)
		}
		if final {
			c.rep.Complete = true
			return nil
		}
		if !resumeAt.IsZero() && c.used >= max(c.maxPages/2, 1) && (pos.Time.IsZero() || pos.Time.Before(resumeAt)) {
			c.log.Warn("the overlap re-read used half the page budget; continuing from the checkpoint",
				"kind", c.plan.kind, "pages", c.rep.Pages, "checkpoint", resumeAt)
			r.m.overlapSkips.Inc()
			start, token, resumeAt = resumeAt, "", time.Time{}
			continue
		}
		if page.PageToken == token {
			return fail(reasonLarkMalformed, fmt.Errorf("%w: page_token repeated (chat %s, request %s)", larkapi.ErrMalformedPage, j.chat, page.RequestID))
		}
		token = page.PageToken
	}
}

// commitPage commits one chat page with the threads whose roots are on it (read
// before the page commits), then advances the checkpoint to the page's last
// message, or to the plan's end on the final page. It returns that position.
func (c *chatRun) commitPage(ctx context.Context, page larkapi.ListPage) (store.CheckpointPosition, bool, error) {
	r, j := c.r, c.job
	items, last, final := c.chatItems(page)
	var replies []*larkim.Message
	for _, it := range items {
		th := deref(it.ThreadId)
		if th == "" || c.scanned[th] {
			continue
		}
		if t, err := normalize.ParseTimestamp(deref(it.CreateTime)); err == nil {
			r.threads.observe(j.chat, th, t)
		}
		msgs, err := c.readThread(ctx, th, c.plan.start)
		if err != nil {
			return store.CheckpointPosition{}, false, err
		}
		replies = append(replies, msgs...)
	}
	if err := c.commit(ctx, append(items, replies...)); err != nil {
		return store.CheckpointPosition{}, false, err
	}
	pos := last
	if final {
		pos = store.CheckpointPosition{Time: c.plan.end}
	}
	if !pos.Time.IsZero() {
		if err := c.advance(ctx, pos, final); err != nil {
			return store.CheckpointPosition{}, false, err
		}
	}
	return pos, final, nil
}

// gate is asked before every history call: it ends the run when Run is stopping,
// the page budget is used up, or (automatic runs) the workspace is no longer
// eligible — which also stops jobs that were queued before the change.
func (c *chatRun) gate(ctx context.Context) error {
	if c.job.stop.stopped() {
		return ErrShuttingDown
	}
	if err := ctx.Err(); err != nil {
		return fail(reasonCanceled, err)
	}
	if c.used >= c.maxPages {
		return ErrPageBudget
	}
	if c.job.manual {
		return nil
	}
	ok, err := c.r.eligible(ctx, c.job.ws.ID, c.job.chat)
	if err != nil {
		return fail(reasonBindings, fmt.Errorf("check eligibility of workspace %s: %w", c.job.ws.ID, err))
	}
	if !ok {
		return ErrIneligible
	}
	return nil
}

// chatItems keeps the page's items inside the range and returns the checkpoint
// position after the page (the last in-range item; zero when there is none) and
// whether the page ends the range.
func (c *chatRun) chatItems(page larkapi.ListPage) (items []*larkim.Message, last store.CheckpointPosition, final bool) {
	final = !page.HasMore
	for _, it := range page.Items {
		if it == nil {
			continue
		}
		t, err := normalize.ParseTimestamp(deref(it.CreateTime))
		if err != nil || t.IsZero() {
			items = append(items, it) // the normalizer rejects and counts it
			continue
		}
		if !t.Before(c.plan.end) {
			// Past the range (Lark's end_time is whole seconds): the next run reads it.
			final = true
			continue
		}
		if t.Before(c.plan.start) {
			continue // start_time is whole seconds; the range starts within it
		}
		items = append(items, it)
		if id, err := ids.ParseMessageID(deref(it.MessageId)); err == nil {
			if p := (store.CheckpointPosition{Time: t, MessageID: id}); p.Compare(last) > 0 {
				last = p
			}
		}
	}
	return items, last, final
}

// readThread pages one thread newest first and returns its messages created in
// [from, the range's end). Thread containers take no time range, so it stops at the
// first page that reaches before from; older items it had to receive are dropped. A
// thread Lark refuses (deleted, invisible) is not a failure: it leaves the known
// threads and is kept in the checkpoint for a later run (refuse).
func (c *chatRun) readThread(ctx context.Context, thread string, from time.Time) ([]*larkim.Message, error) {
	msgs, _, err := c.readThreadFrom(ctx, thread, from)
	return msgs, err
}

// readThreadFrom is readThread; ok reports that the thread was read (not refused,
// not read earlier in the run).
func (c *chatRun) readThreadFrom(ctx context.Context, thread string, from time.Time) (msgs []*larkim.Message, ok bool, err error) {
	if c.scanned[thread] {
		return nil, false, nil
	}
	c.scanned[thread] = true
	c.rep.Threads++
	var out []*larkim.Message
	token := ""
	for {
		if err := c.gate(ctx); err != nil {
			return nil, false, err
		}
		page, err := c.r.list(ctx, larkapi.ListQuery{ContainerType: larkapi.ContainerThread, ContainerID: thread, Descending: true, PageToken: token})
		if err != nil {
			var ae *larkapi.APIError
			if errors.As(err, &ae) && ae.Err == nil && !IsRetryable(err) {
				c.r.threads.forget(c.job.chat, thread)
				c.r.m.failures.WithLabelValues(reasonThreadRefused).Inc()
				c.refuse(thread, from, ae.Code, ae.Status)
				return nil, false, nil
			}
			return nil, false, fail(larkFailureReason(err), err)
		}
		c.used++
		c.rep.ThreadPages++
		c.r.m.pages.WithLabelValues(larkapi.ContainerThread).Inc()
		older := false
		for _, it := range page.Items {
			if it == nil {
				continue
			}
			t, err := normalize.ParseTimestamp(deref(it.CreateTime))
			if err != nil || t.IsZero() {
				out = append(out, it)
				continue
			}
			c.r.threads.observe(c.job.chat, thread, t)
			switch {
			case !t.Before(c.plan.end):
				c.r.m.messages.WithLabelValues(msgOutOfRange).Inc()
			case t.Before(from):
				older = true
				c.r.m.messages.WithLabelValues(msgOutOfRange).Inc()
			default:
				out = append(out, it)
			}
		}
		if older || !page.HasMore {
			return out, true, nil
		}
		if page.PageToken == token {
			return nil, false, fail(reasonLarkMalformed, fmt.Errorf("%w: page_token repeated (thread %s, request %s)", larkapi.ErrMalformedPage, thread, page.RequestID))
		}
		token = page.PageToken
	}
}

// commit normalizes items, keeps the versions not stored yet and produces them,
// returning once Kafka acknowledged every record.
func (c *chatRun) commit(ctx context.Context, items []*larkim.Message) error {
	return c.commitFrom(ctx, items, c.plan.start)
}

// commitFrom is commit for items created in [from, the range's end): a refused
// thread read again starts before the run's range.
func (c *chatRun) commitFrom(ctx context.Context, items []*larkim.Message, from time.Time) error {
	if len(items) == 0 {
		return nil
	}
	r := c.r
	msgs := make([]normalize.Message, 0, len(items))
	for _, it := range items {
		in, err := normalize.FromHistoryMessage(it)
		var m normalize.Message
		if err == nil {
			if in.ChatID != string(c.job.chat) {
				err = fmt.Errorf("%w: message of chat %.40q in the history of chat %s", normalize.ErrInvalidID, in.ChatID, c.job.chat)
			} else {
				m, err = r.opts.Normalizer.Normalize(in)
			}
		}
		if err != nil {
			c.rep.Invalid++
			r.m.messages.WithLabelValues(msgInvalid).Inc()
			c.log.Warn("history message rejected", "message_id", boundedID(deref(it.MessageId)), "reason", normalize.Reason(err), "err", err)
			continue
		}
		if c.seen[m.MessageID] {
			r.m.messages.WithLabelValues(msgDuplicate).Inc()
			continue
		}
		if m.CreatedAt.Before(from) || !m.CreatedAt.Before(c.plan.end) {
			r.m.messages.WithLabelValues(msgOutOfRange).Inc()
			continue
		}
		c.seen[m.MessageID] = true
		r.writer.ObserveMentions(in.Mentions)
		msgs = append(msgs, m)
	}
	c.rep.Messages += len(msgs)
	slices.SortFunc(msgs, func(a, b normalize.Message) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.MessageID, b.MessageID))
	})
	counts := map[string]int{}
	todo, err := r.changed(ctx, c.job.ws.ID, msgs, counts)
	if err != nil {
		return err
	}
	if err := r.produceEvidence(ctx, c.job.ws.ID, todo, c.plan.kind.IngestPath()); err != nil {
		return err
	}
	for outcome, n := range counts {
		r.m.messages.WithLabelValues(outcome).Add(float64(n))
	}
	c.rep.Produced += counts[msgProduced]
	c.rep.Unchanged += counts[msgUnchanged]
	c.rep.Stale += counts[msgStale]
	return nil
}

// advance moves the checkpoint to pos after a committed batch and publishes it.
// The final batch of a full scan records LastFullScanAt.
func (c *chatRun) advance(ctx context.Context, pos store.CheckpointPosition, final bool) error {
	r := c.r
	meta := store.CheckpointMeta{ReconcileVersion: ReconcileVersion, RefusedThreads: c.refusedThreads()}
	if c.cp != nil {
		meta.LastFullScanAt = c.cp.Meta.LastFullScanAt
	}
	if final && c.plan.fullScan {
		at := c.now.UTC()
		meta.LastFullScanAt = &at
	}
	cp, advanced, err := r.opts.Store.AdvanceCheckpoint(ctx, c.job.ws.ID, c.job.chat, pos, meta)
	if err != nil {
		return fail(reasonStore, fmt.Errorf("advance checkpoint of chat %s: %w", c.job.chat, err))
	}
	c.cp = &cp
	c.rep.CoveredUntil = cp.Position.Time
	if advanced || r.isPending(c.job.key()) {
		r.publish(ctx, cp)
	}
	c.log.Debug("checkpoint advanced", "kind", c.plan.kind, "covered_until", cp.Position.Time,
		"cursor_message_id", cp.Position.MessageID, "advanced", advanced, "pages", c.rep.Pages)
	if r.opts.OnProgress != nil {
		r.opts.OnProgress(Progress{
			Workspace: c.job.ws.ID, Chat: c.job.chat, Kind: c.plan.kind,
			Pages: c.rep.Pages + c.rep.ThreadPages, Produced: c.rep.Produced, CoveredUntil: cp.Position.Time,
		})
	}
	return nil
}

// recordFailure keeps bounded diagnostics of a failed run in the checkpoint's
// metadata, without moving it.
func (c *chatRun) recordFailure(ctx context.Context, cause error) {
	if c.cp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnosticsTimeout)
	defer cancel()
	meta := c.cp.Meta
	meta.ReconcileVersion = ReconcileVersion
	meta.RefusedThreads = c.refusedThreads()
	meta.Error = failureReason(cause) + ": " + cause.Error()
	if _, _, err := c.r.opts.Store.AdvanceCheckpoint(ctx, c.job.ws.ID, c.job.chat, c.cp.Position, meta); err != nil {
		c.log.Warn("could not record reconciliation diagnostics", "err", err)
	}
}

// endTruncatedRefresh records a refresh that used its page budget as done, so
// that the next runs are incremental again (from the checkpoint it reached)
// instead of restarting the same refresh; the part it did not read is refreshed
// by the next one.
func (c *chatRun) endTruncatedRefresh(ctx context.Context) {
	if c.cp == nil {
		return
	}
	meta := c.cp.Meta
	meta.ReconcileVersion = ReconcileVersion
	meta.RefusedThreads = c.refusedThreads()
	at := c.now.UTC()
	meta.LastFullScanAt = &at
	if _, _, err := c.r.opts.Store.AdvanceCheckpoint(ctx, c.job.ws.ID, c.job.chat, c.cp.Position, meta); err != nil {
		c.log.Warn("could not record the truncated refresh", "err", err)
		return
	}
	c.log.Warn("evidence refresh truncated by the page budget", "pages", c.rep.Pages+c.rep.ThreadPages, "covered_until", c.cp.Position.Time)
}

// seedThreads fills the chat's known threads from its stored evidence, once per
// chat and process and again at every refresh or manual run.
func (c *chatRun) seedThreads(ctx context.Context) error {
	r, chat := c.r, c.job.chat
	if r.threads.seeded(chat) && c.plan.kind != KindRefresh && c.plan.kind != KindManual {
		return nil
	}
	q := store.RangeQuery{Workspace: c.job.ws.ID, Chat: chat, From: c.plan.bound, To: c.plan.end, Limit: seedPageSize}
	for range maxSeedPages {
		p, err := r.opts.Store.EvidenceInRange(ctx, q)
		if err != nil {
			return fail(reasonStore, fmt.Errorf("read the threads of chat %s: %w", chat, err))
		}
		for i := range p.Items {
			var md struct {
				ThreadID string `json:"thread_id"`
			}
			if json.Unmarshal(p.Items[i].Metadata, &md) == nil {
				r.threads.observe(chat, md.ThreadID, p.Items[i].OccurredAt)
			}
		}
		if p.Next == nil {
			break
		}
		q.After = p.Next
	}
	r.threads.markSeeded(chat)
	return nil
}

// publish writes cp to the compacted checkpoint topic, after the database
// commit. A failure is logged, counted and retried by the chat's next advance or
// run (publishing is idempotent: consumers keep the highest coverage).
func (r *Reconciler) publish(ctx context.Context, cp store.Checkpoint) {
	key := ids.ChatKey(cp.Workspace, cp.Chat)
	rec := schemas.CollectionCheckpoint{
		WorkspaceID:      cp.Workspace,
		ChatID:           cp.Chat,
		CoveredUntil:     cp.Position.Time,
		UpdatedAt:        r.opts.Clock().UTC(),
		ReconcileVersion: ReconcileVersion,
		// Read after the evidence of every page it covers was acknowledged: the
		// window processor holds the coverage until it has processed that evidence.
		EvidenceEndOffset: r.evidenceEndOffset(key),
	}
	if cp.Position.MessageID != "" {
		rec.CursorCreateTimeMS = cp.Position.Time.UnixMilli()
		rec.CursorMessageID = cp.Position.MessageID
	}
	err := func() error {
		value, err := r.opts.CheckpointCodec.Encode(ctx, rec)
		if err != nil {
			return fmt.Errorf("encode checkpoint: %w", err)
		}
		_, err = evidence.ProduceAll(ctx, r.opts.Producer, "checkpoint", []*kgo.Record{{Topic: r.opts.CheckpointTopic, Key: []byte(key), Value: value, Timestamp: rec.UpdatedAt}})
		return err
	}()
	r.mu.Lock()
	if err != nil {
		r.pending[key] = true
	} else {
		delete(r.pending, key)
	}
	r.mu.Unlock()
	if err != nil {
		r.m.published.WithLabelValues("failed").Inc()
		r.m.failures.WithLabelValues(reasonPublish).Inc()
		r.log.Warn("checkpoint not published; retried by the next run", "workspace_id", cp.Workspace, "chat_id", cp.Chat,
			"covered_until", cp.Position.Time, "err", err)
		return
	}
	r.m.published.WithLabelValues("acked").Inc()
}

func (r *Reconciler) isPending(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[key]
}

// logReport writes the one summary line of a chat run: ids and counts only.
func (r *Reconciler) logReport(log *slog.Logger, rep *ChatReport) {
	attrs := []any{"kind", rep.Kind, "result", rep.result(), "start", rep.Start, "end", rep.End,
		"pages", rep.Pages, "thread_pages", rep.ThreadPages, "threads", rep.Threads, "messages", rep.Messages,
		"produced", rep.Produced, "unchanged", rep.Unchanged, "stale", rep.Stale, "invalid", rep.Invalid,
		"covered_until", rep.CoveredUntil, "duration", rep.Duration}
	switch {
	case rep.Err != nil:
		log.Warn("reconcile failed", append(attrs, "reason", failureReason(rep.Err), "err", rep.Err)...)
	case rep.Stopped != nil:
		log.Info("reconcile stopped", append(attrs, "stopped", rep.Stopped)...)
	case rep.Skipped:
		log.Debug("reconcile skipped: chat busy")
	case rep.Produced > 0 || rep.Kind != KindIncremental:
		log.Info("reconcile done", attrs...)
	default:
		log.Debug("reconcile done", attrs...)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// boundedID keeps an untrusted id loggable.
func boundedID(s string) string {
	if _, err := ids.ParseMessageID(s); err != nil {
		return "(invalid)"
	}
	return s
}
