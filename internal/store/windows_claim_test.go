package store

import (
	"context"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// TestClaimOfANewWindowWaitsForARetirement: the one-statement claim of a new window
// locks its version's registry row as the claim's transaction does, so a claim that
// meets a retirement in progress waits for it and then finds the version retired
// (done, no row), instead of bringing back a row the retirement deletes (D26).
func TestClaimOfANewWindowWaitsForARetirement(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-claim-retire"
	mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "m"))
	register(t, s, "v2")
	key := WindowKey{Workspace: ws, Chat: "oc_a", ProcessorVersion: "v2", Start: t0.Truncate(5 * time.Minute)}
	opts := ClaimOptions{WindowLength: 5 * time.Minute, MaxAttempts: 3, StaleAfter: time.Minute}

	// A retirement in progress: the version's row locked FOR UPDATE, not yet retired.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var retirer int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM processor_versions WHERE name = 'v2' FOR UPDATE`).Scan(&retirer); err != nil {
		t.Fatal(err)
	}
	type claim struct {
		w   WindowState
		out ClaimOutcome
		err error
	}
	done := make(chan claim, 1)
	go func() {
		w, out, err := s.ClaimWindow(ctx, key, opts)
		done <- claim{w, out, err}
	}()
	var early *claim
	testenv.Eventually(t, time.Minute, "the claim to wait for the retirement's lock", func() bool {
		select {
		case c := <-done:
			early = &c
			return true
		default:
		}
		var waiting bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE $1 = ANY (pg_blocking_pids(pid)))`, retirer).Scan(&waiting)
		return err == nil && waiting
	})
	if early != nil {
		t.Fatalf("the claim did not wait for the retirement: %s %v", early.out, early.err)
	}
	if _, err := tx.Exec(ctx, `UPDATE processor_versions SET state = 'retired', retired_at = now() WHERE name = 'v2'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-done
	if c.err != nil || c.out != ClaimDone {
		t.Fatalf("claim after the retirement: %s %v, want done", c.out, c.err)
	}
	var rows int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM workspace_timeline_sync_states WHERE workspace_id = $1`,
		string(ws)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("%d window rows of the retired version, want none", rows)
	}
}
