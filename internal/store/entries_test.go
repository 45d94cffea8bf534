package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

func draft(ws ids.WorkspaceID, fp, title string, evidence ...int64) EntryDraft {
	return EntryDraft{Workspace: ws, Fingerprint: fp, EntryContent: EntryContent{
		OccurredAt: t0, Kind: "mitigation", Title: title, Body: "body of " + title,
		AIMetadata: []byte(`{"prompt_version":"p1","batch_id":"b1"}`), EvidenceIDs: evidence,
	}}
}

func evidenceIDs(out []UpsertOutcome) []int64 {
	ids := make([]int64, len(out))
	for i, o := range out {
		ids[i] = o.ID
	}
	return ids
}

func TestUpsertDraftEntryDedupAndProtection(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-entries"
	var ev []int64
	for i := range 6 {
		ev = append(ev, mustUpsert(t, s, larkEvidence(ws, "oc_a", fmt.Sprintf("om_%d", i), t0, "m"))[0].ID)
	}

	// An AI draft evolves while nobody touches it.
	steps := []struct {
		name      string
		d         EntryDraft
		want      EntryOutcome
		wantTitle string
		wantEv    []int64
	}{
		{"new fingerprint creates a draft", draft(ws, "fp-1", "Rolled back", ev[0]), EntryCreated, "Rolled back", ev[:1]},
		{"same draft again changes nothing", draft(ws, "fp-1", "Rolled back", ev[0]), EntryUnchanged, "Rolled back", ev[:1]},
		{"new text updates the draft", draft(ws, "fp-1", "Rolled back v42", ev[0], ev[1]), EntryUpdated, "Rolled back v42", ev[:2]},
		{"same text, new evidence attaches", draft(ws, "fp-1", "Rolled back v42", ev[2]), EntryEvidenceAttached, "Rolled back v42", ev[:3]},
	}
	var id int64
	for _, st := range steps {
		res, err := s.UpsertDraftEntry(ctx, st.d)
		if err != nil || res.Outcome != st.want || res.HumanOwned {
			t.Fatalf("%s: %+v %v; want %s", st.name, res, err, st.want)
		}
		if id == 0 {
			id = res.ID
		}
		e, err := s.GetEntry(ctx, ws, id)
		if err != nil || res.ID != id || e.Title != st.wantTitle || !slices.Equal(e.EvidenceIDs, st.wantEv) || e.Source != EntryFromAI || e.Status != EntryStatusDraft {
			t.Fatalf("%s: entry %+v %v", st.name, e, err)
		}
	}

	// Once a human edits or curates the entry, synthesis only attaches evidence.
	protect := []struct {
		name  string
		patch EntryPatch
	}{
		{"human-edited draft", EntryPatch{Title: ptr("Rolled back (human)")}},
		{"confirmed", EntryPatch{Status: ptr(EntryStatusConfirmed)}},
		{"hidden", EntryPatch{Status: ptr(EntryStatusHidden)}},
	}
	for i, p := range protect {
		t.Run(p.name, func(t *testing.T) {
			fp := fmt.Sprintf("fp-protect-%d", i)
			res, err := s.UpsertDraftEntry(ctx, draft(ws, fp, "AI text", ev[0]))
			if err != nil {
				t.Fatal(err)
			}
			edited, err := s.HumanEditEntry(ctx, ws, res.ID, p.patch)
			if err != nil || edited.HumanEditedAt == nil {
				t.Fatalf("HumanEditEntry: %+v %v", edited, err)
			}
			again, err := s.UpsertDraftEntry(ctx, draft(ws, fp, "AI rewrite", ev[0], ev[3]))
			if err != nil || again.Outcome != EntryEvidenceAttached || !again.HumanOwned || again.ID != res.ID {
				t.Fatalf("upsert over a protected entry: %+v %v", again, err)
			}
			if again, err = s.UpsertDraftEntry(ctx, draft(ws, fp, "AI rewrite", ev[3])); err != nil || again.Outcome != EntryUnchanged {
				t.Fatalf("repeat over a protected entry: %+v %v", again, err)
			}
			if _, err := s.UpdateDraftEntry(ctx, ws, res.ID, draft(ws, fp, "AI by id", ev[4]).EntryContent); !errors.Is(err, ErrHumanOwned) {
				t.Fatalf("UpdateDraftEntry on a protected entry: %v, want ErrHumanOwned", err)
			}
			got, err := s.GetEntry(ctx, ws, res.ID)
			if err != nil || got.Title == "AI rewrite" || got.Title == "AI by id" || !slices.Equal(got.EvidenceIDs, []int64{ev[0], ev[3]}) {
				t.Fatalf("protected entry changed: %+v %v", got, err)
			}
			if string(got.AIMetadata) != string(edited.AIMetadata) {
				t.Fatalf("protected entry's metadata changed")
			}
		})
	}
}

// TestUpsertDraftEntriesIsOneTransaction: a batch reports each draft's outcome as
// single upserts would (a repeated fingerprint in one batch sees the earlier row),
// and a draft that cannot be written leaves the whole batch unwritten.
func TestUpsertDraftEntriesIsOneTransaction(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	const ws ids.WorkspaceID = "ws-batch"
	ev := evidenceIDs(mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "a"), larkEvidence(ws, "oc_a", "om_2", t0, "b")))
	other := evidenceIDs(mustUpsert(t, s, larkEvidence("ws-batch-other", "oc_b", "om_1", t0, "c")))
	if _, err := s.UpsertDraftEntry(ctx, draft(ws, "fp-old", "Old", ev[0])); err != nil {
		t.Fatal(err)
	}

	res, err := s.UpsertDraftEntries(ctx, []EntryDraft{
		draft(ws, "fp-new", "New", ev[0]),
		draft(ws, "fp-old", "Old, rewritten", ev[0]),
		draft(ws, "fp-new", "New", ev[0], ev[1]),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []EntryOutcome{EntryCreated, EntryUpdated, EntryEvidenceAttached}
	if len(res) != len(want) || res[0].ID != res[2].ID {
		t.Fatalf("results %+v, want %v on the same new entry", res, want)
	}
	for i, r := range res {
		if r.Outcome != want[i] {
			t.Errorf("draft %d: %s, want %s", i, r.Outcome, want[i])
		}
	}

	list := func() []Entry {
		page, err := s.ListEntries(ctx, ws, EntryQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return page.Items
	}
	before := list()
	_, err = s.UpsertDraftEntries(ctx, []EntryDraft{
		draft(ws, "fp-never", "Never written", ev[0]),
		draft(ws, "fp-new", "New, rewritten", ev[1]),
		draft(ws, "fp-foreign", "Foreign evidence", other[0]),
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a batch with another workspace's evidence: %v, want ErrInvalid", err)
	}
	if after := list(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a failed batch wrote:\n%+v\nwant\n%+v", after, before)
	}
	if res, err := s.UpsertDraftEntries(ctx, nil); err != nil || res != nil {
		t.Fatalf("an empty batch: %v %v", res, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestHumanCreatedEntryIsNeverOverwritten(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-human"
	ev := evidenceIDs(mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "a"), larkEvidence(ws, "oc_a", "om_2", t0, "b")))
	h, err := s.CreateHumanEntry(ctx, HumanEntry{Workspace: ws, OccurredAt: t0, Kind: "decision", Title: "Human call",
		Fingerprint: "fp-h", EvidenceIDs: ev[:1]})
	if err != nil || h.Source != EntryFromHuman || h.Status != EntryStatusConfirmed || !h.HumanOwned() {
		t.Fatalf("CreateHumanEntry: %+v %v", h, err)
	}
	res, err := s.UpsertDraftEntry(ctx, draft(ws, "fp-h", "AI would say", ev[1]))
	if err != nil || res.ID != h.ID || res.Outcome != EntryEvidenceAttached || !res.HumanOwned {
		t.Fatalf("AI draft with the human entry's fingerprint: %+v %v", res, err)
	}
	got, _ := s.GetEntry(ctx, ws, h.ID)
	if got.Title != "Human call" || got.Source != EntryFromHuman || !slices.Equal(got.EvidenceIDs, ev) {
		t.Fatalf("human entry after AI draft: %+v", got)
	}
	if _, err := s.CreateHumanEntry(ctx, HumanEntry{Workspace: ws, OccurredAt: t0, Kind: "decision", Title: "dup", Fingerprint: "fp-h"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate fingerprint: %v, want ErrConflict", err)
	}
}

func TestEntryEvidenceMustBelongToWorkspace(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	mine := mustUpsert(t, s, larkEvidence("ws-mine", "oc_a", "om_1", t0, "a"))[0].ID
	theirs := mustUpsert(t, s, larkEvidence("ws-theirs", "oc_a", "om_1", t0, "a"))[0].ID
	if _, err := s.UpsertDraftEntry(ctx, draft("ws-mine", "fp", "t", mine, theirs)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("draft citing another workspace's evidence: %v, want ErrInvalid", err)
	}
	if n := countRows(t, s, "workspace_timeline_entries", "true"); n != 0 {
		t.Fatalf("%d entries written by a rejected draft", n)
	}
	res, err := s.UpsertDraftEntry(ctx, draft("ws-mine", "fp", "t", mine))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BindEvidence(ctx, "ws-mine", res.ID, []int64{theirs}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("BindEvidence across workspaces: %v, want ErrInvalid", err)
	}
	if _, err := s.BindEvidence(ctx, "ws-theirs", res.ID, []int64{theirs}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("BindEvidence to another workspace's entry: %v, want ErrNotFound", err)
	}
	if n, err := s.BindEvidence(ctx, "ws-mine", res.ID, []int64{mine, mine}); err != nil || n != 0 {
		t.Fatalf("rebinding: %d %v, want 0 new", n, err)
	}
}

func TestUpdateDraftEntryByID(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-upd"
	res, err := s.UpsertDraftEntry(ctx, draft(ws, "fp", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	c := draft(ws, "fp", "v2").EntryContent
	if got, err := s.UpdateDraftEntry(ctx, ws, res.ID, c); err != nil || got.Outcome != EntryUpdated {
		t.Fatalf("UpdateDraftEntry: %+v %v", got, err)
	}
	if got, err := s.UpdateDraftEntry(ctx, ws, res.ID, c); err != nil || got.Outcome != EntryUnchanged {
		t.Fatalf("UpdateDraftEntry again: %+v %v", got, err)
	}
	if _, err := s.UpdateDraftEntry(ctx, ws, res.ID+1000, c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing entry: %v, want ErrNotFound", err)
	}
}

func TestListVisibleEntries(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-list"
	ev := mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "a"))[0].ID
	mk := func(fp string, at time.Time) int64 {
		d := draft(ws, fp, fp, ev)
		d.OccurredAt = at
		res, err := s.UpsertDraftEntry(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	late := mk("late", t0.Add(time.Hour))
	early := mk("early", t0)
	same := mk("same-as-early", t0)
	hidden := mk("hidden", t0.Add(time.Minute))
	if _, err := s.HumanEditEntry(ctx, ws, hidden, EntryPatch{Status: ptr(EntryStatusHidden)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertDraftEntry(ctx, draft("ws-other", "other", "other")); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListVisibleEntries(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []int64
	for _, e := range got {
		gotIDs = append(gotIDs, e.ID)
		if !slices.Equal(e.EvidenceIDs, []int64{ev}) {
			t.Errorf("entry %d evidence %v", e.ID, e.EvidenceIDs)
		}
	}
	if want := []int64{early, same, late}; !slices.Equal(gotIDs, want) {
		t.Fatalf("visible entries %v, want %v", gotIDs, want)
	}
	p, err := s.ListEntries(ctx, ws, EntryQuery{IncludeHidden: true, Limit: 3})
	if err != nil || len(p.Items) != 3 || p.Next == nil {
		t.Fatalf("first page with hidden: %d %v", len(p.Items), err)
	}
	p2, err := s.ListEntries(ctx, ws, EntryQuery{IncludeHidden: true, After: p.Next, Limit: 3})
	if err != nil || len(p2.Items) != 1 || p2.Items[0].ID != late || p2.Next != nil {
		t.Fatalf("second page with hidden: %+v %v", p2, err)
	}
}

func TestHumanEditEntryValidation(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-edit"
	res, err := s.UpsertDraftEntry(ctx, draft(ws, "fp", "t"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		id    int64
		patch EntryPatch
		err   error
	}{
		{"empty patch", res.ID, EntryPatch{}, ErrInvalid},
		{"bad status", res.ID, EntryPatch{Status: ptr(EntryStatus("deleted"))}, ErrInvalid},
		{"empty title", res.ID, EntryPatch{Title: ptr("")}, ErrInvalid},
		{"NUL in body", res.ID, EntryPatch{Body: ptr("a\x00")}, ErrInvalid},
		{"missing entry", res.ID + 1000, EntryPatch{Title: ptr("x")}, ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.HumanEditEntry(ctx, ws, c.id, c.patch); !errors.Is(err, c.err) {
				t.Fatalf("HumanEditEntry = %v, want %v", err, c.err)
			}
		})
	}
	e, err := s.HumanEditEntry(ctx, ws, res.ID, EntryPatch{Body: ptr("")})
	if err != nil || e.Body != "" || e.Title != "t" || e.HumanEditedAt == nil {
		t.Fatalf("clearing the body: %+v %v", e, err)
	}
}
