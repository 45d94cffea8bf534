package synthesis

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// summaryMeta is the ai_metadata of a summary the worker writes.
type summaryMeta struct {
	WindowKey        string    `json:"window_key"`
	ProcessorVersion string    `json:"processor_version"`
	Entries          int       `json:"entries"`
	PromptTokens     int       `json:"prompt_tokens,omitempty"`
	CompletionTokens int       `json:"completion_tokens,omitempty"`
	SummarizedAt     time.Time `json:"summarized_at"`
}

// summaryPlan is the summary policy of design §13 decided for a window about to
// finish completed (planSummary), before its finish: either an attempt, whose
// summary_attempted is set in the finish's own transaction (decisions D44), or the
// reason there is none, counted once the window is completed.
type summaryPlan struct {
	attempt bool // set summary_attempted in the finish; summarize after it
	// first: the finish set summary_attempted (it was not set before), so this worker
	// makes the window's one attempt.
	first bool
	req   synth.SummaryRequest
	skip  string // why no attempt is made; "" for an attempt
	attrs []any  // the skip's log attributes
}

// mark sets summary_attempted in the state s a window finishes with, when the plan
// is an attempt, and records whether it was set before.
func (p *summaryPlan) mark(s *store.WindowState) {
	if !p.attempt {
		return
	}
	p.first = !s.Meta.SummaryAttempted
	s.Meta.SummaryAttempted = true
}

// planSummary applies the summary policy of design §13 to a window about to finish
// completed; changed says whether the window created or materially updated a visible
// draft. At most one attempt per completed window, only when it changed a visible
// draft (or a refresh is due), and never over a human summary. The previous summary
// and, for a changed window, the visible entries that are the summarizer's input
// (ignored messages never reach it) are read in one round trip
// (store.VersionSummaryInput): the window's drafts are written by then.
func (w *Worker) planSummary(ctx context.Context, j *job, changed bool, log *slog.Logger) summaryPlan {
	if w.synthesisOf(j).sum == nil {
		return summaryPlan{skip: skipDisabled}
	}
	s := summaryRun{w: w, j: j, log: log}
	in, err := s.read(ctx, changed)
	if !changed && !refreshDue(in, err) {
		return summaryPlan{skip: skipNoChange}
	}
	switch {
	case err != nil:
		return summaryPlan{skip: skipStoreError, attrs: []any{"error", err}}
	case in.Found && in.Summary.Source == store.EntryFromHuman:
		return summaryPlan{skip: skipHumanSummary}
	}
	if !changed { // a refresh is due: the entries were not read with the summary
		err := w.withStore(ctx, "list_visible_entries", func() (err error) {
			in.Entries, err = w.o.Store.VersionVisibleEntries(ctx, j.key.Workspace, j.processorVersion())
			return err
		})
		if err != nil {
			return summaryPlan{skip: skipStoreError, attrs: []any{"error", err}}
		}
	}
	req := synth.SummaryRequest{Workspace: j.key.Workspace, Previous: in.Summary.Text}
	for _, e := range in.Entries {
		k := synth.Kind(e.Kind)
		if !k.Valid() || (e.Status != store.EntryStatusDraft && e.Status != store.EntryStatusConfirmed) {
			continue // a human entry of a kind the summarizer does not know
		}
		req.Entries = append(req.Entries, synth.VisibleEntry{Kind: k, Title: e.Title, Body: e.Body,
			OccurredAt: e.OccurredAt, Status: string(e.Status)})
	}
	if len(req.Entries) == 0 {
		return summaryPlan{skip: skipNoEntries}
	}
	return summaryPlan{attempt: true, req: req}
}

// summarize carries out the summary plan of a window that finished completed: it
// counts a skip, or, when the finish set summary_attempted (so the attempt is spent
// whatever happens next), calls the summarizer once and stores its text. A failure
// is counted and logged, never retried, and never fails the window.
func (w *Worker) summarize(ctx context.Context, j *job, res attemptResult, log *slog.Logger) {
	if res.outcome != outcomeCompleted {
		return
	}
	s := summaryRun{w: w, j: j, log: log}
	p := res.summary
	switch {
	case p.skip != "":
		s.skip(p.skip, p.attrs...)
		return
	case !p.first:
		s.skip(skipAlreadyAttempted)
		return
	}
	text, usage, ok := s.call(ctx, p.req)
	if !ok {
		return
	}
	s.write(ctx, p.req, text, usage)
}

// summaryRun is the summary attempt after one window; each step counts and logs how
// the attempt ends when it ends there.
type summaryRun struct {
	w   *Worker
	j   *job
	log *slog.Logger
}

// skip counts and logs a summary that is not attempted.
func (s summaryRun) skip(reason string, attrs ...any) {
	s.w.m.summarySkipped.WithLabelValues(reason).Inc()
	s.log.Debug("summary skipped", append([]any{"reason", reason}, attrs...)...)
}

// attempted counts how a spent attempt ended, and logs a failure.
func (s summaryRun) attempted(outcome string, err error) {
	s.w.m.summaryAttempts.WithLabelValues(outcome).Inc()
	if err != nil {
		s.log.Warn("summary attempt failed; the window keeps its state and the attempt is spent", "outcome", outcome, "error", err)
	}
}

// read reads the workspace's summary, once for both questions asked of it (is a
// refresh due, may it be replaced), and with entries the visible entries, in one
// round trip.
func (s summaryRun) read(ctx context.Context, entries bool) (store.SummaryInput, error) {
	var in store.SummaryInput
	err := s.w.withStore(ctx, "get_summary", func() (err error) {
		in, err = s.w.o.Store.VersionSummaryInput(ctx, s.j.key.Workspace, s.j.processorVersion(), entries)
		return err
	})
	return in, err
}

// call runs the summarizer, bounded by SummaryTimeout, and validates its text; ok is
// false when it failed.
func (s summaryRun) call(ctx context.Context, req synth.SummaryRequest) (string, synth.Usage, bool) {
	sctx, cancel := context.WithTimeout(ctx, s.w.o.SummaryTimeout)
	text, usage, err := s.w.synthesisOf(s.j).sum.Summarize(sctx, req)
	cancel()
	if err == nil {
		err = synth.ValidateSummary(text)
	}
	if err != nil {
		outcome := summaryFailed
		if errors.Is(err, synth.ErrInvalidOutput) {
			outcome = summaryInvalid
		}
		s.attempted(outcome, err)
		return "", synth.Usage{}, false
	}
	return text, usage, true
}

// write stores the summary, unless a human summary was written meanwhile.
func (s summaryRun) write(ctx context.Context, req synth.SummaryRequest, text string, usage synth.Usage) {
	w, j := s.w, s.j
	meta, err := json.Marshal(summaryMeta{WindowKey: j.key.SourceKey(), ProcessorVersion: j.processorVersion(),
		Entries: len(req.Entries), PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens,
		SummarizedAt: w.o.Clock().UTC()})
	if err != nil {
		s.attempted(summaryFailed, err)
		return
	}
	var written bool
	err = w.withStore(ctx, "put_ai_summary", func() (err error) {
		written, err = w.o.Store.PutAISummary(ctx, j.key.Workspace, j.processorVersion(), text, meta)
		return err
	})
	switch {
	case err != nil:
		s.attempted(summaryFailed, err)
	case !written:
		s.attempted(summaryHumanKept, nil)
	default:
		s.attempted(summaryWritten, nil)
		if !j.closedAt.IsZero() {
			w.m.summaryLag.Observe(w.o.Clock().Sub(j.closedAt).Seconds())
		}
		s.log.Info("workspace summary written", "entries", len(req.Entries))
	}
}

// refreshDue reports whether a recall withdrew an AI draft of the workspace since
// its AI summary (read's answer) was written (store.Summary.RefreshDueAt,
// decisions D12): the summary's text is gone, and the next completed window
// summarizes even when it changed nothing itself. A store error counts as not due.
func refreshDue(in store.SummaryInput, err error) bool {
	return err == nil && in.Found && in.Summary.Source == store.EntryFromAI && in.Summary.RefreshDueAt != nil
}
