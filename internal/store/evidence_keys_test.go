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
// led the planner to a prefix of time_idx that read every row of the workspace per
// call; and what is read and deleted is the asked workspace's rows only.
func TestEvidenceByKeysPlan(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws, other ids.WorkspaceID = "ws-keys-plan", "ws-keys-other"
	// Autovacuum must not give the table statistics while the test runs.
	if _, err := s.pool.Exec(ctx, `ALTER TABLE workspace_timeline_evidence SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	stored := make([]Evidence, 0, 10001)
	for i := range 10000 {
		stored = append(stored, larkEvidence(ws, "oc_a", fmt.Sprintf("om_%05d", i), t0.Add(time.Duration(i)*time.Millisecond), "x"))
	}
	stored = append(stored, larkEvidence(other, "oc_a", "om_00003", t0, "x")) // one message in two workspaces
	mustUpsert(t, s, stored...)
	var analyzed bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stats WHERE tablename = 'workspace_timeline_evidence')`).Scan(&analyzed); err != nil || analyzed {
		t.Fatalf("the table has statistics (%v, %v): the test needs a table without", analyzed, err)
	}

	keys := []string{stored[3].SourceKey, stored[1].SourceKey, ids.MessageSourceKey("oc_a", "om_absent")}
	args := []any{pgx.QueryExecModeCacheDescribe, string(ws), LarkMessageEvidence.Source, LarkMessageEvidence.SourceType, keys}
	for name, sql := range map[string]string{
		"EvidenceByKeys": evidenceByKeysSQL(LarkMessageEvidence),
		"DeleteEvidence": `DELETE FROM workspace_timeline_evidence WHERE ` + byKeysSQL(LarkMessageEvidence),
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
	if len(got) != 2 || got[0].SourceKey != stored[1].SourceKey || got[1].SourceKey != stored[3].SourceKey ||
		got[0].WorkspaceID != ws || got[1].WorkspaceID != ws {
		t.Fatalf("EvidenceByKeys = %v, want the workspace's om_00001 and om_00003 in time order", got)
	}
	if n, err := s.DeleteEvidence(ctx, ws, LarkMessageEvidence, keys); err != nil || n != 2 {
		t.Fatalf("DeleteEvidence = %d, %v; want 2", n, err)
	}
	if left, err := s.EvidenceByKeys(ctx, other, LarkMessageEvidence, keys); err != nil || len(left) != 1 {
		t.Fatalf("the other workspace's copy of om_00003: %v, %v; want it kept", left, err)
	}
}
