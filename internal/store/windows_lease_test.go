package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// TestLeaseWritesAreOneStatementWhileTheRowIsUnchanged: a write under a lease taken
// from the state the last write returned is one round trip (a heartbeat in between
// does not change that); when the row changed behind the lease's back, the locked
// path decides on what the row holds: the other change is kept, or (a takeover) the
// write is refused.
func TestLeaseWritesAreOneStatementWhileTheRowIsUnchanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, trips := newCountedStore(t)
	cost := func(f func() error) (int64, error) {
		before := trips.n.Load()
		err := f()
		return trips.n.Load() - before, err
	}

	tests := []struct {
		name string
		// between changes the row after the claim (nil: nothing does).
		between   func(t *testing.T, w WindowState)
		wantTrips int64 // of the advance; 0: not checked
		wantErr   error
		check     func(t *testing.T, w WindowState)
	}{
		{name: "unchanged row", wantTrips: 1},
		{name: "a heartbeat in between", wantTrips: 1, between: func(t *testing.T, w WindowState) {
			if err := s.HeartbeatWindow(ctx, w.Lease()); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the metadata changed behind the lease", between: func(t *testing.T, w WindowState) {
			if _, err := s.TransitionWindow(ctx, w.Key, []WindowStatus{WindowProcessing}, WindowProcessing,
				func(w *WindowState) { w.Meta.Error = "set by an operator" }); err != nil {
				t.Fatal(err)
			}
		}, check: func(t *testing.T, w WindowState) {
			if w.Meta.Error != "set by an operator" || w.Meta.ChunkCount != 1 {
				t.Fatalf("after the advance: error %q, %d chunks; want the operator's error kept and 1 chunk", w.Meta.Error, w.Meta.ChunkCount)
			}
		}},
		{name: "taken over", wantErr: ErrConflict, between: func(t *testing.T, w WindowState) {
			backdate(t, s, w.ID, claimOpts.StaleAfter+time.Minute)
			if _, out, err := s.ClaimWindow(ctx, w.Key, claimOpts); err != nil || out != ClaimTakenOver {
				t.Fatalf("takeover: %s %v", out, err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := ids.WorkspaceID("ws-lease-" + string(rune('a'+i)))
			ev := withWindowEvidence(t, s, ws)
			w, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts)
			if err != nil {
				t.Fatal(err)
			}
			if tt.between != nil {
				tt.between(t, w)
			}
			var next WindowState
			n, err := cost(func() (err error) {
				next, err = s.AdvanceWindowCursor(ctx, w.Lease(), ChunkProgress{Cursor: Cursor{OccurredAt: t0.Add(time.Minute), ID: ev[0].ID}, Evidence: 1})
				return err
			})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("advance = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantTrips != 0 && n != tt.wantTrips {
				t.Errorf("the advance took %d round trips, want %d", n, tt.wantTrips)
			}
			if tt.check != nil {
				tt.check(t, next)
			}
			// The state the advance returned is the finish's expectation: one statement.
			n, err = cost(func() error {
				_, err := s.FinishWindow(ctx, next.Lease(), WindowCompleted, nil)
				return err
			})
			if err != nil || n != 1 {
				t.Fatalf("the finish after it: %d round trips, %v; want 1", n, err)
			}
			if got, err := s.GetWindow(context.Background(), w.Key); err != nil || got.Status != WindowCompleted || got.Meta.ChunkCount != 1 {
				t.Fatalf("window %s with %d chunks (%v), want completed with 1", got.Status, got.Meta.ChunkCount, err)
			}
		})
	}
}
