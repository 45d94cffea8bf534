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

// upsertPaths names both ways UpsertEvidence writes a batch: the arrays (small batches)
// and the COPY of new messages (batches of copyEvidenceMinRows or more).
var upsertPaths = []struct {
	name    string
	viaCopy bool
}{
	{"arrays", false},
	{"copy", true},
}

// TestUpsertEvidencePathsAgree runs the same sequence of batches through both paths,
// each in its own workspace, and checks every outcome and the stored rows.
func TestUpsertEvidencePathsAgree(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	for _, p := range upsertPaths {
		t.Run(p.name, func(t *testing.T) {
			ws := ids.WorkspaceID("ws-path-" + p.name)
			a := larkEvidence(ws, "oc_a", "om_a", t0, "a")
			b := larkEvidence(ws, "oc_a", "om_b", t0, "b")
			c := larkEvidence(ws, "oc_a", "om_c", t0, "c")
			d := larkEvidence(ws, "oc_a", "om_d", t0, "d")
			aEdit := edited(a, t0.Add(time.Minute), "a2")
			bGone := redacted(b, t0.Add(time.Minute))
			cOld := edited(c, t0.Add(-time.Minute), "c0")
			dNew := edited(d, t0.Add(time.Hour), "d2")
			steps := []struct {
				name  string
				batch []Evidence
				want  []EvidenceResult
			}{
				{"new rows, one repeated", []Evidence{a, b, c, a}, []EvidenceResult{EvidenceInserted, EvidenceInserted, EvidenceInserted, EvidenceUnchanged}},
				{"every outcome in one batch",
					[]Evidence{aEdit, bGone, cOld, d, c},
					[]EvidenceResult{EvidenceUpdated, EvidenceRedacted, EvidenceStale, EvidenceInserted, EvidenceUnchanged}},
				{"deleted stays deleted; repeats apply in input order",
					[]Evidence{bGone, edited(b, t0.Add(time.Hour), "b3"), d, dNew, redacted(dNew, t0.Add(2*time.Hour)), d},
					[]EvidenceResult{EvidenceUnchanged, EvidenceStale, EvidenceUnchanged, EvidenceUpdated, EvidenceRedacted, EvidenceStale}},
			}
			ids := map[string]int64{}
			for _, st := range steps {
				out, err := s.upsertEvidence(ctx, st.batch, p.viaCopy)
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if len(out) != len(st.batch) {
					t.Fatalf("%s: %d outcomes for %d rows", st.name, len(out), len(st.batch))
				}
				for i, w := range st.want {
					key := st.batch[i].SourceKey
					if out[i].Result != w {
						t.Errorf("%s: row %d (%s): %s, want %s", st.name, i, key, out[i].Result, w)
					}
					if out[i].ID == 0 {
						t.Errorf("%s: row %d (%s): no id", st.name, i, key)
					}
					if id, ok := ids[key]; ok && id != out[i].ID {
						t.Errorf("%s: row %d (%s): id %d, want the key's row %d", st.name, i, key, out[i].ID, id)
					}
					ids[key] = out[i].ID
				}
			}
			rows, err := s.EvidenceByKeys(ctx, ws, LarkMessageEvidence, []string{a.SourceKey, b.SourceKey, c.SourceKey, d.SourceKey})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range rows {
				got[r.SourceKey] = fmt.Sprintf("%q deleted=%v", r.Content, r.Deleted)
			}
			want := map[string]string{
				a.SourceKey: `"a2" deleted=false`,
				b.SourceKey: `"" deleted=true`,
				c.SourceKey: `"c" deleted=false`,
				d.SourceKey: `"" deleted=true`,
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("stored %v, want %v", got, want)
			}
		})
	}
}

// TestUpsertEvidenceCopyBatch goes through the public API with a batch large enough for
// the COPY path: outcomes in input order, ids in input order for new rows.
func TestUpsertEvidenceCopyBatch(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-copy-batch"
	n := copyEvidenceMinRows + 10
	first := make([]Evidence, n)
	for i := range first {
		first[i] = larkEvidence(ws, "oc_a", fmt.Sprintf("om_%04d", i), t0.Add(time.Duration(i)*time.Millisecond), "v1")
	}
	out := mustUpsert(t, s, first...)
	for i := range out {
		if out[i].Result != EvidenceInserted || (i > 0 && out[i].ID <= out[i-1].ID) {
			t.Fatalf("row %d: %+v after %+v; want inserted with increasing ids", i, out[i], out[max(i-1, 0)])
		}
	}
	// Again: rows 0 mod 4 unchanged, 1 mod 4 updated, 2 mod 4 redacted, 3 mod 4 stale.
	second := make([]Evidence, n)
	want := make([]EvidenceResult, n)
	for i, e := range first {
		switch i % 4 {
		case 0:
			second[i], want[i] = e, EvidenceUnchanged
		case 1:
			second[i], want[i] = edited(e, e.SourceUpdatedAt.Add(time.Second), "v2"), EvidenceUpdated
		case 2:
			second[i], want[i] = redacted(e, e.SourceUpdatedAt.Add(time.Second)), EvidenceRedacted
		case 3:
			second[i], want[i] = edited(e, e.SourceUpdatedAt.Add(-time.Second), "v0"), EvidenceStale
		}
	}
	again := mustUpsert(t, s, second...)
	for i := range again {
		if again[i].Result != want[i] || again[i].ID != out[i].ID {
			t.Errorf("row %d: %+v, want %s of row %d", i, again[i], want[i], out[i].ID)
		}
	}
}

// TestUpsertEvidenceCopyKeyCreatedConcurrently: a key the COPY path saw absent is
// created by another transaction before the call inserts it. The call must not fail:
// it runs again on the array path and reports the row it found.
func TestUpsertEvidenceCopyKeyCreatedConcurrently(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-race"
	batch := make([]Evidence, copyEvidenceMinRows)
	for i := range batch {
		batch[i] = larkEvidence(ws, "oc_a", fmt.Sprintf("om_%04d", i), t0, "x")
	}
	contested := batch[len(batch)-1]

	other, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	var otherID int64
	if err := other.QueryRow(ctx, `INSERT INTO workspace_timeline_evidence
		(workspace_id, source, source_type, source_key, occurred_at, source_updated_at, observed_at, content_hash)
		VALUES ($1, $2, $3, $4, $5, $5, $5, $6) RETURNING id`,
		string(ws), contested.Source, contested.SourceType, contested.SourceKey, t0, contested.ContentHash).Scan(&otherID); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out []UpsertOutcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := s.upsertEvidence(ctx, batch, true)
		done <- result{out, err}
	}()
	// The call's INSERT waits for the other transaction on the contested key.
	for {
		var waiting int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("upsert finished before the other transaction committed: %v", r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("upsert: %v", r.err)
	}
	for i, o := range r.out[:len(batch)-1] {
		if o.Result != EvidenceInserted {
			t.Errorf("row %d: %s, want inserted", i, o.Result)
		}
	}
	if last := r.out[len(batch)-1]; last.Result != EvidenceUnchanged || last.ID != otherID {
		t.Errorf("contested row: %+v, want unchanged of row %d", last, otherID)
	}
	if n := countRows(t, s, "workspace_timeline_evidence", "workspace_id = $1", string(ws)); n != len(batch) {
		t.Fatalf("%d rows, want %d", n, len(batch))
	}
}

// TestUpsertEvidenceCopyMixedBatch: one batch large enough for the COPY path mixes
// new keys with versions of stored ones. The new keys are COPYed, the stored ones go
// through the version rule: a newer version
// followed by an older one in the same batch keeps the newer, a recall of a stored
// message wins over the live text after it and withdraws the draft citing it (the
// trigger runs on this path too).
func TestUpsertEvidenceCopyMixedBatch(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-copy-mixed"
	a := larkEvidence(ws, "oc_a", "om_a", t0, "a1")
	r := larkEvidence(ws, "oc_a", "om_r", t0, "r1")
	stored := mustUpsert(t, s, a, r)
	d, err := s.UpsertDraftEntry(ctx, draft(ws, "fp-r", "AI about r", stored[1].ID))
	if err != nil {
		t.Fatal(err)
	}

	aNew := edited(a, t0.Add(2*time.Minute), "a3")
	aOld := edited(a, t0.Add(time.Minute), "a2")
	rGone := redacted(r, t0.Add(time.Minute))
	batch := []Evidence{aNew, rGone}
	want := []EvidenceResult{EvidenceUpdated, EvidenceRedacted}
	for i := range copyEvidenceMinRows {
		batch = append(batch, larkEvidence(ws, "oc_b", fmt.Sprintf("om_new_%04d", i), t0, "n"))
		want = append(want, EvidenceInserted)
	}
	batch = append(batch, aOld, r, larkEvidence(ws, "oc_b", "om_new_0000", t0, "n"))
	want = append(want, EvidenceStale, EvidenceStale, EvidenceUnchanged)

	out := mustUpsert(t, s, batch...)
	for i := range out {
		if out[i].Result != want[i] || out[i].ID == 0 {
			t.Errorf("row %d (%s): %+v, want %s", i, batch[i].SourceKey, out[i], want[i])
		}
	}
	if out[0].ID != stored[0].ID || out[1].ID != stored[1].ID {
		t.Errorf("stored keys got ids %d, %d; want %d, %d", out[0].ID, out[1].ID, stored[0].ID, stored[1].ID)
	}
	rows, err := s.EvidenceByKeys(ctx, ws, LarkMessageEvidence, []string{a.SourceKey, r.SourceKey})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range rows {
		got[e.SourceKey] = fmt.Sprintf("%q deleted=%v", e.Content, e.Deleted)
	}
	if got[a.SourceKey] != `"a3" deleted=false` || got[r.SourceKey] != `"" deleted=true` {
		t.Fatalf("stored %v, want a3 live and r redacted", got)
	}
	var status string
	if err := s.pool.QueryRow(ctx, `SELECT status FROM workspace_timeline_entries WHERE id = $1`, d.ID).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "hidden" {
		t.Fatalf("the draft citing the recalled message is %q, want hidden (withdrawn)", status)
	}
	if n := countRows(t, s, "workspace_timeline_evidence", "workspace_id = $1", string(ws)); n != copyEvidenceMinRows+2 {
		t.Fatalf("%d rows, want %d", n, copyEvidenceMinRows+2)
	}
}

// TestUpsertEvidenceCopyProbePlan: the COPY path's probe of stored keys reads
// message_idx, one index probe per row, on a table without statistics (a new
// database, a TRUNCATE, the first minutes of a deployment), where the planner
// otherwise reads a workspace's every row per probe through a prefix of time_idx or
// scans the table (D47).
func TestUpsertEvidenceCopyProbePlan(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-probe-plan"
	// Autovacuum must not give the table statistics while the test runs.
	if _, err := s.pool.Exec(ctx, `ALTER TABLE workspace_timeline_evidence SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	stored := make([]Evidence, 10000)
	for i := range stored {
		stored[i] = larkEvidence(ws, "oc_a", fmt.Sprintf("om_%05d", i), t0.Add(time.Duration(i)*time.Millisecond), "x")
	}
	mustUpsert(t, s, stored...)
	var analyzed bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stats WHERE tablename = 'workspace_timeline_evidence')`).Scan(&analyzed); err != nil || analyzed {
		t.Fatalf("the table has statistics (%v, %v): the test needs a table without", analyzed, err)
	}

	keys := make([][]string, 4)
	for i := range 500 {
		e := larkEvidence(ws, "oc_a", fmt.Sprintf("om_%05d", 2*i+1), t0, "x") // half stored, half new
		for c, v := range []string{string(e.WorkspaceID), e.Source, e.SourceType, e.SourceKey} {
			keys[c] = append(keys[c], v)
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	rows, err := tx.Query(ctx, "EXPLAIN "+probeEvidenceSQL, pgx.QueryExecModeCacheDescribe, keys[0], keys[1], keys[2], keys[3])
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "workspace_timeline_evidence_message_idx") || strings.Contains(plan, "Seq Scan") ||
		strings.Contains(plan, "time_idx") || strings.Contains(plan, "source_key_uq") {
		t.Fatalf("the probe does not read message_idx alone:\n%s", plan)
	}

	// The array statement finds the stored rows of the messages it is given the same
	// way (run, then rolled back: the branch for other kinds of evidence has no rows
	// and never runs).
	batch := make([]Evidence, 100)
	idx := make([]int, len(batch))
	for i := range batch {
		batch[i], idx[i] = larkEvidence(ws, "oc_a", fmt.Sprintf("om_%05d", 2*i+1), t0, "y"), i
	}
	rows, err = tx.Query(ctx, "EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) "+upsertEvidenceSQL,
		append([]any{pgx.QueryExecModeCacheDescribe}, evidenceArrays(batch, idx)...)...)
	if err != nil {
		t.Fatal(err)
	}
	if lines, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	plan = strings.Join(lines, "\n")
	for _, l := range lines {
		if (strings.Contains(l, "Seq Scan on workspace_timeline_evidence") || strings.Contains(l, "time_idx")) &&
			!strings.Contains(l, "never executed") {
			t.Fatalf("the array statement reads the table other than through message_idx (%s):\n%s", strings.TrimSpace(l), plan)
		}
	}
	if !strings.Contains(plan, "workspace_timeline_evidence_message_idx") {
		t.Fatalf("the array statement does not read message_idx:\n%s", plan)
	}
}

// TestUpsertEvidenceCopyOtherKinds: in a batch large enough for the COPY path,
// evidence that is not a Lark message (no chat, so not in message_idx) is written by
// the array statement, new or stored, next to the COPYed messages.
func TestUpsertEvidenceCopyOtherKinds(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-copy-kinds"
	note := func(key, text string) Evidence {
		e := larkEvidence(ws, "oc_a", "om_unused", t0, text)
		e.Source, e.SourceType, e.SourceKey, e.Metadata = "pagerduty", "incident_note", key, nil
		return e
	}
	stored := mustUpsert(t, s, note("note/1", "one"))
	batch := []Evidence{note("note/1", "one"), note("note/2", "two")}
	want := []EvidenceResult{EvidenceUnchanged, EvidenceInserted}
	for i := range copyEvidenceMinRows {
		batch = append(batch, larkEvidence(ws, "oc_a", fmt.Sprintf("om_%04d", i), t0, "m"))
		want = append(want, EvidenceInserted)
	}
	out := mustUpsert(t, s, batch...)
	for i := range out {
		if out[i].Result != want[i] || out[i].ID == 0 {
			t.Errorf("row %d (%s): %+v, want %s", i, batch[i].SourceKey, out[i], want[i])
		}
	}
	if out[0].ID != stored[0].ID {
		t.Errorf("the stored note got id %d, want %d", out[0].ID, stored[0].ID)
	}
	again := mustUpsert(t, s, batch...)
	for i := range again {
		if again[i].Result != EvidenceUnchanged || again[i].ID != out[i].ID {
			t.Errorf("again, row %d (%s): %+v, want unchanged of row %d", i, batch[i].SourceKey, again[i], out[i].ID)
		}
	}
}

// TestProbeEvidenceSplitsStoredFromNew: the COPY path's probe finds the stored
// messages by their whole key (the same message stored in another workspace is new
// here) and draws a distinct id for each new one.
func TestProbeEvidenceSplitsStoredFromNew(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	a := larkEvidence("ws-probe-a", "oc_a", "om_a", t0, "a")
	b := larkEvidence("ws-probe-a", "oc_a", "om_b", t0, "b")
	mustUpsert(t, s, a, b)
	aElsewhere := a
	aElsewhere.WorkspaceID = "ws-probe-b"
	c := larkEvidence("ws-probe-a", "oc_a", "om_c", t0, "c")
	rows := []Evidence{a, c, aElsewhere, b}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read and sequence only
	fresh, drawn, stored, err := probeEvidence(ctx, tx, rows, []int{0, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(fresh) != "[1 2]" || fmt.Sprint(stored) != "[0 3]" {
		t.Fatalf("fresh %v, stored %v; want [1 2] and [0 3]", fresh, stored)
	}
	if len(drawn) != 2 || drawn[0] <= 0 || drawn[0] == drawn[1] {
		t.Fatalf("drawn ids %v, want two distinct ids", drawn)
	}
	if f, d, st, err := probeEvidence(ctx, tx, rows, nil); err != nil || f != nil || d != nil || st != nil {
		t.Fatalf("probe of no rows = %v, %v, %v, %v; want nothing", f, d, st, err)
	}
}

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
