package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

func TestProgress(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-progress"
	withWindowEvidence(t, s, ws) // two messages in window t0 of oc_a
	mustUpsert(t, s,
		larkEvidence(ws, "oc_a", "om_later", t0.Add(25*time.Minute), "later"), // another window
		larkEvidence(ws, "oc_b", "om_b", t0.Add(time.Minute), "other chat"),   // same start, other chat
		larkEvidence("ws-other", "oc_a", "om_x", t0.Add(time.Minute), "x"))    // not asked for
	if _, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts); err != nil {
		t.Fatal(err)
	}
	p, err := s.Progress(ctx, []ids.WorkspaceID{ws}, windowLen, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Progress{Evidence: 4, Windows: 3}); p != want {
		t.Fatalf("Progress = %+v, want %+v (a window in processing is none of completed, ignored, failed)", p, want)
	}
	// another processor version's namespace holds no state for these windows
	if p2, err := s.Progress(ctx, []ids.WorkspaceID{ws}, windowLen, "v2", 3); err != nil || p2 != p {
		t.Fatalf("v2 Progress = %+v, %v", p2, err)
	}
	// the window of oc_b ends needing attention: counted as such
	if _, _, err := s.MarkWindowNeedsAttention(ctx, WindowKey{Workspace: ws, Chat: "oc_b", Start: t0}, claimOpts, "x"); err != nil {
		t.Fatal(err)
	}
	if p, err = s.Progress(ctx, []ids.WorkspaceID{ws}, windowLen, "", 3); err != nil || p != (Progress{Evidence: 4, Windows: 3, NeedsAttention: 1}) {
		t.Fatalf("Progress with a window needing attention = %+v, %v", p, err)
	}
	if _, err := s.Progress(ctx, []ids.WorkspaceID{ws}, 0, "", 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero window: %v, want ErrInvalid", err)
	}
	if _, err := s.Progress(ctx, []ids.WorkspaceID{"bad id with spaces"}, windowLen, "", 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad workspace: %v, want ErrInvalid", err)
	}
}
