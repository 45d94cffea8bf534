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

// summarize applies the summary policy of design §13 after a window finished: at most
// one attempt per completed window, only when the window created or materially updated
// a visible draft, and never over a human summary. summary_attempted is set in the
// window state before the summarizer is called, so the attempt is spent whatever
// happens next: a failure is counted and logged, never retried, and never fails the
// window. The summarizer's input is the workspace's visible entries (ignored messages
// never reach it).
func (w *Worker) summarize(ctx context.Context, j *job, res attemptResult, log *slog.Logger) {
	if res.outcome != outcomeCompleted {
		return
	}
	s := summaryRun{w: w, j: j, log: log}
	if w.synthesisOf(j).sum == nil {
		s.skip(skipDisabled)
		return
	}
	previous, err := s.read(ctx)
	if !res.changed && !refreshDue(previous, err) {
		s.skip(skipNoChange)
		return
	}
	if !s.usable(previous, err) || !s.spend(ctx) {
		return
	}
	req, ok := s.request(ctx, previous)
	if !ok {
		return
	}
	text, usage, ok := s.call(ctx, req)
	if !ok {
		return
	}
	s.write(ctx, req, text, usage)
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
// refresh due, may it be replaced); zero with store.ErrNotFound when it has none.
func (s summaryRun) read(ctx context.Context) (store.Summary, error) {
	var sum store.Summary
	err := s.w.withStore(ctx, "get_summary", func() (err error) {
		sum, err = s.w.o.Store.VersionSummary(ctx, s.j.key.Workspace, s.j.processorVersion())
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		sum = store.Summary{}
	}
	return sum, err
}

// usable reports whether the previous summary (read's answer) may be replaced: it
// was read (or there is none) and no human wrote it.
func (s summaryRun) usable(previous store.Summary, err error) bool {
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		s.skip(skipStoreError, "error", err)
		return false
	case previous.Source == store.EntryFromHuman:
		s.skip(skipHumanSummary)
		return false
	}
	return true
}

// spend sets summary_attempted in the window state; it is false when that failed or
// the window's one attempt was spent already.
func (s summaryRun) spend(ctx context.Context) bool {
	var first bool
	err := s.w.withStore(ctx, "mark_summary_attempted", func() (err error) {
		first, err = s.w.o.Store.MarkSummaryAttempted(ctx, s.j.key)
		return err
	})
	switch {
	case err != nil:
		s.skip(skipStoreError, "error", err)
		return false
	case !first:
		s.skip(skipAlreadyAttempted)
		return false
	}
	return true
}

// request builds the summarizer's input from the workspace's visible entries; ok is
// false when they cannot be read or none of them is of a kind the summarizer knows.
func (s summaryRun) request(ctx context.Context, previous store.Summary) (synth.SummaryRequest, bool) {
	ws := s.j.key.Workspace
	var entries []store.Entry
	err := s.w.withStore(ctx, "list_visible_entries", func() (err error) {
		entries, err = s.w.o.Store.VersionVisibleEntries(ctx, ws, s.j.processorVersion())
		return err
	})
	if err != nil {
		s.attempted(summaryFailed, err)
		return synth.SummaryRequest{}, false
	}
	req := synth.SummaryRequest{Workspace: ws, Previous: previous.Text}
	for _, e := range entries {
		k := synth.Kind(e.Kind)
		if !k.Valid() || (e.Status != store.EntryStatusDraft && e.Status != store.EntryStatusConfirmed) {
			continue // a human entry of a kind the summarizer does not know
		}
		req.Entries = append(req.Entries, synth.VisibleEntry{Kind: k, Title: e.Title, Body: e.Body,
			OccurredAt: e.OccurredAt, Status: string(e.Status)})
	}
	if len(req.Entries) == 0 {
		s.skip(skipNoEntries)
		return req, false
	}
	return req, true
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
func refreshDue(sum store.Summary, err error) bool {
	return err == nil && sum.Source == store.EntryFromAI && sum.RefreshDueAt != nil
}
