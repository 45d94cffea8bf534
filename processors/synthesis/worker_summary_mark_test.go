package synthesis

import (
	"context"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

// markChecker is a summarizer that reads the window's state when it is called: the
// window's one summary attempt must be durable (summary_attempted set on the completed
// window) before any summarizer runs (design §13, decisions D44).
type markChecker struct {
	next synth.Summarizer
	st   *store.Store
	key  store.WindowKey
	seen chan store.WindowState
}

func (m *markChecker) Summarize(ctx context.Context, req synth.SummaryRequest) (string, synth.Usage, error) {
	st, err := m.st.GetWindow(ctx, m.key)
	if err != nil {
		return "", synth.Usage{}, err
	}
	m.seen <- st
	return m.next.Summarize(ctx, req)
}

// TestSummaryAttemptIsDurableBeforeTheCall: when the summarizer is called, the window
// is already completed with summary_attempted set in the database, for a window of
// one chunk (its finish is the last chunk's transaction) and of two.
func TestSummaryAttemptIsDurableBeforeTheCall(t *testing.T) {
	for _, tt := range []struct {
		name  string
		limit int
	}{{"one chunk", 40}, {"two chunks", 3}} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rows := e.seed(win, incidentLines...)
			o := e.options()
			o.EvidenceBatchLimit = tt.limit
			mc := &markChecker{next: o.Summarizer, st: e.st, key: e.key(win), seen: make(chan store.WindowState, 2)}
			o.Summarizer = mc
			r := e.start(o)
			e.produce(e.closedWindow(win, rows))
			eventually(t, "the summary written", func() bool {
				return r.counter("larkline_synthesis_summary_attempts_total", "outcome", summaryWritten) == 1
			})
			if n := len(mc.seen); n != 1 {
				t.Fatalf("the summarizer was called %d times, want once", n)
			}
			if st := <-mc.seen; st.Status != store.WindowCompleted || !st.Meta.SummaryAttempted {
				t.Fatalf("when the summarizer was called the window was %s with summary_attempted %v, want completed and set",
					st.Status, st.Meta.SummaryAttempted)
			}
		})
	}
}

// TestUnchangedWindowSummarizesOnlyWhenARefreshIsDue: a completed window whose drafts
// were all written before (unchanged) makes a summary attempt only when a recall made
// a refresh due (decisions D12): the visible entries are then read on their own, and
// the attempt is spent in the finish as for a changed window (D44).
func TestUnchangedWindowSummarizesOnlyWhenARefreshIsDue(t *testing.T) {
	for _, tt := range []struct {
		name       string
		refreshDue bool
	}{{"refresh due", true}, {"no refresh due", false}} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rows := e.seed(win, incidentLines...)
			id := byMessage(rows)
			d := synth.Draft{Kind: synth.KindMitigation, Title: "Rolled back payments-api", OccurredAt: win.Add(2 * time.Minute),
				EvidenceIDs: []int64{id["3"], id["4"]}}
			// The draft is in the store already: the window finds it unchanged.
			if _, err := e.st.UpsertDraftEntries(ctx, []store.EntryDraft{{Workspace: e.ws, Fingerprint: synth.Fingerprint(e.ws, d),
				ProcessorVersion: ids.DefaultProcessorVersion, EntryContent: store.EntryContent{OccurredAt: d.OccurredAt,
					Kind: string(d.Kind), Title: d.Title, AIMetadata: []byte(`{}`), EvidenceIDs: d.EvidenceIDs}}}); err != nil {
				t.Fatal(err)
			}
			const old = "the summary before the window"
			if _, err := e.st.PutAISummary(ctx, e.ws, ids.DefaultProcessorVersion, old, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			if tt.refreshDue {
				if _, err := e.st.Pool().Exec(ctx, `UPDATE workspace_timeline_summaries SET refresh_due_at = now()
					WHERE workspace_id = $1`, string(e.ws)); err != nil {
					t.Fatal(err)
				}
			}
			o := e.options()
			o.Synthesizer = fixed{drafts: func(synth.Request) []synth.Draft { return []synth.Draft{d} }}
			sum := &countingSummarizer{next: o.Summarizer}
			o.Summarizer = sum
			r := e.start(o)
			e.produce(e.closedWindow(win, rows))
			eventually(t, "the summary decision", func() bool {
				return r.counter("larkline_synthesis_summary_attempts_total")+r.counter("larkline_synthesis_summary_skipped_total") > 0
			})
			st, err := e.st.GetWindow(ctx, e.key(win))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.st.VersionSummary(ctx, e.ws, ids.DefaultProcessorVersion)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != store.WindowCompleted || st.Meta.DraftsChanged {
				t.Fatalf("window %s, drafts changed %v: want completed with its draft unchanged", st.Status, st.Meta.DraftsChanged)
			}
			if tt.refreshDue {
				if sum.count() != 1 || !st.Meta.SummaryAttempted || got.Text == old || got.RefreshDueAt != nil {
					t.Fatalf("refresh due: %d summarizer calls, summary_attempted %v, summary replaced %v, refresh still due %v; want 1, set, replaced, not due",
						sum.count(), st.Meta.SummaryAttempted, got.Text != old, got.RefreshDueAt != nil)
				}
				return
			}
			if n := r.counter("larkline_synthesis_summary_skipped_total", "reason", skipNoChange); n != 1 || sum.count() != 0 ||
				st.Meta.SummaryAttempted || got.Text != old {
				t.Fatalf("no refresh due: %v no-change skips, %d summarizer calls, summary_attempted %v, summary kept %v; want 1, 0, unset, kept",
					n, sum.count(), st.Meta.SummaryAttempted, got.Text == old)
			}
		})
	}
}
