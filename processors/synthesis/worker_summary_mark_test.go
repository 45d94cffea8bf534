package synthesis

import (
	"context"
	"testing"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// markChecker is a summarizer that reads the window's state when it is called: the
// window's one summary attempt must be durable (summary_attempted set on the completed
// window) before any summarizer runs (design §13, decisions D43).
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
