package synthesis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

// maxLookbackRows bounds the rows read for the context before a window; they are read
// in pages of scanPage rows (rows carry message text, so pages stay small).
const (
	maxLookbackRows = 10 * store.MaxPageSize
	scanPage        = 200
)

// attemptResult is a whole-window attempt that reached a terminal state.
type attemptResult struct {
	outcome string // outcomeCompleted or outcomeIgnored
	// changed: the window created or materially updated a visible draft (§13).
	changed bool
	drafts  int
	state   store.WindowState
	// summary is the summary policy's decision, made before a completed finish.
	summary summaryPlan
}

// attempt synthesizes the claimed window chunk by chunk (design §12.1) and finishes
// it completed or ignored. Errors: an *attemptError (the attempt failed; the caller
// records it), an error wrapping store.ErrConflict (the lease was lost), or ctx's.
func (w *Worker) attempt(ctx context.Context, st store.WindowState, j *job, tk *gateTicket, log *slog.Logger) (attemptResult, error) {
	a := w.newAttemptRun(st, j, tk, log)
	page, err := a.start(ctx)
	if err != nil {
		return a.res, err
	}
	for len(page.Items) > 0 {
		c, err := a.plan(ctx, page.Items)
		if err != nil {
			return a.res, err
		}
		// A chunk that takes the whole last page is the window's last: reading after it
		// would find nothing, so its commit finishes the window.
		last := page.Next == nil && len(c.rows) == len(page.Items)
		if err := a.commit(ctx, c, last); err != nil {
			return a.res, err
		}
		if last {
			return a.res, nil
		}
		if page, err = a.nextEvidence(ctx); err != nil {
			return a.res, err
		}
	}
	return a.finish(ctx, nil)
}

// start runs the reads an attempt needs before its first chunk at once, each on its
// own connection, instead of one after another (issue 35): the resume (the aggregate
// of committed chunks and the context before the window), the first page of evidence
// and the existing entries for the first chunk. They are reads only; the attempt
// writes nothing before all of them are back. The first error in that order is
// returned.
func (a *attemptRun) start(ctx context.Context) (store.EvidencePage, error) {
	var (
		wg                         sync.WaitGroup
		page                       store.EvidencePage
		resumeErr, pageErr, exiErr error
	)
	wg.Go(func() { resumeErr = a.resume(ctx) })
	wg.Go(func() { page, pageErr = a.nextEvidence(ctx) })
	wg.Go(func() {
		var existing []synth.ExistingEntry
		if existing, exiErr = a.w.existingEntries(ctx, a.j); exiErr == nil {
			a.existing = &existing
		}
	})
	wg.Wait()
	return page, cmp.Or(resumeErr, pageErr, exiErr)
}

// attemptRun is one attempt's state as it walks the window chunk by chunk.
type attemptRun struct {
	w   *Worker
	j   *job
	st  store.WindowState
	tk  *gateTicket
	log *slog.Logger

	lease    store.WindowLease
	below    int64           // the BelowOffset of the window's reads
	agg      *aggregate      // the window's evidence committed so far
	cursor   *store.Cursor   // the last committed evidence; nil before the first chunk
	chunk    int             // the window's committed chunks: the next chunk's number
	mem      *recent         // messages of the attempt's earlier chunks, for context
	lookback []synth.Message // the context before the window
	prompt   string          // the synthesizer's latest prompt version
	res      attemptResult
	// existing: the existing entries read by start for the first chunk; nil once used
	// (later chunks read them again: the earlier chunks' drafts are among them).
	existing *[]synth.ExistingEntry
}

func (w *Worker) newAttemptRun(st store.WindowState, j *job, tk *gateTicket, log *slog.Logger) *attemptRun {
	a := &attemptRun{
		w: w, j: j, st: st, tk: tk, log: log,
		lease:  st.Lease(),
		agg:    newAggregate(),
		cursor: st.Cursor,
		chunk:  st.Meta.ChunkCount,
		mem:    &recent{size: min(max(4*w.o.EvidenceBatchLimit, 100), store.MaxPageSize)},
	}
	// A window reads the messages its record names; a sweep's takeover has
	// no record, the window state remembers the bound.
	a.below = j.belowOffset()
	if a.below == 0 {
		a.below = st.Meta.BelowOffset
	}
	// A resumed window's committed chunks count: their drafts, and whether they changed
	// a visible draft (the summary policy, §13), are in the window state.
	a.res.drafts, a.res.changed = st.Meta.DraftCount, st.Meta.DraftsChanged
	return a
}

// resume reads what the attempt needs before its first chunk: the aggregate of the
// chunks committed before it, and the context before the window.
func (a *attemptRun) resume(ctx context.Context) error {
	if a.cursor != nil {
		// The store resumed the window after a committed chunk: the aggregate covers the
		// evidence before the cursor too.
		if err := a.w.seedAggregate(ctx, a.j, a.below, *a.cursor, a.agg); err != nil {
			return err
		}
	}
	var err error
	a.lookback, err = a.w.lookback(ctx, a.j)
	return err
}

// nextEvidence reads the next page of the window's eligible evidence after the cursor.
func (a *attemptRun) nextEvidence(ctx context.Context) (store.EvidencePage, error) {
	var page store.EvidencePage
	err := a.w.withStore(ctx, "evidence_in_range", func() (err error) {
		page, err = a.w.o.Store.EvidenceInRange(ctx, store.RangeQuery{Workspace: a.j.key.Workspace, Chat: a.j.key.Chat,
			From: a.j.key.Start, To: a.j.end, After: a.cursor, Limit: a.w.o.EvidenceBatchLimit, EligibleOnly: true,
			BelowOffset: a.below})
		return err
	})
	if err != nil {
		return page, storeFailure(ctx, "reading the window's evidence", err)
	}
	return page, nil
}

// chunkPlan is one chunk, ready for the synthesizer.
type chunkPlan struct {
	batchID string
	req     synth.Request
	primary []synth.Message  // the chunk's own messages
	rows    []store.Evidence // their evidence rows
	context int              // how many read-only context messages req carries
	tokens  int              // the estimated tokens of req
}

// plan cuts the next chunk from a page of evidence: as much primary evidence as the
// token budget allows, the existing entries and the read-only context.
func (a *attemptRun) plan(ctx context.Context, items []store.Evidence) (chunkPlan, error) {
	w, j := a.w, a.j
	msgs := make([]synth.Message, len(items))
	for i, e := range items {
		var err error
		if msgs[i], err = toMessage(j.key.Chat, e, false); err != nil {
			return chunkPlan{}, failAttempt(reasonStore, err)
		}
	}
	var existing []synth.ExistingEntry
	if a.existing != nil {
		existing, a.existing = *a.existing, nil
	} else {
		var err error
		if existing, err = w.existingEntries(ctx, j); err != nil {
			return chunkPlan{}, err
		}
	}
	// The budget is shared: existing entries take at most an eighth, a quarter is
	// kept for read-only context, primary evidence takes the rest (and the context
	// whatever primary evidence left).
	budget := w.synthesisOf(j).budget
	exist, existTokens := pickExisting(existing, budget/8, *w.o.MaxExistingEntries)
	reserve := 0
	if *w.o.MaxContextMessages > 0 {
		reserve = budget / 4
	}
	n, tokens := takePrimary(msgs, w.o.EvidenceBatchLimit, budget, existTokens+reserve)
	primary, rows := msgs[:n], items[:n]
	ctxMsgs, ctxTokens, err := w.chunkContext(ctx, j, primary, a.mem, a.lookback, max(budget-existTokens-tokens, 0))
	if err != nil {
		return chunkPlan{}, err
	}
	return chunkPlan{
		batchID: fmt.Sprintf("%s#%d", j.key.SourceKey(), a.chunk),
		req: synth.Request{
			Workspace: j.key.Workspace, Chat: j.key.Chat, WindowStart: j.key.Start, WindowEnd: j.end,
			Groups:           groupConversations(append(slices.Clone(primary), ctxMsgs...), w.o.ProximityGap),
			Existing:         exist,
			ProcessorVersion: j.processorVersion(),
		},
		primary: primary,
		rows:    rows,
		context: len(ctxMsgs),
		tokens:  tokens + ctxTokens + existTokens,
	}, nil
}

// commit synthesizes the chunk, writes its drafts and advances the window's cursor
// past it; the window's last chunk finishes the window in the same store call.
func (a *attemptRun) commit(ctx context.Context, c chunkPlan, last bool) error {
	w := a.w
	out, err := w.synthesizeChunk(ctx, w.synthesisOf(a.j), c.req, c.batchID, a.tk, a.log)
	if err != nil {
		return err
	}
	if out.PromptVersion != "" {
		a.prompt = out.PromptVersion
	}
	changed, err := w.writeDrafts(ctx, a.j, a.st, c.req, c.rows, out, c.batchID, a.log)
	if err != nil {
		return err
	}
	n := len(c.rows)
	end := c.rows[n-1].Cursor()
	p := store.ChunkProgress{Cursor: end, Evidence: n, Drafts: len(out.Drafts), Changed: changed}
	for i := range c.rows {
		a.agg.add(c.rows[i].ID, c.rows[i].ContentHash)
	}
	a.res.drafts += len(out.Drafts)
	a.res.changed = a.res.changed || changed
	if last {
		if _, err := a.finish(ctx, &p); err != nil {
			return err
		}
	} else {
		next, err := a.advance(ctx, p)
		if err != nil {
			return err
		}
		a.mem.add(c.primary)
		a.cursor = &end
		a.chunk = next.Meta.ChunkCount
		a.lease = next.Lease() // the state written: the next write's expectation
	}
	w.m.chunks.Inc()
	w.m.chunkEvidence.Observe(float64(n))
	w.m.chunkContext.Observe(float64(c.context))
	w.m.chunkTokens.Observe(float64(c.tokens))
	a.log.Debug("chunk committed", "batch_id", c.batchID, "evidence", n, "context", c.context,
		"estimated_tokens", c.tokens, "drafts", len(out.Drafts), "cursor", end.String(), "last", last)
	return nil
}

// advance records a committed chunk in the window state.
func (a *attemptRun) advance(ctx context.Context, p store.ChunkProgress) (store.WindowState, error) {
	var next store.WindowState
	err := a.w.withStore(ctx, "advance_window_cursor", func() (err error) {
		next, err = a.w.o.Store.AdvanceWindowCursor(ctx, a.lease, p)
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return next, err
		}
		return next, storeFailure(ctx, "advancing the window cursor", err)
	}
	return next, nil
}

// finish ends the window completed (when it has drafts) or ignored, with the
// aggregate of its evidence; last, when set, is the window's last chunk, recorded in
// the same transaction (store.FinishWindowAfterChunk).
func (a *attemptRun) finish(ctx context.Context, last *store.ChunkProgress) (attemptResult, error) {
	a.res.outcome = outcomeIgnored
	status := store.WindowIgnored
	if a.res.drafts > 0 {
		a.res.outcome, status = outcomeCompleted, store.WindowCompleted
	}
	if status == store.WindowCompleted {
		// The summary is decided before the finish, so that the finish can spend its
		// one attempt (summary_attempted) in the same transaction (decisions D44).
		a.res.summary = a.w.planSummary(ctx, a.j, a.res.changed, a.log)
	}
	mutate := func(s *store.WindowState) {
		a.res.summary.mark(s)
		s.AggregateHash = a.agg.sum()
		s.Meta.EvidenceCount = a.agg.n
		s.Meta.Error = ""
		if a.prompt != "" {
			s.Meta.PromptVersion = a.prompt
		}
	}
	err := a.w.withStore(ctx, "finish_window", func() (err error) {
		if last != nil {
			a.res.state, err = a.w.o.Store.FinishWindowAfterChunk(ctx, a.lease, *last, status, mutate)
		} else {
			a.res.state, err = a.w.o.Store.FinishWindow(ctx, a.lease, status, mutate)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return a.res, err
		}
		return a.res, storeFailure(ctx, "finishing the window", err)
	}
	return a.res, nil
}

// storeFailure turns a store error inside an attempt into an attempt failure, unless
// ctx ended.
func storeFailure(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return failAttempt(reasonStore, fmt.Errorf("%s: %w", what, err))
}

// seedAggregate adds the window's eligible evidence (first carried below below, when
// positive) up to and including cursor to agg.
func (w *Worker) seedAggregate(ctx context.Context, j *job, below int64, cursor store.Cursor, agg *aggregate) error {
	var after *store.Cursor
	for {
		var page store.EvidencePage
		err := w.withStore(ctx, "evidence_in_range", func() (err error) {
			page, err = w.o.Store.EvidenceInRange(ctx, store.RangeQuery{Workspace: j.key.Workspace, Chat: j.key.Chat,
				From: j.key.Start, To: j.end, After: after, Limit: scanPage, EligibleOnly: true, BelowOffset: below})
			return err
		})
		if err != nil {
			return storeFailure(ctx, "reading the window's committed evidence", err)
		}
		for i := range page.Items {
			e := &page.Items[i]
			if cursor.Less(e.Cursor()) {
				return nil
			}
			agg.add(e.ID, e.ContentHash)
		}
		if page.Next == nil {
			return nil
		}
		after = page.Next
	}
}

// lookback reads the eligible messages of the ContextLookback before the window and
// keeps the newest MaxContextMessages of them, newest first: read-only context.
func (w *Worker) lookback(ctx context.Context, j *job) ([]synth.Message, error) {
	if *w.o.MaxContextMessages == 0 {
		return nil, nil
	}
	var (
		kept  []store.Evidence
		after *store.Cursor
		read  int
	)
	for read < maxLookbackRows {
		var page store.EvidencePage
		err := w.withStore(ctx, "evidence_in_range", func() (err error) {
			page, err = w.o.Store.EvidenceInRange(ctx, store.RangeQuery{Workspace: j.key.Workspace, Chat: j.key.Chat,
				From: j.key.Start.Add(-w.o.ContextLookback), To: j.key.Start, After: after,
				Limit: scanPage, EligibleOnly: true})
			return err
		})
		if err != nil {
			return nil, storeFailure(ctx, "reading the context before the window", err)
		}
		read += len(page.Items)
		kept = append(kept, page.Items...)
		if over := len(kept) - *w.o.MaxContextMessages; over > 0 {
			kept = slices.Delete(kept, 0, over)
		}
		if page.Next == nil {
			break
		}
		after = page.Next
	}
	out := make([]synth.Message, 0, len(kept))
	for i := len(kept) - 1; i >= 0; i-- {
		m, err := toMessage(j.key.Chat, kept[i], true)
		if err != nil {
			continue // not a message of this chat: nothing to give as context
		}
		out = append(out, m)
	}
	return out, nil
}

// chunkContext chooses a chunk's read-only context within budget tokens (design §12.2),
// in this priority: the roots and parents of the chunk's replies (fetched by key when
// they are older than anything in hand), earlier messages of the chunk's threads from
// the attempt's earlier chunks, then the messages just before the window, newest
// first. Only eligible, live messages before window_end are context.
func (w *Worker) chunkContext(ctx context.Context, j *job, primary []synth.Message, mem *recent,
	lookback []synth.Message, budget int) ([]synth.Message, int, error) {
	if *w.o.MaxContextMessages == 0 || budget <= 0 {
		return nil, 0, nil
	}
	exclude := make(map[int64]struct{}, len(primary))
	inChunk := make(map[string]struct{}, len(primary))
	for _, m := range primary {
		exclude[m.EvidenceID] = struct{}{}
		inChunk[string(m.MessageID)] = struct{}{}
	}
	known := make(map[string]synth.Message, len(lookback)+len(mem.msgs))
	for _, m := range lookback {
		known[string(m.MessageID)] = m
	}
	for _, m := range mem.msgs {
		known[string(m.MessageID)] = m
	}
	var (
		anchors []synth.Message
		fetch   []string
		asked   = map[string]bool{}
	)
	for _, m := range primary {
		for _, ref := range []string{m.RootID, m.ParentID} {
			if ref == "" || asked[ref] {
				continue
			}
			asked[ref] = true
			if _, ok := inChunk[ref]; ok {
				continue
			}
			if k, ok := known[ref]; ok {
				anchors = append(anchors, k)
				continue
			}
			fetch = append(fetch, ids.MessageSourceKey(j.key.Chat, ids.MessageID(ref)))
		}
	}
	if len(fetch) > 0 {
		var rows []store.Evidence
		err := w.withStore(ctx, "evidence_by_keys", func() (err error) {
			rows, err = w.o.Store.EvidenceByKeys(ctx, j.key.Workspace, store.LarkMessageEvidence, fetch)
			return err
		})
		if err != nil {
			return nil, 0, storeFailure(ctx, "reading the roots of the chunk's replies", err)
		}
		for _, e := range rows {
			if !e.SynthesisEligible || e.Deleted || !e.OccurredAt.Before(j.end) {
				continue
			}
			if m, err := toMessage(j.key.Chat, e, true); err == nil {
				anchors = append(anchors, m)
			}
		}
	}
	candidates := append(anchors, mem.relatedTo(primary)...)
	candidates = append(candidates, lookback...)
	out, tokens := pickContext(candidates, exclude, budget, *w.o.MaxContextMessages)
	return out, tokens, nil
}

// existingEntries lists the workspace's visible entries from ExistingEntriesLookback
// before the window up to its end, for a synthesizer to avoid repeating them.
func (w *Worker) existingEntries(ctx context.Context, j *job) ([]synth.ExistingEntry, error) {
	if *w.o.MaxExistingEntries == 0 {
		return nil, nil
	}
	var (
		out   []synth.ExistingEntry
		after = &store.Cursor{OccurredAt: j.key.Start.Add(-w.o.ExistingEntriesLookback)}
	)
	for pages := 0; pages < 10; pages++ {
		var page store.EntryPage
		err := w.withStore(ctx, "list_entries", func() (err error) {
			page, err = w.o.Store.ListEntries(ctx, j.key.Workspace, store.EntryQuery{ProcessorVersion: j.processorVersion(),
				After: after, Limit: store.MaxPageSize})
			return err
		})
		if err != nil {
			return nil, storeFailure(ctx, "listing existing entries", err)
		}
		for _, e := range page.Items {
			if !e.OccurredAt.Before(j.end) {
				return out, nil
			}
			k := synth.Kind(e.Kind)
			if !k.Valid() {
				continue // a human entry of a kind synthesis does not know
			}
			out = append(out, synth.ExistingEntry{Kind: k, Title: e.Title, OccurredAt: e.OccurredAt, Fingerprint: e.Fingerprint})
			if len(out) > *w.o.MaxExistingEntries {
				out = out[1:]
			}
		}
		if page.Next == nil {
			break
		}
		after = page.Next
	}
	return out, nil
}

// synthesizeChunk calls the synthesizer through the model gate and validates the
// result. An outage error (unavailable, timed out) is retried up to ChunkRetries times
// with backoff while the gate is closed; then, or at once for the gate's probe, the
// gate opens and the attempt fails with reason model_unavailable wrapping
// errModelOutage (refunded by the caller). No call is made while the gate is open for
// tk. Invalid output (after the model client's own bounded retries) and rejected
// requests fail the attempt at once; they are answers, so they close the gate.
func (w *Worker) synthesizeChunk(ctx context.Context, syn *jobSynthesis, req synth.Request, batchID string, tk *gateTicket, log *slog.Logger) (synth.Result, error) {
	retry := w.backoff()
	for try := 0; ; try++ {
		if !w.gate.allow(tk) {
			return synth.Result{}, failAttempt(reasonModelUnavailable,
				fmt.Errorf("chunk %s: %w: the model gate is open, no call made", batchID, errModelOutage))
		}
		cctx, cancel := context.WithTimeout(ctx, syn.chunkTimeout)
		started := time.Now()
		res, err := syn.syn.Synthesize(cctx, req)
		cancel()
		label := "ok"
		if err != nil {
			label = "error"
		}
		w.m.modelLatency.WithLabelValues(label).Observe(time.Since(started).Seconds())
		w.m.modelTokens.WithLabelValues("prompt").Add(float64(res.Usage.PromptTokens))
		w.m.modelTokens.WithLabelValues("completion").Add(float64(res.Usage.CompletionTokens))
		if err == nil || !isModelOutage(err) {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			w.gate.answered(tk)
		}
		if err == nil {
			if verr := synth.ValidateAll(req, res.Drafts); verr != nil {
				w.m.validationError.Inc()
				return res, failAttempt(reasonInvalidOutput, fmt.Errorf("chunk %s from %s: %w", batchID, res.Synthesizer, verr))
			}
			return res, nil
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		switch {
		case errors.Is(err, synth.ErrInvalidOutput):
			w.m.validationError.Inc()
			return res, failAttempt(reasonInvalidOutput, fmt.Errorf("chunk %s: %w", batchID, err))
		case isModelOutage(err) && try < *w.o.ChunkRetries && w.gate.closed():
			reason := "unavailable"
			if errors.Is(err, context.DeadlineExceeded) {
				reason = "timeout"
			}
			w.m.chunkRetries.WithLabelValues(reason).Inc()
			log.Warn("synthesizing a chunk failed; retrying the chunk", "batch_id", batchID, "try", try+1, "error", err)
			if err := backoff.Sleep(ctx, retry.next()); err != nil {
				return res, err
			}
		case isModelOutage(err):
			cause := fmt.Errorf("chunk %s after %d tries: %w: %w", batchID, try+1, errModelOutage, err)
			w.gate.failed(tk, cause)
			return res, failAttempt(reasonModelUnavailable, cause)
		default:
			return res, failAttempt(reasonModelRejected, fmt.Errorf("chunk %s: %w", batchID, err))
		}
	}
}

// aiMetadata is an AI entry's ai_metadata (design §12.4).
type aiMetadata struct {
	ProcessorVersion string        `json:"processor_version"`
	Synthesizer      string        `json:"synthesizer,omitempty"`
	Model            string        `json:"model,omitempty"`
	PromptVersion    string        `json:"prompt_version,omitempty"`
	BatchID          string        `json:"batch_id"`
	WindowKey        string        `json:"window_key"`
	WindowStart      time.Time     `json:"window_start"`
	WindowEnd        time.Time     `json:"window_end"`
	ChatID           string        `json:"chat_id"`
	ThreadIDs        []string      `json:"thread_ids,omitempty"`
	RootIDs          []string      `json:"root_ids,omitempty"`
	Evidence         []evidenceRef `json:"evidence"`
}

// evidenceRef is one supporting evidence row with the content hash it had as input.
type evidenceRef struct {
	ID          int64  `json:"id"`
	MessageID   string `json:"message_id"`
	ContentHash string `json:"content_hash"`
}

// writeDrafts upserts the chunk's validated drafts, each deduplicated by
// synth.Fingerprint and bound to its evidence. changed reports a material change of a
// visible draft (§13): one created or updated; on a retried or taken-over attempt also
// one found unchanged, since the earlier attempt may have written it without ever
// reaching the summary. Confirmed, hidden and human entries keep their text (the store
// enforces it; counted as protected) and only gain evidence.
func (w *Worker) writeDrafts(ctx context.Context, j *job, st store.WindowState, req synth.Request, rows []store.Evidence,
	res synth.Result, batchID string, log *slog.Logger) (bool, error) {
	hashes := make(map[int64]string, len(rows))
	for i := range rows {
		hashes[rows[i].ID] = rows[i].ContentHash
	}
	byID := make(map[int64]synth.Message)
	for _, g := range req.Groups {
		for _, m := range g.Messages {
			if !m.Context {
				byID[m.EvidenceID] = m
			}
		}
	}
	drafts := make([]store.EntryDraft, 0, len(res.Drafts))
	for _, d := range res.Drafts {
		meta := aiMetadata{
			ProcessorVersion: j.processorVersion(), Synthesizer: res.Synthesizer, Model: res.Model,
			PromptVersion: res.PromptVersion, BatchID: batchID, WindowKey: j.key.SourceKey(),
			WindowStart: j.key.Start, WindowEnd: j.end, ChatID: string(j.key.Chat),
		}
		evidence := slices.Clone(d.EvidenceIDs)
		slices.Sort(evidence)
		for _, id := range evidence {
			m := byID[id]
			meta.Evidence = append(meta.Evidence, evidenceRef{ID: id, MessageID: string(m.MessageID), ContentHash: hashes[id]})
			if m.ThreadID != "" && !slices.Contains(meta.ThreadIDs, m.ThreadID) {
				meta.ThreadIDs = append(meta.ThreadIDs, m.ThreadID)
			}
			if m.RootID != "" && !slices.Contains(meta.RootIDs, m.RootID) {
				meta.RootIDs = append(meta.RootIDs, m.RootID)
			}
		}
		raw, err := json.Marshal(meta)
		if err != nil {
			return false, failAttempt(reasonStore, fmt.Errorf("encoding ai metadata of chunk %s: %w", batchID, err))
		}
		drafts = append(drafts, store.EntryDraft{Workspace: j.key.Workspace, Fingerprint: synth.Fingerprint(j.key.Workspace, d),
			ProcessorVersion: j.processorVersion(),
			EntryContent: store.EntryContent{OccurredAt: d.OccurredAt, Kind: string(d.Kind), Title: d.Title,
				Body: d.Body, AIMetadata: raw, EvidenceIDs: evidence}})
	}
	if len(drafts) == 0 {
		return false, nil
	}
	// The chunk's drafts go in one transaction: all or none, one round trip set.
	var written []store.EntryResult
	err := w.withStore(ctx, "upsert_draft_entries", func() (err error) {
		written, err = w.o.Store.UpsertDraftEntries(ctx, drafts)
		return err
	})
	if err != nil {
		return false, storeFailure(ctx, fmt.Sprintf("writing %d drafts of chunk %s", len(drafts), batchID), err)
	}
	changed := false
	for i, r := range written {
		d := drafts[i]
		w.m.draftBindings.Add(float64(len(d.EvidenceIDs)))
		outcome := draftUnchanged
		switch {
		case r.HumanOwned:
			outcome = draftProtected
		case r.Outcome == store.EntryCreated:
			outcome, changed = draftCreated, true
			if !j.drafted {
				j.drafted = true
				w.m.firstDraft.Observe(w.o.Clock().Sub(j.end).Seconds())
			}
		case r.Outcome == store.EntryUpdated:
			outcome, changed = draftUpdated, true
		case r.Outcome == store.EntryEvidenceAttached:
			outcome = draftAttached
		}
		if st.Attempts > 1 && !r.HumanOwned {
			changed = true
		}
		w.m.drafts.WithLabelValues(outcome).Inc()
		log.Debug("draft written", "batch_id", batchID, "entry_id", r.ID, "fingerprint", d.Fingerprint, "kind", d.Kind,
			"outcome", outcome, "evidence", len(d.EvidenceIDs))
	}
	return changed, nil
}
