package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

const windowLen = 10 * time.Minute

var claimOpts = ClaimOptions{WindowLength: windowLen, MaxAttempts: 3, StaleAfter: 15 * time.Minute, PromptVersion: "p1"}

func windowKey(ws ids.WorkspaceID) WindowKey {
	return WindowKey{Workspace: ws, Chat: "oc_a", Start: t0}
}

// withWindowEvidence stores one message inside the window of windowKey(ws).
func withWindowEvidence(t *testing.T, s *Store, ws ids.WorkspaceID) []UpsertOutcome {
	t.Helper()
	return mustUpsert(t, s,
		larkEvidence(ws, "oc_a", "om_1", t0.Add(time.Minute), "one"),
		larkEvidence(ws, "oc_a", "om_2", t0.Add(2*time.Minute), "two"))
}

// backdate makes a window look unwritten for d (instead of waiting).
func backdate(t *testing.T, s *Store, id int64, d time.Duration) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(),
		`UPDATE workspace_timeline_sync_states SET updated_at = updated_at - $2::bigint * interval '1 microsecond' WHERE id = $1`,
		id, d.Microseconds()); err != nil {
		t.Fatal(err)
	}
}

func syncStateRows(t *testing.T, s *Store, ws ids.WorkspaceID) int {
	return countRows(t, s, "workspace_timeline_sync_states", "workspace_id = $1", string(ws))
}

func TestClaimWindowWithoutEvidenceCreatesNoRow(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-empty"
	// Evidence just outside the window, in another chat and in another workspace.
	mustUpsert(t, s,
		larkEvidence(ws, "oc_a", "om_before", t0.Add(-time.Microsecond), "x"),
		larkEvidence(ws, "oc_a", "om_after", t0.Add(windowLen), "x"),
		larkEvidence(ws, "oc_b", "om_other", t0.Add(time.Minute), "x"),
		larkEvidence("ws-else", "oc_a", "om_else", t0.Add(time.Minute), "x"))
	if _, _, err := s.ClaimWindow(ctx, windowKey(ws), claimOpts); !errors.Is(err, ErrEmptyWindow) {
		t.Fatalf("ClaimWindow on an empty window = %v, want ErrEmptyWindow", err)
	}
	if _, _, err := s.CreateWindowIfAbsent(ctx, windowKey(ws), claimOpts); !errors.Is(err, ErrEmptyWindow) {
		t.Fatalf("CreateWindowIfAbsent on an empty window = %v, want ErrEmptyWindow", err)
	}
	if n := syncStateRows(t, s, ws); n != 0 {
		t.Fatalf("%d sync-state rows for an empty window, want 0", n)
	}
	if _, err := s.GetWindow(ctx, windowKey(ws)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetWindow = %v, want ErrNotFound", err)
	}
}

func TestClaimWindowRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-race"
	withWindowEvidence(t, s, ws)
	const racers = 8
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		outcomes [racers]ClaimOutcome
		errs     [racers]error
	)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, outcomes[i], errs[i] = s.ClaimWindow(context.Background(), windowKey(ws), claimOpts)
		}()
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range racers {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		switch {
		case outcomes[i] == ClaimCreated:
			winners++
		case outcomes[i] != ClaimBusy:
			t.Fatalf("racer %d: %s, want created or busy", i, outcomes[i])
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners, want exactly 1 (%v)", winners, outcomes)
	}
	if n := syncStateRows(t, s, ws); n != 1 {
		t.Fatalf("%d window rows, want 1", n)
	}
}

func TestWindowLifecycle(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-life"
	ev := withWindowEvidence(t, s, ws)
	key := windowKey(ws)

	w, out, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil || out != ClaimCreated || w.Status != WindowProcessing || w.Attempts != 1 {
		t.Fatalf("first claim: %s %+v %v", out, w, err)
	}
	if !w.Meta.WindowStart.Equal(t0) || !w.Meta.WindowEnd.Equal(t0.Add(windowLen)) || w.Meta.PromptVersion != "p1" || w.Key.SourceKey() != "chat/oc_a/window/2026-03-01T10:00:00Z" {
		t.Fatalf("window meta/key: %+v %s", w.Meta, w.Key.SourceKey())
	}
	if _, out, _ := s.ClaimWindow(ctx, key, claimOpts); out != ClaimBusy {
		t.Fatalf("second claim: %s, want busy", out)
	}
	lease := w.Lease()

	c1 := Cursor{OccurredAt: t0.Add(time.Minute), ID: ev[0].ID}
	c2 := Cursor{OccurredAt: t0.Add(2 * time.Minute), ID: ev[1].ID}
	if w, err = s.AdvanceWindowCursor(ctx, lease, ChunkProgress{Cursor: c1, Evidence: 1}); err != nil {
		t.Fatal(err)
	}
	if w.Cursor == nil || *w.Cursor != c1 || w.Meta.ChunkCount != 1 || w.Meta.EvidenceCount != 1 || w.LastProcessedAt.IsZero() {
		t.Fatalf("after chunk 1: %+v", w)
	}
	// Repeating the same commit is a no-op; moving backwards is a conflict.
	if w, err = s.AdvanceWindowCursor(ctx, lease, ChunkProgress{Cursor: c1, Evidence: 1}); err != nil || w.Meta.ChunkCount != 1 {
		t.Fatalf("repeated chunk: %+v %v", w.Meta, err)
	}
	if _, err := s.AdvanceWindowCursor(ctx, lease, ChunkProgress{Cursor: Cursor{OccurredAt: t0, ID: 1}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("backwards cursor: %v, want ErrConflict", err)
	}
	if _, err := s.AdvanceWindowCursor(ctx, lease, ChunkProgress{Cursor: Cursor{OccurredAt: t0.Add(windowLen), ID: 1}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cursor outside the window: %v, want ErrInvalid", err)
	}
	if w, err = s.AdvanceWindowCursor(ctx, lease, ChunkProgress{Cursor: c2, Evidence: 1}); err != nil || w.Meta.ChunkCount != 2 || w.Meta.EvidenceCount != 2 {
		t.Fatalf("chunk 2: %+v %v", w.Meta, err)
	}
	w, err = s.FinishWindow(ctx, lease, WindowCompleted, func(w *WindowState) {
		w.AggregateHash = "agg"
		w.Meta.SummaryAttempted = true // the worker spends the summary attempt in the finish (D44)
		w.Attempts = 99                // ignored: the lease's attempt stays
		w.Key.Chat = "oc_evil"
	})
	if err != nil || w.Status != WindowCompleted || w.AggregateHash != "agg" || w.Attempts != 1 || w.Key.Chat != "oc_a" {
		t.Fatalf("finish: %+v %v", w, err)
	}
	if _, err := s.FinishWindow(ctx, lease, WindowCompleted, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("finishing twice: %v, want ErrConflict", err)
	}
	if _, out, _ := s.ClaimWindow(ctx, key, claimOpts); out != ClaimDone {
		t.Fatalf("claim of a completed window: %s, want done", out)
	}
	got, err := s.GetWindow(ctx, key)
	if err != nil || !got.Meta.SummaryAttempted || got.Status != WindowCompleted {
		t.Fatalf("GetWindow: %+v %v", got, err)
	}
	// Status and attempts are mirrored into metadata_json with the design's fields.
	var status string
	var attempts int
	if err := s.pool.QueryRow(ctx, `SELECT metadata_json->>'status', (metadata_json->>'attempts')::int FROM workspace_timeline_sync_states WHERE id = $1`, got.ID).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "completed" || attempts != 1 {
		t.Fatalf("metadata_json status %q attempts %d", status, attempts)
	}
}

func TestClaimWindowRetriesFailedUpToMaxAttempts(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-retry"
	ev := withWindowEvidence(t, s, ws)
	key := windowKey(ws)
	want := []ClaimOutcome{ClaimCreated, ClaimRetried, ClaimRetried}
	for i, wantOut := range want {
		w, out, err := s.ClaimWindow(ctx, key, claimOpts)
		if err != nil || out != wantOut || w.Attempts != i+1 {
			t.Fatalf("claim %d: %s attempts %d %v; want %s attempts %d", i+1, out, w.Attempts, err, wantOut, i+1)
		}
		// A retried window resumes after the chunk its earlier attempt committed.
		c := Cursor{OccurredAt: t0.Add(time.Minute), ID: ev[0].ID}
		if i == 0 && (w.Cursor != nil || w.Meta.ChunkCount != 0) {
			t.Fatalf("claim 1: a new window has progress: %+v", w)
		}
		if i > 0 && (w.Cursor == nil || *w.Cursor != c || w.Meta.ChunkCount != 1 || w.Meta.EvidenceCount != 1 ||
			w.Meta.DraftCount != 2 || !w.Meta.DraftsChanged || w.Meta.CurrentChunkStart == nil) {
			t.Fatalf("claim %d: a retried window does not resume at its next chunk: %+v", i+1, w)
		}
		if _, err := s.AdvanceWindowCursor(ctx, w.Lease(), ChunkProgress{Cursor: c, Evidence: 1, Drafts: 2, Changed: true}); err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("é", MaxDiagnosticBytes) // 2 KiB: must be cut
		if w, err = s.FinishWindow(ctx, w.Lease(), WindowFailed, func(w *WindowState) { w.Meta.Error = long }); err != nil {
			t.Fatal(err)
		}
		if len(w.Meta.Error) > MaxDiagnosticBytes || w.Status != WindowFailed {
			t.Fatalf("failed window: %d bytes of diagnostics, status %s", len(w.Meta.Error), w.Status)
		}
	}
	w, out, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil || out != ClaimExhausted || w.Status != WindowFailed || w.Attempts != 3 {
		t.Fatalf("claim after %d failures: %s %+v %v; want exhausted", len(want), out, w, err)
	}
	// An operator may allow one more attempt explicitly; under another prompt version
	// the window restarts as a whole (chunks of two prompts do not mix).
	more := claimOpts
	more.MaxAttempts, more.PromptVersion = 4, "p2"
	w, out, err = s.ClaimWindow(ctx, key, more)
	if err != nil || out != ClaimRetried {
		t.Fatalf("claim with a raised bound: %s %v", out, err)
	}
	if w.Cursor != nil || w.Meta.ChunkCount != 0 || w.Meta.EvidenceCount != 0 || w.Meta.DraftCount != 0 ||
		w.Meta.DraftsChanged || w.Meta.CurrentChunkStart != nil || w.Meta.PromptVersion != "p2" {
		t.Fatalf("a window claimed under a new prompt version kept its progress: %+v", w)
	}
}

func TestClaimWindowTakesOverStaleProcessing(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-stale"
	ev := withWindowEvidence(t, s, ws)
	key := windowKey(ws)
	w1, _, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil {
		t.Fatal(err)
	}
	if stale, err := s.StaleProcessing(ctx, claimOpts.StaleAfter, 10); err != nil || len(stale) != 0 {
		t.Fatalf("fresh window listed as stale: %v %v", stale, err)
	}
	backdate(t, s, w1.ID, claimOpts.StaleAfter+time.Minute)
	stale, err := s.StaleProcessing(ctx, claimOpts.StaleAfter, 10)
	if err != nil || len(stale) != 1 || stale[0].ID != w1.ID || stale[0].Key != w1.Key {
		t.Fatalf("StaleProcessing = %+v, %v; want the window", stale, err)
	}

	w2, out, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil || out != ClaimTakenOver || w2.Attempts != 2 || w2.Meta.Error == "" {
		t.Fatalf("takeover: %s %+v %v", out, w2, err)
	}
	// The first worker wakes up: its lease is gone.
	c := Cursor{OccurredAt: t0.Add(time.Minute), ID: ev[0].ID}
	if _, err := s.AdvanceWindowCursor(ctx, w1.Lease(), ChunkProgress{Cursor: c, Evidence: 1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("old lease advancing: %v, want ErrConflict", err)
	}
	if _, err := s.FinishWindow(ctx, w1.Lease(), WindowCompleted, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("old lease finishing: %v, want ErrConflict", err)
	}
	if _, err := s.FinishWindow(ctx, w2.Lease(), WindowIgnored, nil); err != nil {
		t.Fatalf("new lease finishing: %v", err)
	}
}

func TestClaimWindowStaleAtLastAttemptFails(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-stale-last"
	withWindowEvidence(t, s, ws)
	opts := claimOpts
	opts.MaxAttempts = 1
	w, _, err := s.ClaimWindow(ctx, windowKey(ws), opts)
	if err != nil {
		t.Fatal(err)
	}
	backdate(t, s, w.ID, opts.StaleAfter+time.Minute)
	w, out, err := s.ClaimWindow(ctx, windowKey(ws), opts)
	if err != nil || out != ClaimExhausted || w.Status != WindowFailed || w.Attempts != 1 {
		t.Fatalf("stale at the last attempt: %s %+v %v; want exhausted and failed", out, w, err)
	}
	if stale, _ := s.StaleProcessing(ctx, opts.StaleAfter, 10); len(stale) != 0 {
		t.Fatalf("a failed window is still listed as stale processing")
	}
}

func TestTransitionWindowCompareAndSet(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-cas"
	withWindowEvidence(t, s, ws)
	key := windowKey(ws)
	if _, err := s.TransitionWindow(ctx, key, []WindowStatus{WindowProcessing}, WindowFailed, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("transition of a missing window: %v, want ErrNotFound", err)
	}
	w, created, err := s.CreateWindowIfAbsent(ctx, key, claimOpts)
	if err != nil || !created {
		t.Fatalf("CreateWindowIfAbsent: %v %v", created, err)
	}
	if again, created, err := s.CreateWindowIfAbsent(ctx, key, claimOpts); err != nil || created || again.ID != w.ID {
		t.Fatalf("second CreateWindowIfAbsent: %v %v", created, err)
	}
	cases := []struct {
		name string
		from []WindowStatus
		to   WindowStatus
		err  error
	}{
		{"from a status it is not in", []WindowStatus{WindowFailed, WindowCompleted}, WindowIgnored, ErrConflict},
		{"processing to failed", []WindowStatus{WindowProcessing}, WindowFailed, nil},
		{"again from processing", []WindowStatus{WindowProcessing}, WindowFailed, ErrConflict},
		{"operator replay resets attempts", []WindowStatus{WindowFailed}, WindowFailed, nil},
		{"invalid target", []WindowStatus{WindowFailed}, "paused", ErrInvalid},
	}
	for _, c := range cases {
		got, err := s.TransitionWindow(ctx, key, c.from, c.to, func(w *WindowState) { w.Attempts = 0 })
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Fatalf("%s: %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got.Status != c.to || got.Attempts != 0 {
			t.Fatalf("%s: %+v %v", c.name, got, err)
		}
	}
	if _, out, err := s.ClaimWindow(ctx, key, claimOpts); err != nil || out != ClaimRetried {
		t.Fatalf("claim after reset: %s %v", out, err)
	}
}

func TestWindowVersionedNamespacesAreSeparate(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-versions-ns"
	withWindowEvidence(t, s, ws)
	v1, v2 := windowKey(ws), windowKey(ws)
	v2.ProcessorVersion = "v2"
	w1, o1, err1 := s.ClaimWindow(ctx, v1, claimOpts)
	w2, o2, err2 := s.ClaimWindow(ctx, v2, claimOpts)
	if err1 != nil || err2 != nil || o1 != ClaimCreated || o2 != ClaimCreated || w1.ID == w2.ID {
		t.Fatalf("claims: %s %v, %s %v", o1, err1, o2, err2)
	}
	if w2.Key.SourceKey() != "chat/oc_a/processor/v2/window/2026-03-01T10:00:00Z" || w2.Key.ProcessorVersion != "v2" || w1.Key.ProcessorVersion != ids.DefaultProcessorVersion {
		t.Fatalf("keys %q %q", w1.Key.SourceKey(), w2.Key.SourceKey())
	}
	// "" and the default version are the same namespace.
	v1explicit := v1
	v1explicit.ProcessorVersion = ids.DefaultProcessorVersion
	if got, err := s.GetWindow(ctx, v1explicit); err != nil || got.ID != w1.ID {
		t.Fatalf("default namespace lookup: %v", err)
	}
}

func TestClaimOptionsValidated(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	misaligned := windowKey("ws-opts")
	misaligned.Start = t0.Add(time.Minute)
	badVersion := windowKey("ws-opts")
	badVersion.ProcessorVersion = "v/2"
	cases := []struct {
		name string
		key  WindowKey
		opts ClaimOptions
	}{
		{"zero length", windowKey("ws-opts"), ClaimOptions{MaxAttempts: 1, StaleAfter: time.Minute}},
		{"misaligned start", misaligned, claimOpts},
		{"no attempts", windowKey("ws-opts"), ClaimOptions{WindowLength: windowLen, StaleAfter: time.Minute}},
		{"no stale timeout", windowKey("ws-opts"), ClaimOptions{WindowLength: windowLen, MaxAttempts: 1}},
		{"bad processor version", badVersion, claimOpts},
		{"bad chat", WindowKey{Workspace: "ws-opts", Chat: "x", Start: t0}, claimOpts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := s.ClaimWindow(ctx, c.key, c.opts); !errors.Is(err, ErrInvalid) {
				t.Fatalf("ClaimWindow = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestRefundWindowAttempt: a refunded attempt ends failed but is not counted, so a
// window whose attempts keep failing for reasons not its own is never exhausted, while
// counted failures still are; the refund is a compare-and-set on the lease.
func TestRefundWindowAttempt(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-refund"
	ev := withWindowEvidence(t, s, ws)
	key := windowKey(ws)

	// Many more refunded attempts than MaxAttempts: every claim still hands it out.
	const refunds = 5
	for i := range refunds {
		w, out, err := s.ClaimWindow(ctx, key, claimOpts)
		wantOut := ClaimRetried
		if i == 0 {
			wantOut = ClaimCreated
		}
		if err != nil || out != wantOut || w.Attempts != 1 || (i > 0) != (w.Cursor != nil) || w.Meta.ChunkCount != min(i, 1) {
			t.Fatalf("claim %d: %s %+v %v; want %s at attempt 1, resumed after the committed chunk", i+1, out, w, err, wantOut)
		}
		if _, err := s.AdvanceWindowCursor(ctx, w.Lease(), ChunkProgress{Cursor: Cursor{OccurredAt: t0.Add(time.Minute), ID: ev[0].ID}, Evidence: 1}); err != nil {
			t.Fatal(err)
		}
		got, err := s.RefundWindowAttempt(ctx, w.Lease(), func(w *WindowState) {
			w.Meta.Error = "model_unavailable: endpoint down"
			w.Attempts = 42 // ignored
			w.Key.Chat = "oc_evil"
		})
		if err != nil || got.Status != WindowFailed || got.Attempts != 0 || got.Meta.RefundedAttempts != i+1 ||
			got.Meta.Error != "model_unavailable: endpoint down" || got.Key.Chat != "oc_a" {
			t.Fatalf("refund %d: %+v %v", i+1, got, err)
		}
		// The lease is spent: neither a second refund nor any other write goes through.
		if _, err := s.RefundWindowAttempt(ctx, w.Lease(), nil); !errors.Is(err, ErrConflict) {
			t.Fatalf("refunding twice: %v, want ErrConflict", err)
		}
		if _, err := s.FinishWindow(ctx, w.Lease(), WindowCompleted, nil); !errors.Is(err, ErrConflict) {
			t.Fatalf("finishing a refunded lease: %v, want ErrConflict", err)
		}
	}
	// Counted failures are still bounded.
	for i := range claimOpts.MaxAttempts {
		w, out, err := s.ClaimWindow(ctx, key, claimOpts)
		if err != nil || out != ClaimRetried || w.Attempts != i+1 {
			t.Fatalf("counted claim %d: %s %+v %v", i+1, out, w, err)
		}
		if _, err := s.FinishWindow(ctx, w.Lease(), WindowFailed, nil); err != nil {
			t.Fatal(err)
		}
	}
	w, out, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil || out != ClaimExhausted || w.Attempts != claimOpts.MaxAttempts || w.Meta.RefundedAttempts != refunds {
		t.Fatalf("after %d counted failures: %s %+v %v; want exhausted", claimOpts.MaxAttempts, out, w, err)
	}
	var status string
	var attempts int
	if err := s.pool.QueryRow(ctx, `SELECT metadata_json->>'status', (metadata_json->>'attempts')::int FROM workspace_timeline_sync_states WHERE id = $1`, w.ID).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "failed" || attempts != claimOpts.MaxAttempts {
		t.Fatalf("metadata_json status %q attempts %d", status, attempts)
	}
}

// TestRefundWindowAttemptFencing: only the current lease refunds, a lease that was
// taken over never matches again even after refunds bring the attempt number back,
// and of two racing refunds of one lease exactly one wins.
func TestRefundWindowAttemptFencing(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-refund-fence"
	withWindowEvidence(t, s, ws)
	key := windowKey(ws)

	old, _, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil {
		t.Fatal(err)
	}
	backdate(t, s, old.ID, claimOpts.StaleAfter+time.Minute)
	cur, out, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil || out != ClaimTakenOver || cur.Attempts != 2 {
		t.Fatalf("takeover: %s %+v %v", out, cur, err)
	}
	if _, err := s.RefundWindowAttempt(ctx, old.Lease(), nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("refund by the taken-over lease: %v, want ErrConflict", err)
	}
	for range 3 {
		got, err := s.RefundWindowAttempt(ctx, cur.Lease(), nil)
		if err != nil || got.Status != WindowFailed || got.Attempts != 1 {
			t.Fatalf("refund of the takeover attempt: %+v %v; want failed at attempt 1 (the dead attempt stays counted)", got, err)
		}
		if _, err := s.FinishWindow(ctx, old.Lease(), WindowCompleted, nil); !errors.Is(err, ErrConflict) {
			t.Fatalf("taken-over lease finishing a refunded window: %v, want ErrConflict", err)
		}
		if cur, out, err = s.ClaimWindow(ctx, key, claimOpts); err != nil || out != ClaimRetried || cur.Attempts != 2 {
			t.Fatalf("claim after the refund: %s %+v %v", out, cur, err)
		}
		if _, err := s.AdvanceWindowCursor(ctx, old.Lease(), ChunkProgress{Cursor: Cursor{OccurredAt: t0.Add(time.Minute), ID: 1}}); !errors.Is(err, ErrConflict) {
			t.Fatalf("taken-over lease advancing after a refund: %v, want ErrConflict", err)
		}
	}

	const racers = 6
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  [racers]error
	)
	for i := range racers {
		wg.Go(func() {
			<-start
			_, errs[i] = s.RefundWindowAttempt(ctx, cur.Lease(), nil)
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrConflict):
			t.Fatalf("racing refund: %v", err)
		}
	}
	got, err := s.GetWindow(ctx, key)
	if won != 1 || err != nil || got.Attempts != 1 || got.Status != WindowFailed {
		t.Fatalf("%d racing refunds won, window %+v %v; want exactly one, failed at attempt 1", won, got, err)
	}

	// Terminal and missing windows refuse.
	w, _, err := s.ClaimWindow(ctx, key, claimOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishWindow(ctx, w.Lease(), WindowIgnored, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RefundWindowAttempt(ctx, w.Lease(), nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("refund of an ignored window: %v, want ErrConflict", err)
	}
	missing := WindowLease{Key: WindowKey{Workspace: ws, Chat: "oc_none", Start: t0}, Attempt: 1}
	if _, err := s.RefundWindowAttempt(ctx, missing, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refund of a missing window: %v, want ErrNotFound", err)
	}
	if _, err := s.RefundWindowAttempt(ctx, WindowLease{Key: WindowKey{Workspace: ws, Start: t0}, Attempt: 1}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("refund with an invalid key: %v, want ErrInvalid", err)
	}
}
