package synthesis

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// stepKey labels a store call's context with the worker's step (the Store method).
type stepKey struct{}

// tripCounter is a pgx tracer that counts the round trips a connection makes, by the
// step its context is labelled with: one per statement outside a batch, one per batch
// (its statements go in one pipelined exchange).
type tripCounter struct {
	mu sync.Mutex
	by map[string]int
}

func (c *tripCounter) add(ctx context.Context) {
	step, _ := ctx.Value(stepKey{}).(string)
	if step == "" {
		step = "unlabelled"
	}
	c.mu.Lock()
	c.by[step]++
	c.mu.Unlock()
}

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.add(ctx)
	return ctx
}
func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.add(ctx)
	return ctx
}
func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (c *tripCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.by)
}

// steppedStore labels the context of every call with the method's name.
type steppedStore struct{ Store }

func stepped(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, stepKey{}, name)
}

func (s steppedStore) GetWindow(ctx context.Context, k store.WindowKey) (store.WindowState, error) {
	return s.Store.GetWindow(stepped(ctx, "GetWindow"), k)
}
func (s steppedStore) ClaimWindow(ctx context.Context, k store.WindowKey, o store.ClaimOptions) (store.WindowState, store.ClaimOutcome, error) {
	return s.Store.ClaimWindow(stepped(ctx, "ClaimWindow"), k, o)
}
func (s steppedStore) AdvanceWindowCursor(ctx context.Context, l store.WindowLease, p store.ChunkProgress) (store.WindowState, error) {
	return s.Store.AdvanceWindowCursor(stepped(ctx, "AdvanceWindowCursor"), l, p)
}
func (s steppedStore) FinishWindow(ctx context.Context, l store.WindowLease, to store.WindowStatus, m func(*store.WindowState)) (store.WindowState, error) {
	return s.Store.FinishWindow(stepped(ctx, "FinishWindow"), l, to, m)
}
func (s steppedStore) FinishWindowAfterChunk(ctx context.Context, l store.WindowLease, p store.ChunkProgress, to store.WindowStatus, m func(*store.WindowState)) (store.WindowState, error) {
	return s.Store.FinishWindowAfterChunk(stepped(ctx, "FinishWindowAfterChunk"), l, p, to, m)
}
func (s steppedStore) RefundWindowAttempt(ctx context.Context, l store.WindowLease, m func(*store.WindowState)) (store.WindowState, error) {
	return s.Store.RefundWindowAttempt(stepped(ctx, "RefundWindowAttempt"), l, m)
}
func (s steppedStore) HeartbeatWindow(ctx context.Context, l store.WindowLease) error {
	return s.Store.HeartbeatWindow(stepped(ctx, "HeartbeatWindow"), l)
}
func (s steppedStore) MarkWindowNeedsAttention(ctx context.Context, k store.WindowKey, o store.ClaimOptions, d string) (store.WindowState, bool, error) {
	return s.Store.MarkWindowNeedsAttention(stepped(ctx, "MarkWindowNeedsAttention"), k, o, d)
}
func (s steppedStore) StaleProcessing(ctx context.Context, stale time.Duration, limit int) ([]store.WindowState, error) {
	return s.Store.StaleProcessing(stepped(ctx, "StaleProcessing"), stale, limit)
}
func (s steppedStore) EvidenceInRange(ctx context.Context, q store.RangeQuery) (store.EvidencePage, error) {
	return s.Store.EvidenceInRange(stepped(ctx, "EvidenceInRange"), q)
}
func (s steppedStore) EvidenceByKeys(ctx context.Context, ws ids.WorkspaceID, k store.EvidenceKind, keys []string) ([]store.Evidence, error) {
	return s.Store.EvidenceByKeys(stepped(ctx, "EvidenceByKeys"), ws, k, keys)
}
func (s steppedStore) UpsertDraftEntries(ctx context.Context, ds []store.EntryDraft) ([]store.EntryResult, error) {
	return s.Store.UpsertDraftEntries(stepped(ctx, "UpsertDraftEntries"), ds)
}
func (s steppedStore) ListEntries(ctx context.Context, ws ids.WorkspaceID, q store.EntryQuery) (store.EntryPage, error) {
	return s.Store.ListEntries(stepped(ctx, "ListEntries"), ws, q)
}
func (s steppedStore) VersionVisibleEntries(ctx context.Context, ws ids.WorkspaceID, v string) ([]store.Entry, error) {
	return s.Store.VersionVisibleEntries(stepped(ctx, "VersionVisibleEntries"), ws, v)
}
func (s steppedStore) VersionSummaryInput(ctx context.Context, ws ids.WorkspaceID, v string, entries bool) (store.SummaryInput, error) {
	return s.Store.VersionSummaryInput(stepped(ctx, "VersionSummaryInput"), ws, v, entries)
}
func (s steppedStore) PutAISummary(ctx context.Context, ws ids.WorkspaceID, v, text string, meta json.RawMessage) (bool, error) {
	return s.Store.PutAISummary(stepped(ctx, "PutAISummary"), ws, v, text, meta)
}

// perWindowTrips sums the round trips of the steps a window's processing is made of; the stale sweep
// (StaleProcessing) and the heartbeat run on their own clocks and are not counted.
func perWindowTrips(by map[string]int) int {
	n := 0
	for s, c := range by {
		if s != "StaleProcessing" && s != "HeartbeatWindow" {
			n += c
		}
	}
	return n
}

func formatTrips(by map[string]int) string {
	var b strings.Builder
	for _, s := range slices.Sorted(maps.Keys(by)) {
		fmt.Fprintf(&b, " %s=%d", s, by[s])
	}
	return strings.TrimSpace(b.String())
}

// TestWindowRoundTrips counts the Postgres round trips the worker makes for one
// window of the incident chat (rule synthesizer and summarizer: drafts, a completed
// window, a summary written), in one chunk and in two, with a pgx tracer on the
// worker's pool (issue 35: synthesis is the pipeline's slowest stage, and what is
// left of its time is round trips). It fails when the count grows past the bound:
// one chunk 13 (the claim 1, the first reads 3 of them concurrent, the drafts 5, the
// summary's input 1, the last chunk with the finish 1, the summary 1, and the
// duplicate check before the claim 1), two chunks 21.
func TestWindowRoundTrips(t *testing.T) {
	tests := []struct {
		name  string
		limit int // EvidenceBatchLimit
		// chunks is how many chunks the window takes; max the round trips allowed.
		chunks, max int
	}{
		// Before issue 35's changes: 29 and 41 (docs/perf.md).
		{name: "one chunk", limit: 40, chunks: 1, max: 13},
		{name: "two chunks", limit: 3, chunks: 2, max: 21},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rows := e.seed(win, incidentLines...)

			// The worker's store: the same database through a pool that counts.
			pc, err := pgxpool.ParseConfig(e.st.Pool().Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			trips := &tripCounter{by: map[string]int{}}
			pc.ConnConfig.Tracer = trips
			pool, err := pgxpool.NewWithConfig(t.Context(), pc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			traced, err := store.New(pool)
			if err != nil {
				t.Fatal(err)
			}

			o := e.options()
			o.Store = steppedStore{traced}
			o.EvidenceBatchLimit = tt.limit
			r := e.start(o)
			e.produce(e.closedWindow(win, rows))
			st := e.waitState(win, "the window to finish", terminal)
			eventually(t, "the summary attempt", func() bool {
				return r.counter("larkline_synthesis_summary_attempts_total")+
					r.counter("larkline_synthesis_summary_skipped_total") > 0
			})
			if st.Status != store.WindowCompleted || st.Meta.ChunkCount != tt.chunks {
				t.Fatalf("window %s in %d chunks, want completed in %d", st.Status, st.Meta.ChunkCount, tt.chunks)
			}
			if got := r.counter("larkline_synthesis_summary_attempts_total", "outcome", summaryWritten); got != 1 {
				t.Fatalf("%v summaries written, want 1 (the count covers the summary's calls)", got)
			}
			by := trips.counts()
			n := perWindowTrips(by)
			t.Logf("%s: %d round trips per window: %s", tt.name, n, formatTrips(by))
			if n > tt.max {
				t.Errorf("%s: %d round trips per window, want at most %d: %s", tt.name, n, tt.max, formatTrips(by))
			}
		})
	}
}
