package synthesis

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
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
	skip := func(reason string, attrs ...any) {
		w.m.summarySkipped.WithLabelValues(reason).Inc()
		log.Debug("summary skipped", append([]any{"reason", reason}, attrs...)...)
	}
	attempted := func(outcome string, err error) {
		w.m.summaryAttempts.WithLabelValues(outcome).Inc()
		if err != nil {
			log.Warn("summary attempt failed; the window keeps its state and the attempt is spent", "outcome", outcome, "error", err)
		}
	}
	switch {
	case w.o.Summarizer == nil:
		skip(skipDisabled)
		return
	case !res.changed && !w.summaryRefreshDue(ctx, j.key.Workspace):
		skip(skipNoChange)
		return
	}
	ws := j.key.Workspace
	var previous store.Summary
	err := w.withStore(ctx, "get_summary", func() (err error) {
		previous, err = w.o.Store.GetSummary(ctx, ws)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		previous = store.Summary{}
	case err != nil:
		skip(skipStoreError, "error", err)
		return
	case previous.Source == store.EntryFromHuman:
		skip(skipHumanSummary)
		return
	}
	var first bool
	err = w.withStore(ctx, "mark_summary_attempted", func() (err error) {
		first, err = w.o.Store.MarkSummaryAttempted(ctx, j.key)
		return err
	})
	switch {
	case err != nil:
		skip(skipStoreError, "error", err)
		return
	case !first:
		skip(skipAlreadyAttempted)
		return
	}

	var entries []store.Entry
	err = w.withStore(ctx, "list_visible_entries", func() (err error) {
		entries, err = w.o.Store.ListVisibleEntries(ctx, ws)
		return err
	})
	if err != nil {
		attempted(summaryFailed, err)
		return
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
		skip(skipNoEntries)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, w.o.SummaryTimeout)
	text, usage, err := w.o.Summarizer.Summarize(sctx, req)
	cancel()
	if err == nil {
		err = synth.ValidateSummary(text)
	}
	if err != nil {
		outcome := summaryFailed
		if errors.Is(err, synth.ErrInvalidOutput) {
			outcome = summaryInvalid
		}
		attempted(outcome, err)
		return
	}
	meta, err := json.Marshal(summaryMeta{WindowKey: j.key.SourceKey(), ProcessorVersion: j.processorVersion(),
		Entries: len(req.Entries), PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens,
		SummarizedAt: w.o.Clock().UTC()})
	if err != nil {
		attempted(summaryFailed, err)
		return
	}
	var written bool
	err = w.withStore(ctx, "put_ai_summary", func() (err error) {
		written, err = w.o.Store.PutAISummaryIfNotHuman(ctx, ws, text, meta)
		return err
	})
	switch {
	case err != nil:
		attempted(summaryFailed, err)
	case !written:
		attempted(summaryHumanKept, nil)
	default:
		attempted(summaryWritten, nil)
		if !j.closedAt.IsZero() {
			w.m.summaryLag.Observe(w.o.Clock().Sub(j.closedAt).Seconds())
		}
		log.Info("workspace summary written", "entries", len(req.Entries))
	}
}

// summaryRefreshDue reports whether a recall withdrew an AI draft of the workspace
// since its AI summary was written (store.Summary.RefreshDueAt, decisions D12): the
// summary's text is gone, and the next completed window summarizes even when it
// changed nothing itself. A store error counts as not due.
func (w *Worker) summaryRefreshDue(ctx context.Context, ws ids.WorkspaceID) bool {
	var sum store.Summary
	err := w.withStore(ctx, "get_summary", func() (err error) {
		sum, err = w.o.Store.GetSummary(ctx, ws)
		return err
	})
	return err == nil && sum.Source == store.EntryFromAI && sum.RefreshDueAt != nil
}
