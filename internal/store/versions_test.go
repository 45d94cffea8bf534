package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

func versionDraft(ws ids.WorkspaceID, version, fp, title string, evidence ...int64) EntryDraft {
	d := draft(ws, fp, title, evidence...)
	d.ProcessorVersion = version
	return d
}

func register(t *testing.T, s *Store, name string) {
	t.Helper()
	if _, err := s.RegisterVersion(context.Background(), VersionSpec{Name: name, Window: 5 * time.Minute,
		Grace: time.Minute, CodeVersion: "test", Groups: []string{"g-" + name}, Topics: []string{"g-" + name + "-table"}}); err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
}

// userView is what the API shows of a workspace: its visible entries and summary,
// encoded as the bytes a comparison can hold.
func userView(t *testing.T, s *Store, ws ids.WorkspaceID) string {
	t.Helper()
	ctx := context.Background()
	entries, err := s.ListVisibleEntries(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.GetSummary(ctx, ws)
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	b, err := json.Marshal(struct {
		E []Entry
		S Summary
	}{entries, sum})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMigrationMovesRowsIntoDefaultVersion applies 0001–0006, writes rows of every
// kind, then 0007: untouched AI rows belong to the default version, which serves;
// human-made and human-edited ones to the workspace; nothing users see changes.
func TestMigrationMovesRowsIntoDefaultVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newTestPool(t)
	old := fstest.MapFS{}
	entries, err := fs.ReadDir(embeddedMigrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	later := 0 // 0007 and the migrations after it
	for _, e := range entries {
		if e.Name() < "0007" {
			b, _ := fs.ReadFile(embeddedMigrations, "migrations/"+e.Name())
			old["migrations/"+e.Name()] = &fstest.MapFile{Data: b}
		} else {
			later++
		}
	}
	if _, err := migrateFS(ctx, pool, old, "migrations"); err != nil {
		t.Fatal(err)
	}
	s, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	const ws ids.WorkspaceID = "ws-migrate"
	ev := mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "m"))[0].ID
	// The pre-0007 statements, as the old store wrote them.
	mustExec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for i, row := range []struct{ source, status, edited string }{
		{"ai", "draft", "NULL"}, {"ai", "draft", "now()"}, {"human", "confirmed", "NULL"}, {"ai", "hidden", "NULL"},
	} {
		mustExec(fmt.Sprintf(`INSERT INTO workspace_timeline_entries (workspace_id, occurred_at, kind, title, source, status, fingerprint, human_edited_at)
			VALUES ($1, $2, 'mitigation', $3, $4, $5, $6, %s)`, row.edited), string(ws), t0, fmt.Sprintf("t%d", i), row.source, row.status, fmt.Sprintf("fp-%d", i))
	}
	mustExec(`INSERT INTO workspace_timeline_summaries (workspace_id, source, text) VALUES ($1, 'ai', 'ai text'), ('ws-human', 'human', 'human text')`, string(ws))
	mustExec(`INSERT INTO workspace_timeline_sync_states (workspace_id, source, source_type, source_key, status)
		VALUES ($1, 'lark', $2, 'chat/oc_a/processor/v7/window/2026-01-01T00:00:00Z', 'completed')`, string(ws), ids.SourceTypeLarkWindow)
	_ = ev
	var before []string // the old store's visible entries: every one not hidden
	rows, err := pool.Query(ctx, `SELECT title FROM workspace_timeline_entries WHERE status <> 'hidden' ORDER BY occurred_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var title string
		if err := rows.Scan(&title); err != nil {
			t.Fatal(err)
		}
		before = append(before, title)
	}
	if n, err := Migrate(ctx, pool); err != nil || n != later {
		t.Fatalf("migrate 0007 on: %d %v, want %d", n, err, later)
	}
	visible, err := s.ListVisibleEntries(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	var after []string
	for _, e := range visible {
		after = append(after, e.Title)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("users' entries changed by the migration: before %v, after %v", before, after)
	}
	if sum, err := s.GetSummary(ctx, ws); err != nil || sum.Text != "ai text" || sum.ProcessorVersion != "v1" {
		t.Errorf("AI summary after the migration %+v %v", sum, err)
	}
	got := map[string]string{}
	rows, err = pool.Query(ctx, `SELECT title, processor_version FROM workspace_timeline_entries`)
	if err != nil {
		t.Fatal(err)
	}
	var title, version string
	for rows.Next() {
		if err := rows.Scan(&title, &version); err != nil {
			t.Fatal(err)
		}
		got[title] = version
	}
	want := map[string]string{"t0": "v1", "t1": "", "t2": "", "t3": "v1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entry versions %v, want %v", got, want)
	}
	vs, err := s.ListVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, v := range vs {
		states = append(states, v.Name+"="+string(v.State))
	}
	if strings.Join(states, ",") != "v1=serving,v7=candidate" {
		t.Errorf("registry %v, want v1 serving and the replayed v7 a candidate", states)
	}
	if sum, err := s.GetSummary(ctx, "ws-human"); err != nil || sum.Text != "human text" || sum.ProcessorVersion != "" {
		t.Errorf("human summary %+v %v", sum, err)
	}
}

// TestCandidateLeavesUsersViewUnchanged: a candidate's drafts (same fingerprints with
// new text, new fingerprints), its summary and even its drafts' recall never change a
// byte of what the serving version shows.
func TestCandidateLeavesUsersViewUnchanged(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-isolation"
	var ev []int64
	for i := range 4 {
		ev = append(ev, mustUpsert(t, s, larkEvidence(ws, "oc_a", fmt.Sprintf("om_%d", i), t0, "m"))[0].ID)
	}
	for _, d := range []EntryDraft{
		versionDraft(ws, "", "fp-1", "Rolled back", ev[0]),
		versionDraft(ws, "v1", "fp-2", "Paged oncall", ev[1]),
	} {
		if _, err := s.UpsertDraftEntry(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	human, err := s.CreateHumanEntry(ctx, HumanEntry{Workspace: ws, OccurredAt: t0, Kind: "note", Title: "Human note", Fingerprint: "fp-3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutAISummaryIfNotHuman(ctx, ws, "v1 summary", nil); err != nil {
		t.Fatal(err)
	}
	before := userView(t, s, ws)
	register(t, s, "v2")
	for _, d := range []EntryDraft{
		versionDraft(ws, "v2", "fp-1", "Rolled back to v41", ev[0], ev[2]), // v1 has it: v2 gets its own
		versionDraft(ws, "v2", "fp-3", "Human note, rewritten", ev[3]),     // the workspace's: left alone
		versionDraft(ws, "v2", "fp-9", "Only v2 saw this", ev[2]),
	} {
		res, err := s.UpsertDraftEntry(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if d.Fingerprint == "fp-3" && (res.ID != human.ID || !res.HumanOwned || res.Outcome != EntryUnchanged) {
			t.Errorf("candidate draft on the workspace's fingerprint: %+v, want the human entry untouched", res)
		}
	}
	if w, err := s.PutAISummary(ctx, ws, "v2", "v2 summary", nil); err != nil || !w {
		t.Fatalf("v2 summary: %v %v", w, err)
	}
	if after := userView(t, s, ws); after != before {
		t.Errorf("a candidate changed what users see:\nbefore %s\nafter  %s", before, after)
	}
	v2, err := s.VersionVisibleEntries(ctx, ws, "v2")
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, e := range v2 {
		titles = append(titles, e.Title)
	}
	if got := strings.Join(titles, "|"); got != "Human note|Rolled back to v41|Only v2 saw this" {
		t.Errorf("v2's view %q", got)
	}
	if sum, err := s.VersionSummary(ctx, ws, "v2"); err != nil || sum.Text != "v2 summary" {
		t.Errorf("v2 summary %+v %v", sum, err)
	}
}

// TestPromoteIsAtomicAndKeepsHumanEntries: readers racing promotions back and forth
// always see exactly one version's drafts, never a mix and never none; human entries
// and human edits stay visible whichever version serves.
func TestPromoteIsAtomicAndKeepsHumanEntries(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-promote"
	ev := mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "m"))[0].ID
	register(t, s, "v2")
	for _, v := range []string{"v1", "v2"} {
		for i := range 3 {
			if _, err := s.UpsertDraftEntry(ctx, versionDraft(ws, v, fmt.Sprintf("fp-%d", i), v+" draft", ev)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PutAISummary(ctx, ws, v, v+" summary", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateHumanEntry(ctx, HumanEntry{Workspace: ws, OccurredAt: t0, Kind: "note", Title: "human"}); err != nil {
		t.Fatal(err)
	}
	// A human edits v1's fp-0 while v1 serves: the edit is the workspace's from then on.
	v1, err := s.ListVisibleEntries(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	title := "edited by a human"
	if _, err := s.HumanEditEntry(ctx, ws, v1[0].ID, EntryPatch{Title: &title}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.PromoteVersion(ctx, "v2", true); err != nil || p != (Promotion{From: "v1", To: "v2", Changed: true}) {
		t.Fatalf("dry run: %+v %v", p, err)
	}
	if got, _ := s.ServingVersion(ctx); got != "v1" {
		t.Fatalf("a dry run promoted: serving %s", got)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				entries, err := s.ListVisibleEntries(ctx, ws)
				if err != nil {
					errs <- err
					return
				}
				var got []string
				for _, e := range entries {
					got = append(got, e.Title)
				}
				// A human entry, the edit, two drafts of one version, in id order.
				if s := strings.Join(got, "|"); s != "edited by a human|v1 draft|v1 draft|human" && s != "edited by a human|v2 draft|v2 draft|human" {
					errs <- fmt.Errorf("a reader saw %q", s)
					return
				}
			}
		})
	}
	for i := range 40 {
		if _, err := s.PromoteVersion(ctx, []string{"v2", "v1"}[i%2], false); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if p, err := s.PromoteVersion(ctx, "v2", false); err != nil || !p.Changed {
		t.Fatalf("promote v2: %+v %v", p, err)
	}
	if p, err := s.PromoteVersion(ctx, "v2", false); err != nil || p.Changed {
		t.Fatalf("second promote of v2 is not a no-op: %+v %v", p, err)
	}
	if sum, err := s.GetSummary(ctx, ws); err != nil || sum.Text != "v2 summary" {
		t.Errorf("summary after promote %+v %v", sum, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE processor_versions SET state = 'serving' WHERE name = 'v1'`); err == nil {
		t.Error("the schema let two versions serve")
	}
}

// TestRetireIsIdempotent: the serving version is refused; a candidate's rows go, the
// second retire finds nothing, a retired version never writes, serves or restarts.
func TestRetireIsIdempotent(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-retire"
	ev := mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "m"))[0].ID
	register(t, s, "v2")
	key := WindowKey{Workspace: ws, Chat: "oc_a", ProcessorVersion: "v2", Start: t0.Truncate(5 * time.Minute)}
	if _, _, err := s.CreateWindowIfAbsent(ctx, key, ClaimOptions{WindowLength: 5 * time.Minute, MaxAttempts: 3, StaleAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertDraftEntry(ctx, versionDraft(ws, "v2", "fp-1", "v2 draft", ev)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutAISummary(ctx, ws, "v2", "v2 summary", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertDraftEntry(ctx, versionDraft(ws, "v1", "fp-1", "v1 draft", ev)); err != nil {
		t.Fatal(err)
	}
	before := userView(t, s, ws)
	if _, err := s.RetireVersion(ctx, "v1", false); !errors.Is(err, ErrVersionServing) {
		t.Fatalf("retire the serving version: %v, want ErrVersionServing", err)
	}
	if r, err := s.RetireVersion(ctx, "v2", true); err != nil || r != (Retirement{Entries: 1, Summaries: 1, Windows: 1}) {
		t.Fatalf("dry run: %+v %v", r, err)
	}
	for i, want := range []Retirement{{Entries: 1, Summaries: 1, Windows: 1}, {AlreadyRetired: true}} {
		if r, err := s.RetireVersion(ctx, "v2", false); err != nil || r != want {
			t.Fatalf("retire #%d: %+v %v, want %+v", i+1, r, err, want)
		}
	}
	if after := userView(t, s, ws); after != before {
		t.Errorf("retiring a candidate changed what users see")
	}
	if res, err := s.UpsertDraftEntry(ctx, versionDraft(ws, "v2", "fp-1", "late", ev)); err != nil || res.Outcome != EntryDiscarded {
		t.Errorf("a retired version's late draft: %+v %v, want discarded", res, err)
	}
	if w, err := s.PutAISummary(ctx, ws, "v2", "late", nil); err != nil || w {
		t.Errorf("a retired version's late summary: written %v %v", w, err)
	}
	if _, err := s.PromoteVersion(ctx, "v2", false); !errors.Is(err, ErrVersionRetired) {
		t.Errorf("promote retired: %v", err)
	}
	// its closed record read again after the retirement brings nothing back
	if _, oc, err := s.ClaimWindow(ctx, key, ClaimOptions{WindowLength: 5 * time.Minute, MaxAttempts: 3, StaleAfter: time.Minute}); err != nil || oc != ClaimDone {
		t.Errorf("claim of a retired version's window: %s %v, want done", oc, err)
	}
	if _, err := s.GetWindow(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("a retired version's window state came back: %v", err)
	}
	if _, err := s.RegisterVersion(ctx, VersionSpec{Name: "v2", Window: time.Minute}); !errors.Is(err, ErrVersionExists) {
		t.Errorf("register a retired name again: %v", err)
	}
	if _, err := s.EnsureVersion(ctx, VersionSpec{Name: "v2", Window: time.Minute}); !errors.Is(err, ErrVersionRetired) {
		t.Errorf("ensure a retired version: %v", err)
	}
	if _, err := s.RetireVersion(ctx, "v9", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("retire unknown: %v", err)
	}
}

// TestDiffVersionsNamesExactlyTheDifferences: entries by fingerprint only in A, only
// in B, with changed text; a changed summary; windows one version closed and the other
// did not; the workspace's own entries never; a workspace where both agree is absent.
func TestDiffVersionsNamesExactlyTheDifferences(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws, same ids.WorkspaceID = "ws-diff", "ws-same"
	ev := mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "m"))[0].ID
	evSame := mustUpsert(t, s, larkEvidence(same, "oc_a", "om_1", t0, "m"))[0].ID
	register(t, s, "v2")
	for _, d := range []EntryDraft{
		versionDraft(ws, "v1", "fp-same", "Same", ev), versionDraft(ws, "v2", "fp-same", "Same", ev),
		versionDraft(ws, "v1", "fp-changed", "Old text", ev), versionDraft(ws, "v2", "fp-changed", "New text", ev),
		versionDraft(ws, "v1", "fp-only-a", "Only in v1", ev),
		versionDraft(ws, "v2", "fp-only-b", "Only in v2", ev),
		versionDraft(same, "v1", "fp-x", "X", evSame), versionDraft(same, "v2", "fp-x", "X", evSame),
	} {
		if _, err := s.UpsertDraftEntry(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateHumanEntry(ctx, HumanEntry{Workspace: ws, OccurredAt: t0, Kind: "note", Title: "human"}); err != nil {
		t.Fatal(err)
	}
	for v, text := range map[string]string{"v1": "summary one", "v2": "summary two"} {
		if _, err := s.PutAISummary(ctx, ws, v, text, nil); err != nil {
			t.Fatal(err)
		}
	}
	opts := ClaimOptions{WindowLength: 5 * time.Minute, MaxAttempts: 3, StaleAfter: time.Minute}
	start := t0.Truncate(5 * time.Minute)
	for _, k := range []WindowKey{
		{Workspace: ws, Chat: "oc_a", ProcessorVersion: "v1", Start: start},
		{Workspace: ws, Chat: "oc_a", ProcessorVersion: "v2", Start: start},
		{Workspace: same, Chat: "oc_a", ProcessorVersion: "v2", Start: start},
	} {
		if _, _, err := s.CreateWindowIfAbsent(ctx, k, opts); err != nil {
			t.Fatal(err)
		}
	}
	diffs, err := s.DiffVersions(ctx, "v1", "v2", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range diffs {
		line := fmt.Sprintf("%s: summary %v", d.Workspace, d.SummaryChanged)
		for _, e := range d.OnlyA {
			line += " onlyA=" + e.Title
		}
		for _, e := range d.OnlyB {
			line += " onlyB=" + e.Title
		}
		for _, p := range d.Changed {
			line += " changed=" + p[0].Title + "->" + p[1].Title
		}
		line += fmt.Sprintf(" windowsA=%v windowsB=%v", nilEmpty(d.WindowsOnlyA), nilEmpty(d.WindowsOnlyB))
		got = append(got, line)
	}
	want := []string{
		"ws-diff: summary true onlyA=Only in v1 onlyB=Only in v2 changed=Old text->New text windowsA=[] windowsB=[]",
		"ws-same: summary false windowsA=[] windowsB=[chat/oc_a/window/" + start.Format(time.RFC3339) + "]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diff v1 v2:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	one, err := s.DiffVersions(ctx, "v1", "v2", same)
	if err != nil || len(one) != 1 || one[0].Workspace != same {
		t.Errorf("diff of one workspace: %+v %v", one, err)
	}
}

func nilEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestRetryWindows: a needs_attention and an exhausted failed window of the serving
// version go back to processing with no attempt spent and are what the next stale
// sweep takes over; a completed one is left; a second retry changes nothing.
func TestRetryWindows(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-retry"
	start := t0.Truncate(5 * time.Minute)
	opts := ClaimOptions{WindowLength: 5 * time.Minute, MaxAttempts: 1, StaleAfter: time.Hour}
	chats := []ids.ChatID{"oc_attention", "oc_failed", "oc_done", "oc_other"}
	for _, c := range chats {
		mustUpsert(t, s, larkEvidence(ws, c, "om_"+string(c), t0, "m"))
	}
	if _, _, err := s.MarkWindowNeedsAttention(ctx, WindowKey{Workspace: ws, Chat: "oc_attention", Start: start}, opts, "evidence never arrived"); err != nil {
		t.Fatal(err)
	}
	for c, to := range map[ids.ChatID]WindowStatus{"oc_failed": WindowFailed, "oc_done": WindowCompleted} {
		w, _, err := s.ClaimWindow(ctx, WindowKey{Workspace: ws, Chat: c, Start: start}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishWindow(ctx, w.Lease(), to, nil); err != nil {
			t.Fatal(err)
		}
	}
	// another version's window at the same start is not touched
	register(t, s, "v2")
	if _, _, err := s.MarkWindowNeedsAttention(ctx, WindowKey{Workspace: ws, Chat: "oc_other", ProcessorVersion: "v2", Start: start}, opts, "x"); err != nil {
		t.Fatal(err)
	}
	retried, left, err := s.RetryWindows(ctx, ws, "", "v1", start)
	if err != nil {
		t.Fatal(err)
	}
	names := func(ws []WindowState) string {
		var out []string
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%s:%s:%d", w.Key.Chat, w.Status, w.Attempts))
		}
		return strings.Join(out, ",")
	}
	if got := names(retried); got != "oc_attention:processing:0,oc_failed:processing:0" {
		t.Errorf("retried %s", got)
	}
	if got := names(left); got != "oc_done:completed:1" {
		t.Errorf("left %s", got)
	}
	stale, err := s.StaleProcessing(ctx, time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(stale); got != "oc_attention:processing:0,oc_failed:processing:0" {
		t.Errorf("the stale sweep finds %q", got)
	}
	// the sweep's takeover claims it as any takeover: attempt 1 of 1
	w, outcome, err := s.ClaimWindow(ctx, WindowKey{Workspace: ws, Chat: "oc_attention", Start: start}, opts)
	if err != nil || outcome != ClaimTakenOver || w.Attempts != 1 {
		t.Errorf("takeover of a retried window: %s attempt %d %v", outcome, w.Attempts, err)
	}
	retried, _, err = s.RetryWindows(ctx, ws, "oc_failed", "v1", start)
	if err != nil || len(retried) != 0 {
		t.Errorf("a second retry changed %s (%v)", names(retried), err)
	}
	if _, _, err := s.RetryWindows(ctx, ws, "", "v1", start.Add(time.Hour)); !errors.Is(err, ErrNotFound) {
		t.Errorf("retry of no window: %v", err)
	}
}

// TestSeedSynthesisWindows: a synthesis-only version gets, once, every completed or
// ignored window of its source as a stale processing window of its own, which the
// stale sweep finds; the source cannot be retired under it; once retired it gets none.
func TestSeedSynthesisWindows(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-seed"
	start := t0.Truncate(5 * time.Minute)
	opts := ClaimOptions{WindowLength: 5 * time.Minute, MaxAttempts: 3, StaleAfter: time.Hour, BelowOffset: 42}
	for c, to := range map[ids.ChatID]WindowStatus{"oc_done": WindowCompleted, "oc_ignored": WindowIgnored, "oc_failed": WindowFailed} {
		mustUpsert(t, s, larkEvidence(ws, c, "om_"+string(c), t0, "m"))
		w, _, err := s.ClaimWindow(ctx, WindowKey{Workspace: ws, Chat: c, Start: start}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishWindow(ctx, w.Lease(), to, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RegisterVersion(ctx, VersionSpec{Name: "s2", Window: 5 * time.Minute, SynthesisOf: "v1"}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{2, 0} {
		if n, err := s.SeedSynthesisWindows(ctx, "s2", "v1"); err != nil || n != want {
			t.Fatalf("seed #%d: %d %v, want %d", i+1, n, err, want)
		}
	}
	stale, err := s.StaleProcessing(ctx, time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range stale {
		got = append(got, fmt.Sprintf("%s/%s/%s/%d/below %d/end %s", w.Key.Chat, w.Key.ProcessorVersion, w.Status, w.Attempts,
			w.Meta.BelowOffset, w.Meta.WindowEnd.Sub(w.Key.Start)))
	}
	slices.Sort(got)
	if want := "oc_done/s2/processing/0/below 42/end 5m0s,oc_ignored/s2/processing/0/below 42/end 5m0s"; strings.Join(got, ",") != want {
		t.Errorf("the stale sweep finds %v, want %s", got, want)
	}
	if _, err := s.PromoteVersion(ctx, "s2", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RetireVersion(ctx, "v1", false); !errors.Is(err, ErrVersionInUse) {
		t.Errorf("retire the source of a synthesis-only version: %v, want ErrVersionInUse", err)
	}
	if _, err := s.PromoteVersion(ctx, "v1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RetireVersion(ctx, "s2", false); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SeedSynthesisWindows(ctx, "s2", "v1"); err != nil || n != 0 {
		t.Errorf("seeding a retired version: %d %v", n, err)
	}
}

// TestVersionSynthesisRecorded: a version's own synthesis settings are stored as
// given and read back; a version without keeps none (the deployment's); settings the
// store cannot hold are refused and register nothing.
func TestVersionSynthesisRecorded(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	own := &VersionSynthesis{Synthesizer: "openai", PromptVersion: "p2",
		OpenAI: VersionOpenAI{Model: "model-b", MaxOutputTokens: 512, Instructions: "Write only decisions."}, MaxEstimatedTokensPerChunk: 3000}
	for _, tc := range []struct {
		name    string
		set     *VersionSynthesis
		invalid bool
	}{
		{"own", own, false},
		{"none", nil, false},
		{"rules", &VersionSynthesis{Synthesizer: "rules"}, false},
		{"blank", &VersionSynthesis{}, true},
		{"negative", &VersionSynthesis{Synthesizer: "openai", OpenAI: VersionOpenAI{MaxOutputTokens: -1}}, true},
		{"long", &VersionSynthesis{Synthesizer: "openai", OpenAI: VersionOpenAI{Model: strings.Repeat("m", 257)}}, true},
		{"long-instructions", &VersionSynthesis{Synthesizer: "openai", OpenAI: VersionOpenAI{Instructions: strings.Repeat("i", MaxVersionInstructions+1)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.RegisterVersion(ctx, VersionSpec{Name: "s-" + tc.name, Window: 5 * time.Minute, SynthesisOf: "v1", Synthesis: tc.set})
			if tc.invalid {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("register: %v, want ErrInvalid", err)
				}
				if _, err := s.GetVersion(ctx, "s-"+tc.name); !errors.Is(err, ErrNotFound) {
					t.Fatalf("a refused version was registered: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.GetVersion(ctx, "s-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Synthesis) != fmt.Sprint(tc.set) || (got.Synthesis == nil) != (tc.set == nil) {
				t.Fatalf("read back %+v, want %+v", got.Synthesis, tc.set)
			}
			if tc.set != nil && *got.Synthesis != *tc.set {
				t.Fatalf("read back %+v, want %+v", *got.Synthesis, *tc.set)
			}
		})
	}
	if h := own.Hash(); len(h) != 12 || h == (&VersionSynthesis{Synthesizer: "openai", PromptVersion: "p3"}).Hash() {
		t.Errorf("hash %q does not tell settings apart", h)
	}
}
