package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/schemas/ids"
)

// TestEvidenceByKeysPlan: on a table without statistics, reading and deleting Lark
// messages by key probes message_idx alone, once per key, where the four key columns
// led the planner to a prefix of time_idx, and source_key = ANY to a sequential
// scan, each reading every row of the workspace per call; and what is read and
// deleted is the asked workspace's rows only, each once.
func TestEvidenceByKeysPlan(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws, other ids.WorkspaceID = "ws-keys-plan", "ws-keys-other"
	// Autovacuum must not give the table statistics while the test runs.
	if _, err := s.pool.Exec(ctx, `ALTER TABLE workspace_timeline_evidence SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	// 4,000 rows of a chat line's size: here source_key = ANY(…) on message_idx lost
	// to a sequential scan, and the four key columns to a prefix of time_idx.
	line := strings.Repeat("checkout p99 latency is above 2s since 14:02, paging the on-call; ", 4)
	stored := make([]Evidence, 0, 4001)
	for i := range 4000 {
		stored = append(stored, larkEvidence(ws, "oc_a", fmt.Sprintf("om_%05d", i), t0.Add(time.Duration(i)*time.Millisecond), line))
	}
	stored = append(stored, larkEvidence(other, "oc_a", "om_00003", t0, "x")) // one message in two workspaces
	mustUpsert(t, s, stored...)
	var analyzed bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stats WHERE tablename = 'workspace_timeline_evidence')`).Scan(&analyzed); err != nil || analyzed {
		t.Fatalf("the table has statistics (%v, %v): the test needs a table without", analyzed, err)
	}

	// A window's worth of keys (40), one repeated, one without a row.
	keys := []string{ids.MessageSourceKey("oc_a", "om_absent"), stored[3].SourceKey}
	for i := range 40 {
		keys = append(keys, stored[1000+40*i].SourceKey)
	}
	keys = append(keys, stored[1].SourceKey, stored[3].SourceKey)
	args := []any{pgx.QueryExecModeCacheDescribe, string(ws), LarkMessageEvidence.Source, LarkMessageEvidence.SourceType, keys}
	for name, sql := range map[string]string{
		"EvidenceByKeys": evidenceByKeysSQL(LarkMessageEvidence),
		"DeleteEvidence": deleteEvidenceSQL(LarkMessageEvidence),
	} {
		rows, err := s.pool.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, "workspace_timeline_evidence_message_idx") || strings.Contains(plan, "Seq Scan") ||
			strings.Contains(plan, "time_idx") || strings.Contains(plan, "source_key_uq") {
			t.Errorf("%s does not read message_idx alone:\n%s", name, plan)
		}
	}

	got, err := s.EvidenceByKeys(ctx, ws, LarkMessageEvidence, keys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{stored[1].SourceKey, stored[3].SourceKey}
	for i := range 40 {
		want = append(want, stored[1000+40*i].SourceKey)
	}
	if len(got) != len(want) {
		t.Fatalf("EvidenceByKeys: %d rows, want %d (each stored key once)", len(got), len(want))
	}
	for i, e := range got {
		if e.SourceKey != want[i] || e.WorkspaceID != ws {
			t.Fatalf("EvidenceByKeys row %d = %s of %s, want %s of %s (time order, the asked workspace)", i, e.SourceKey, e.WorkspaceID, want[i], ws)
		}
	}
	if n, err := s.DeleteEvidence(ctx, ws, LarkMessageEvidence, keys); err != nil || n != int64(len(want)) {
		t.Fatalf("DeleteEvidence = %d, %v; want %d", n, err, len(want))
	}
	if left, err := s.EvidenceByKeys(ctx, other, LarkMessageEvidence, keys); err != nil || len(left) != 1 {
		t.Fatalf("the other workspace's copy of om_00003: %v, %v; want it kept", left, err)
	}
}
