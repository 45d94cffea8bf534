package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// TestFinishWindowAfterChunk: the last chunk's cursor advance and the finish are one
// transaction: both are recorded, or (lost lease, cursor behind, a status a last
// chunk cannot end in) neither is.
func TestFinishWindowAfterChunk(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	tests := []struct {
		name string
		// before runs between the claim and the call, with the two evidence cursors.
		before func(t *testing.T, w WindowState, c1, c2 Cursor) WindowLease
		to     WindowStatus
		last   func(c1, c2 Cursor) Cursor
		// wantErr is nil when the window ends in to after two chunks.
		wantErr error
	}{
		{name: "first chunk is the last", to: WindowCompleted, last: func(_, c2 Cursor) Cursor { return c2 }},
		{name: "after an earlier chunk", to: WindowIgnored, last: func(_, c2 Cursor) Cursor { return c2 },
			before: func(t *testing.T, w WindowState, c1, _ Cursor) WindowLease {
				if _, err := s.AdvanceWindowCursor(ctx, w.Lease(), ChunkProgress{Cursor: c1, Evidence: 1, Drafts: 1}); err != nil {
					t.Fatal(err)
				}
				return w.Lease()
			}},
		{name: "a repeated last chunk counts once", to: WindowCompleted, last: func(_, c2 Cursor) Cursor { return c2 },
			before: func(t *testing.T, w WindowState, c1, c2 Cursor) WindowLease {
				for _, c := range []Cursor{c1, c2} {
					if _, err := s.AdvanceWindowCursor(ctx, w.Lease(), ChunkProgress{Cursor: c, Evidence: 1, Drafts: 1}); err != nil {
						t.Fatal(err)
					}
				}
				return w.Lease()
			}},
		{name: "cursor behind", to: WindowCompleted, last: func(c1, _ Cursor) Cursor { return c1 }, wantErr: ErrConflict,
			before: func(t *testing.T, w WindowState, _, c2 Cursor) WindowLease {
				if _, err := s.AdvanceWindowCursor(ctx, w.Lease(), ChunkProgress{Cursor: c2, Evidence: 2}); err != nil {
					t.Fatal(err)
				}
				return w.Lease()
			}},
		{name: "lost lease", to: WindowCompleted, last: func(_, c2 Cursor) Cursor { return c2 }, wantErr: ErrConflict,
			before: func(t *testing.T, w WindowState, _, _ Cursor) WindowLease {
				backdate(t, s, w.ID, claimOpts.StaleAfter+time.Minute)
				if _, out, err := s.ClaimWindow(ctx, w.Key, claimOpts); err != nil || out != ClaimTakenOver {
					t.Fatalf("takeover: %s %v", out, err)
				}
				return w.Lease() // the old one
			}},
		{name: "failed is not an end after a chunk", to: WindowFailed, last: func(_, c2 Cursor) Cursor { return c2 }, wantErr: ErrInvalid},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := ids.WorkspaceID(fmt.Sprintf("ws-finish-%d", i))
			ev := withWindowEvidence(t, s, ws)
			c1 := Cursor{OccurredAt: t0.Add(time.Minute), ID: ev[0].ID}
			c2 := Cursor{OccurredAt: t0.Add(2 * time.Minute), ID: ev[1].ID}
			w, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts)
			if err != nil {
				t.Fatal(err)
			}
			lease := w.Lease()
			if tt.before != nil {
				lease = tt.before(t, w, c1, c2)
			}
			was, err := s.GetWindow(ctx, w.Key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.FinishWindowAfterChunk(ctx, lease, ChunkProgress{Cursor: tt.last(c1, c2), Evidence: 1, Drafts: 1, Changed: true},
				tt.to, func(w *WindowState) { w.AggregateHash, w.Meta.Error = "agg", "" })
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("FinishWindowAfterChunk = %v, want %v", err, tt.wantErr)
				}
				now, err := s.GetWindow(ctx, w.Key)
				if err != nil {
					t.Fatal(err)
				}
				if now.Status != was.Status || now.Attempts != was.Attempts || now.Meta.ChunkCount != was.Meta.ChunkCount ||
					now.AggregateHash != was.AggregateHash || !now.UpdatedAt.Equal(was.UpdatedAt) {
					t.Fatalf("a refused call changed the window: %+v, was %+v", now, was)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantChunks, wantChanged := was.Meta.ChunkCount+1, true
			if was.Cursor != nil && *was.Cursor == c2 {
				// the last chunk was recorded already: not again
				wantChunks, wantChanged = was.Meta.ChunkCount, was.Meta.DraftsChanged
			}
			if got.Status != tt.to || got.Cursor == nil || *got.Cursor != c2 || got.Meta.ChunkCount != wantChunks ||
				got.AggregateHash != "agg" || got.Attempts != 1 || got.LastProcessedAt.IsZero() || got.Meta.DraftsChanged != wantChanged {
				t.Fatalf("after the last chunk: %s at attempt %d, cursor %v, %d chunks (want %d), hash %q, changed %v",
					got.Status, got.Attempts, got.Cursor, got.Meta.ChunkCount, wantChunks, got.AggregateHash, got.Meta.DraftsChanged)
			}
			if _, err := s.FinishWindowAfterChunk(ctx, lease, ChunkProgress{Cursor: c2}, tt.to, nil); !errors.Is(err, ErrConflict) {
				t.Fatalf("finishing twice: %v, want ErrConflict", err)
			}
		})
	}
}
