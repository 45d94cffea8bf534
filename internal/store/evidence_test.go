package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func redacted(e Evidence, at time.Time) Evidence {
	e.Content, e.Deleted, e.SourceUpdatedAt = "", true, at
	e.ContentHash = hashOf("", "deleted")
	e.SynthesisEligible = false
	return e
}

func edited(e Evidence, at time.Time, text string) Evidence {
	e.Content, e.SourceUpdatedAt, e.ContentHash = text, at, hashOf(text, "live")
	return e
}

func TestUpsertEvidenceVersions(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-versions"
	v1 := larkEvidence(ws, "oc_a", "om_1", t0, "db is down")
	v2 := edited(v1, t0.Add(time.Minute), "db is down in eu-west")
	gone := redacted(v2, t0.Add(2*time.Minute))

	steps := []struct {
		name        string
		write       Evidence
		want        EvidenceResult
		wantContent string
		wantDeleted bool
	}{
		{"first version is inserted", v1, EvidenceInserted, "db is down", false},
		{"duplicate delivery is unchanged", v1, EvidenceUnchanged, "db is down", false},
		{"edit with a new hash updates", v2, EvidenceUpdated, "db is down in eu-west", false},
		{"older version arriving late is stale", v1, EvidenceStale, "db is down in eu-west", false},
		{"deletion redacts", gone, EvidenceRedacted, "", true},
		{"deletion again is unchanged", gone, EvidenceUnchanged, "", true},
		{"live version never replaces a deleted one", edited(v1, t0.Add(time.Hour), "resurrected"), EvidenceStale, "", true},
	}
	var id int64
	for _, st := range steps {
		out := mustUpsert(t, s, st.write)
		if out[0].Result != st.want {
			t.Fatalf("%s: result %s, want %s", st.name, out[0].Result, st.want)
		}
		if id == 0 {
			id = out[0].ID
		}
		if out[0].ID != id {
			t.Fatalf("%s: id %d, want the same row %d", st.name, out[0].ID, id)
		}
		rows, err := s.EvidenceByKeys(ctx, ws, LarkMessageEvidence, []string{v1.SourceKey})
		if err != nil || len(rows) != 1 {
			t.Fatalf("%s: EvidenceByKeys = %d rows, %v", st.name, len(rows), err)
		}
		if rows[0].Content != st.wantContent || rows[0].Deleted != st.wantDeleted {
			t.Fatalf("%s: stored content %q deleted %v, want %q %v", st.name, rows[0].Content, rows[0].Deleted, st.wantContent, st.wantDeleted)
		}
	}
	if n := countRows(t, s, "workspace_timeline_evidence", "workspace_id = $1", string(ws)); n != 1 {
		t.Fatalf("%d evidence rows for one message, want 1", n)
	}
}

func TestUpsertEvidenceFirstSeenDeletedIsInserted(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	e := redacted(larkEvidence("ws-del", "oc_a", "om_1", t0, "x"), t0)
	if out := mustUpsert(t, s, e); out[0].Result != EvidenceInserted {
		t.Fatalf("result %s, want inserted", out[0].Result)
	}
}

func TestUpsertEvidenceBatchOutcomesInInputOrder(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-batch"
	a := larkEvidence(ws, "oc_a", "om_a", t0, "a")
	b := larkEvidence(ws, "oc_a", "om_b", t0, "b")
	mustUpsert(t, s, a)

	// The same key three times in one batch (create, edit, duplicate edit), a row that
	// exists, a new row, and the same message in a second workspace.
	bEdit := edited(b, t0.Add(time.Second), "b2")
	other := larkEvidence("ws-other", "oc_a", "om_b", t0, "b")
	out := mustUpsert(t, s, b, a, bEdit, bEdit, other)
	want := []EvidenceResult{EvidenceInserted, EvidenceUnchanged, EvidenceUpdated, EvidenceUnchanged, EvidenceInserted}
	for i, w := range want {
		if out[i].Result != w {
			t.Errorf("row %d: %s, want %s", i, out[i].Result, w)
		}
	}
	if out[0].ID != out[2].ID || out[2].ID != out[3].ID || out[0].ID == out[4].ID {
		t.Errorf("ids %v: the repeated key must map to one row, the other workspace to another", out)
	}
	rows, err := s.EvidenceByKeys(context.Background(), ws, LarkMessageEvidence, []string{b.SourceKey})
	if err != nil || len(rows) != 1 || rows[0].Content != "b2" {
		t.Fatalf("stored %+v, %v; want b2", rows, err)
	}
}

func TestUpsertEvidenceLargeBatchSpansStatements(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-large"
	batch := make([]Evidence, maxEvidenceRowsStmt+5)
	for i := range batch {
		batch[i] = larkEvidence(ws, "oc_a", fmt.Sprintf("om_%05d", i), t0.Add(time.Duration(i)*time.Millisecond), "x")
	}
	out := mustUpsert(t, s, batch...)
	for i, o := range out {
		if o.Result != EvidenceInserted || o.ID == 0 {
			t.Fatalf("row %d: %+v", i, o)
		}
	}
	if n := countRows(t, s, "workspace_timeline_evidence", "workspace_id = $1", string(ws)); n != len(batch) {
		t.Fatalf("%d rows, want %d", n, len(batch))
	}
}

func TestUpsertEvidenceRejectsInvalidBatchWithoutWriting(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-invalid"
	good := larkEvidence(ws, "oc_a", "om_1", t0, "fine")
	cases := map[string]func(*Evidence){
		"NUL byte in content":       func(e *Evidence) { e.Content = "bad\x00" },
		"metadata is not an object": func(e *Evidence) { e.Metadata = []byte(`"x"`) },
		"source key of another shape": func(e *Evidence) {
			e.SourceKey = "chat/oc_a/window/2026"
		},
		"missing content hash": func(e *Evidence) { e.ContentHash = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			bad := larkEvidence(ws, "oc_a", "om_2", t0, "x")
			mutate(&bad)
			_, err := s.UpsertEvidence(context.Background(), []Evidence{good, bad})
			var inv *InvalidEvidenceError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &inv) || inv.Index != 1 {
				t.Fatalf("UpsertEvidence = %v, want *InvalidEvidenceError at index 1 wrapping ErrInvalid", err)
			}
			if n := countRows(t, s, "workspace_timeline_evidence", "workspace_id = $1", string(ws)); n != 0 {
				t.Fatalf("%d rows written from a rejected batch", n)
			}
		})
	}
}

func TestUpsertEvidenceRoundTripsFields(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	e := larkEvidence("ws-fields", "oc_chat1", "om_1", t0.Add(123456*time.Microsecond), "text ✓")
	e.SourceUpdatedAt = time.Time{} // defaults to OccurredAt
	e.ActorDisplayName = "Ada"
	e.Metadata = []byte(`{"thread_id":"omt_1","type":"text"}`)
	mustUpsert(t, s, e)
	rows, err := s.EvidenceByKeys(context.Background(), "ws-fields", LarkMessageEvidence, []string{e.SourceKey, "chat/oc_x/message/om_none"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("EvidenceByKeys = %d, %v", len(rows), err)
	}
	got := rows[0]
	if got.ChatID != "oc_chat1" || !got.OccurredAt.Equal(e.OccurredAt) || !got.SourceUpdatedAt.Equal(e.OccurredAt) ||
		got.ObservedAt.IsZero() || got.ActorDisplayName != "Ada" || got.Content != e.Content || !got.SynthesisEligible {
		t.Fatalf("round trip: %+v", got)
	}
	var meta map[string]string
	if err := json.Unmarshal(got.Metadata, &meta); err != nil || len(meta) != 2 || meta["thread_id"] != "omt_1" || meta["type"] != "text" {
		t.Fatalf("metadata %s (%v)", got.Metadata, err)
	}
}

func TestListEvidenceKeysetWithEqualTimestamps(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-keyset"
	var batch []Evidence
	for i := range 25 {
		batch = append(batch, larkEvidence(ws, "oc_a", fmt.Sprintf("om_%02d", i), t0, "same instant"))
	}
	// Rows of another workspace and another kind at the same instant must not appear.
	batch = append(batch, larkEvidence("ws-else", "oc_a", "om_x", t0, "x"))
	jira := larkEvidence(ws, "oc_a", "om_j", t0, "x")
	jira.Source, jira.SourceType, jira.SourceKey = "jira", "issue", "PROJ-1"
	batch = append(batch, jira)
	out := mustUpsert(t, s, batch...)

	var (
		seen  []int64
		after *Cursor
		pages int
	)
	for {
		p, err := s.ListEvidence(ctx, ws, LarkMessageEvidence, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Items) > 7 {
			t.Fatalf("page of %d > limit 7", len(p.Items))
		}
		for _, e := range p.Items {
			seen = append(seen, e.ID)
		}
		if p.Next == nil {
			break
		}
		after = p.Next
	}
	if pages != 4 || len(seen) != 25 {
		t.Fatalf("%d pages, %d rows; want 4 pages, 25 rows", pages, len(seen))
	}
	for i := range seen {
		if seen[i] != out[i].ID {
			t.Fatalf("row %d: id %d, want %d (every row once, in (occurred_at, id) order)", i, seen[i], out[i].ID)
		}
	}
	// An exact multiple of the page size ends without an empty trailing page.
	p, err := s.ListEvidence(ctx, ws, LarkMessageEvidence, nil, 25)
	if err != nil || len(p.Items) != 25 || p.Next != nil {
		t.Fatalf("one full page: %d items, next %v, %v", len(p.Items), p.Next, err)
	}
	if _, err := s.ListEvidence(ctx, ws, LarkMessageEvidence, nil, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("limit 0: %v, want ErrInvalid", err)
	}
}

func TestEvidenceInRange(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-range"
	from, to := t0, t0.Add(10*time.Minute)
	bot := larkEvidence(ws, "oc_a", "om_bot", from.Add(2*time.Minute), "card")
	bot.SynthesisEligible = false
	deleted := redacted(larkEvidence(ws, "oc_a", "om_del", from.Add(3*time.Minute), "x"), from.Add(3*time.Minute))
	out := mustUpsert(t, s,
		larkEvidence(ws, "oc_a", "om_before", from.Add(-time.Microsecond), "before"),
		larkEvidence(ws, "oc_a", "om_start", from, "at start"),
		bot, deleted,
		larkEvidence(ws, "oc_a", "om_last", to.Add(-time.Microsecond), "last"),
		larkEvidence(ws, "oc_a", "om_end", to, "at end: next window"),
		larkEvidence(ws, "oc_b", "om_otherchat", from.Add(time.Minute), "other chat"),
		larkEvidence("ws-x", "oc_a", "om_otherws", from.Add(time.Minute), "other workspace"),
	)
	cases := []struct {
		name     string
		eligible bool
		want     []int64
	}{
		{"all rows of the chat in [from, to)", false, []int64{out[1].ID, out[2].ID, out[3].ID, out[4].ID}},
		{"eligible only", true, []int64{out[1].ID, out[4].ID}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []int64
			var after *Cursor
			for {
				p, err := s.EvidenceInRange(ctx, RangeQuery{Workspace: ws, Chat: "oc_a", From: from, To: to, After: after, Limit: 1, EligibleOnly: c.eligible})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range p.Items {
					got = append(got, e.ID)
				}
				if p.Next == nil {
					break
				}
				after = p.Next
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("ids %v, want %v", got, c.want)
			}
		})
	}
	if _, err := s.EvidenceInRange(ctx, RangeQuery{Workspace: ws, Chat: "oc_a", From: to, To: from, Limit: 5}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("inverted range: %v, want ErrInvalid", err)
	}
	if _, err := s.EvidenceInRange(ctx, RangeQuery{Workspace: ws, Chat: "bad", From: from, To: to, Limit: 5}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad chat: %v, want ErrInvalid", err)
	}
}

func TestEvidenceByKeys(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-keys"
	a := larkEvidence(ws, "oc_a", "om_a", t0, "a")
	b := larkEvidence(ws, "oc_a", "om_b", t0, "b")
	mustUpsert(t, s, a, b)
	stored, err := s.EvidenceByKeys(context.Background(), ws, LarkMessageEvidence, []string{b.SourceKey, a.SourceKey, "chat/oc_a/message/om_c"})
	if err != nil || len(stored) != 2 || stored[0].ContentHash != a.ContentHash || stored[1].ContentHash != b.ContentHash {
		t.Fatalf("EvidenceByKeys = %+v, %v; want a then b, the unknown key absent", stored, err)
	}
	if _, err := s.EvidenceByKeys(context.Background(), ws, LarkMessageEvidence, make([]string, MaxKeysPerCall+1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too many keys: %v", err)
	}
}

func TestDeleteEvidenceRemovesRowsAndBindings(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-tomb"
	a := larkEvidence(ws, "oc_a", "om_a", t0, "a")
	b := larkEvidence(ws, "oc_a", "om_b", t0, "b")
	out := mustUpsert(t, s, a, b)
	res, err := s.UpsertDraftEntry(ctx, EntryDraft{Workspace: ws, Fingerprint: "fp", EntryContent: EntryContent{
		OccurredAt: t0, Kind: "finding", Title: "t", EvidenceIDs: []int64{out[0].ID, out[1].ID}}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteEvidence(ctx, ws, LarkMessageEvidence, []string{a.SourceKey, "chat/oc_a/message/om_none"})
	if err != nil || n != 1 {
		t.Fatalf("DeleteEvidence = %d, %v; want 1", n, err)
	}
	e, err := s.GetEntry(ctx, ws, res.ID)
	if err != nil || fmt.Sprint(e.EvidenceIDs) != fmt.Sprint([]int64{out[1].ID}) {
		t.Fatalf("entry evidence after tombstone: %v, %v", e.EvidenceIDs, err)
	}
	// Deleting in another workspace touches nothing here.
	if n, err := s.DeleteEvidence(ctx, "ws-else", LarkMessageEvidence, []string{b.SourceKey}); err != nil || n != 0 {
		t.Fatalf("DeleteEvidence elsewhere = %d, %v", n, err)
	}
}

// TestVersionRuleMatchesEvidenceRank: the SQL version rule and its Go mirror
// (schemas.EvidenceRank, which the window processor and the synthesis evidence wait
// use) agree on every pair of versions: which one the table keeps.
func TestVersionRuleMatchesEvidenceRank(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const ws ids.WorkspaceID = "ws-rank"
	type version struct {
		upd     time.Duration
		deleted bool
		text    string
	}
	versions := []version{
		{0, false, "orig"}, {time.Minute, false, "edit"}, {0, false, "same-time"},
		{0, true, ""}, {time.Minute, true, ""}, {2 * time.Minute, false, "late-edit"},
	}
	build := func(msg string, v version) Evidence {
		e := larkEvidence(ws, "oc_rank", msg, t0, v.text)
		e.SourceUpdatedAt = t0.Add(v.upd)
		if v.deleted {
			e.Content, e.Deleted, e.SynthesisEligible = "", true, false
			e.ContentHash = hashOf(fmt.Sprint(v.upd), "deleted")
		}
		return e
	}
	n := 0
	for _, first := range versions {
		for _, second := range versions {
			n++
			msg := fmt.Sprintf("om_%02d", n)
			a, b := build(msg, first), build(msg, second)
			mustUpsert(t, s, a)
			mustUpsert(t, s, b)
			rows, err := s.EvidenceByKeys(context.Background(), ws, LarkMessageEvidence, []string{a.SourceKey})
			if err != nil || len(rows) != 1 {
				t.Fatalf("read back %s: %d rows, %v", msg, len(rows), err)
			}
			rankA := schemas.EvidenceRank{SourceUpdatedAt: a.SourceUpdatedAt, Deleted: a.Deleted}
			rankB := schemas.EvidenceRank{SourceUpdatedAt: b.SourceUpdatedAt, Deleted: b.Deleted}
			want := a.ContentHash
			if rankB.Replaces(b.ContentHash, rankA, a.ContentHash) {
				want = b.ContentHash
			}
			if rows[0].ContentHash != want {
				t.Errorf("%+v then %+v: the table kept %s, EvidenceRank says %s", first, second, rows[0].ContentHash[:8], want[:8])
			}
			// what the table keeps ranks at least as high as both versions
			kept := schemas.EvidenceRank{SourceUpdatedAt: rows[0].SourceUpdatedAt, Deleted: rows[0].Deleted}
			if kept.Compare(rankA) < 0 || kept.Compare(rankB) < 0 {
				t.Errorf("%+v then %+v: the kept version ranks below one of them", first, second)
			}
		}
	}
}

// TestChatsWithEvidence: of the chats asked about, those with synthesis-eligible
// evidence in [from, to), in the order asked.
func TestChatsWithEvidence(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-active"
	from, to := t0, t0.Add(time.Minute)
	bot := larkEvidence(ws, "oc_bot", "om_bot", from.Add(time.Second), "card")
	bot.SynthesisEligible = false
	mustUpsert(t, s,
		larkEvidence(ws, "oc_a", "om_a", from, "at start"),
		larkEvidence(ws, "oc_b", "om_b", to.Add(-time.Microsecond), "last"),
		larkEvidence(ws, "oc_before", "om_before", from.Add(-time.Microsecond), "before"),
		larkEvidence(ws, "oc_end", "om_end", to, "at end: next window"),
		bot,
		larkEvidence("ws-other", "oc_c", "om_c", from.Add(time.Second), "other workspace"),
	)
	ask := []ChatRef{{ws, "oc_b"}, {ws, "oc_before"}, {ws, "oc_end"}, {ws, "oc_bot"}, {ws, "oc_c"}, {ws, "oc_a"}, {ws, "oc_none"}, {"ws-other", "oc_c"}}
	got, err := s.ChatsWithEvidence(ctx, ask, from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := []ChatRef{{ws, "oc_b"}, {ws, "oc_a"}, {"ws-other", "oc_c"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("chats %v, want %v", got, want)
	}
	if got, err := s.ChatsWithEvidence(ctx, nil, from, to); err != nil || got != nil {
		t.Fatalf("no chats: %v, %v", got, err)
	}
	if _, err := s.ChatsWithEvidence(ctx, ask, to, from); !errors.Is(err, ErrInvalid) {
		t.Fatalf("inverted range: %v, want ErrInvalid", err)
	}
	if _, err := s.ChatsWithEvidence(ctx, []ChatRef{{ws, "bad"}}, from, to); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad chat: %v, want ErrInvalid", err)
	}
}
