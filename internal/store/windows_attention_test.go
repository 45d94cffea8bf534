package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// TestHeartbeatWindowKeepsTheClaimAlive: a holder that beats is never taken over,
// however long its attempt runs; once it stops beating and goes stale another worker
// takes the window over and the old holder's beat is refused.
func TestHeartbeatWindowKeepsTheClaimAlive(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-heartbeat"
	withWindowEvidence(t, s, ws)
	key := windowKey(ws)

	if err := s.HeartbeatWindow(ctx, WindowLease{Key: key, Attempt: 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("heartbeat of a window with no row: %v, want ErrNotFound", err)
	}
	w1, _, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil {
		t.Fatal(err)
	}
	backdate(t, s, w1.ID, claimOpts.StaleAfter+time.Minute)
	if err := s.HeartbeatWindow(ctx, w1.Lease()); err != nil {
		t.Fatalf("heartbeat of the holder: %v", err)
	}
	if _, out, err := s.ClaimWindow(ctx, key, claimOpts); err != nil || out != ClaimBusy {
		t.Fatalf("claim after the holder's heartbeat: %s %v, want busy", out, err)
	}
	got, err := s.GetWindow(ctx, key)
	if err != nil || got.Attempts != 1 || got.Status != WindowProcessing || got.Cursor != nil {
		t.Fatalf("a heartbeat changed the window: %+v %v", got, err)
	}

	backdate(t, s, w1.ID, claimOpts.StaleAfter+time.Minute) // the holder died
	w2, out, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil || out != ClaimTakenOver || w2.Attempts != 2 {
		t.Fatalf("takeover of a stale window: %s %+v %v", out, w2, err)
	}
	if err := s.HeartbeatWindow(ctx, w1.Lease()); !errors.Is(err, ErrConflict) {
		t.Fatalf("heartbeat of a taken-over lease: %v, want ErrConflict", err)
	}
	if err := s.HeartbeatWindow(ctx, w2.Lease()); err != nil {
		t.Fatalf("heartbeat of the new holder: %v", err)
	}
	if _, err := s.FinishWindow(ctx, w2.Lease(), WindowCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.HeartbeatWindow(ctx, w2.Lease()); !errors.Is(err, ErrConflict) {
		t.Fatalf("heartbeat of a finished window: %v, want ErrConflict", err)
	}
}

// TestMarkWindowNeedsAttention: a window whose evidence never came ends in a terminal
// state with its diagnostics, with or without a row before, and spends no attempt; a
// terminal window is kept as it is and a window another worker holds is refused.
func TestMarkWindowNeedsAttention(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const diag = "sink committed past offset 42 of partition 3, but the window holds no evidence"

	cases := []struct {
		name     string
		setup    func(t *testing.T, ws ids.WorkspaceID) // leaves the window in some state
		wantErr  error
		changed  bool
		status   WindowStatus
		attempts int
	}{
		{name: "no row", setup: func(*testing.T, ids.WorkspaceID) {}, changed: true, status: WindowNeedsAttention},
		{name: "failed", setup: func(t *testing.T, ws ids.WorkspaceID) {
			withWindowEvidence(t, s, ws)
			w, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts)
			if err == nil {
				_, err = s.FinishWindow(ctx, w.Lease(), WindowFailed, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
		}, changed: true, status: WindowNeedsAttention, attempts: 1},
		{name: "processing, fresh", setup: func(t *testing.T, ws ids.WorkspaceID) {
			withWindowEvidence(t, s, ws)
			if _, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts); err != nil {
				t.Fatal(err)
			}
		}, wantErr: ErrConflict},
		{name: "processing, stale", setup: func(t *testing.T, ws ids.WorkspaceID) {
			withWindowEvidence(t, s, ws)
			w, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts)
			if err != nil {
				t.Fatal(err)
			}
			backdate(t, s, w.ID, claimOpts.StaleAfter+time.Minute)
		}, changed: true, status: WindowNeedsAttention, attempts: 1},
		{name: "completed", setup: func(t *testing.T, ws ids.WorkspaceID) {
			withWindowEvidence(t, s, ws)
			w, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts)
			if err == nil {
				_, err = s.FinishWindow(ctx, w.Lease(), WindowCompleted, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
		}, status: WindowCompleted, attempts: 1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := ids.WorkspaceID("ws-attention-" + string(rune('a'+i)))
			c.setup(t, ws)
			key := windowKey(ws)
			w, changed, err := s.MarkWindowNeedsAttention(ctx, key, claimOpts, diag)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("MarkWindowNeedsAttention = %v, want %v", err, c.wantErr)
				}
				if got, _ := s.GetWindow(ctx, key); got.Status != WindowProcessing {
					t.Fatalf("a refused mark changed the window to %s", got.Status)
				}
				return
			}
			if err != nil || changed != c.changed || w.Status != c.status || w.Attempts != c.attempts {
				t.Fatalf("MarkWindowNeedsAttention = %s attempts %d changed %v %v; want %s attempts %d changed %v",
					w.Status, w.Attempts, changed, err, c.status, c.attempts, c.changed)
			}
			if c.status == WindowNeedsAttention && (w.Meta.Error != diag || !w.Meta.WindowEnd.Equal(t0.Add(windowLen))) {
				t.Fatalf("needs_attention window meta: %+v", w.Meta)
			}
			// terminal: a later claim and a repeated mark leave it alone
			if _, out, err := s.ClaimWindow(ctx, key, claimOpts); err != nil || out != ClaimDone {
				t.Fatalf("claim of a terminal window: %s %v, want done", out, err)
			}
			if again, changed, err := s.MarkWindowNeedsAttention(ctx, key, claimOpts, "other"); err != nil || changed || again.Meta.Error != w.Meta.Error {
				t.Fatalf("repeated mark: changed %v %v, diagnostics %q", changed, err, again.Meta.Error)
			}
			if n := syncStateRows(t, s, ws); n != 1 {
				t.Fatalf("%d window rows, want 1", n)
			}
		})
	}
}
