package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// roundTrips counts what a connection sends: one per statement outside a batch,
// one per batch (its statements go in one pipelined exchange).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// newCountedStore is a store on a fresh, migrated database whose one connection
// counts its round trips.
func newCountedStore(t *testing.T) (*Store, *roundTrips) {
	t.Helper()
	pc, err := pgxpool.ParseConfig(testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	pc.ConnConfig.Tracer = trips
	pc.MaxConns = 1 // one connection: no pool pings on a second one counted
	pool, err := pgxpool.NewWithConfig(t.Context(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	s, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	return s, trips
}

// TestUpsertDraftEntriesRoundTripsDoNotGrowWithDrafts: a synthesis chunk's new drafts
// are written in a fixed number of round trips, whatever their number (issue 35): the
// version checks with the own-entry lookups, the inserts and the bindings each go as
// one pipelined batch.
func TestUpsertDraftEntriesRoundTripsDoNotGrowWithDrafts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, trips := newCountedStore(t)
	const ws ids.WorkspaceID = "ws-trips"
	var rows []Evidence
	for i := range 8 {
		rows = append(rows, larkEvidence(ws, "oc_a", fmt.Sprintf("om_%d", i), t0, fmt.Sprintf("text %d", i)))
	}
	ev := evidenceIDs(mustUpsert(t, s, rows...))

	cost := func(fp string, n int) int64 {
		t.Helper()
		ds := make([]EntryDraft, n)
		for i := range ds {
			ds[i] = draft(ws, fmt.Sprintf("%s-%d", fp, i), "Draft", ev[i], ev[(i+1)%len(ev)])
		}
		before := trips.n.Load()
		res, err := s.UpsertDraftEntries(ctx, ds)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Outcome != EntryCreated {
				t.Fatalf("draft %d: %s, want %s", i, r.Outcome, EntryCreated)
			}
		}
		return trips.n.Load() - before
	}
	two, eight := cost("two", 2), cost("eight", 8)
	if eight != two {
		t.Errorf("8 new drafts took %d round trips and 2 took %d: want as many", eight, two)
	}
	if two > 5 { // begin, the version check with the lookups, two batches, commit
		t.Errorf("2 new drafts took %d round trips, want at most 5", two)
	}
}
