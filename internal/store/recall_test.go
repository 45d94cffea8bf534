package store

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// TestRecallWithdrawsDraftsAndFlagsHumanEntries (issue #19 item 3, decisions D12): a
// recall applied by UpsertEvidence withdraws, in the same transaction, the untouched AI
// drafts citing the message (hidden, no text left), flags every human or curated entry
// citing it for review without changing its text, empties the AI summary and makes a
// refresh due. A retention redaction of the same kind of message changes no entry.
func TestRecallWithdrawsDraftsAndFlagsHumanEntries(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-recall"
	live := larkEvidence(ws, "oc_a", "om_recalled", t0, "rolling back v42 now")
	other := larkEvidence(ws, "oc_a", "om_kept", t0, "kept message")
	aged := larkEvidence(ws, "oc_a", "om_aged", t0, "old message")
	out := mustUpsert(t, s, live, other, aged)
	evRecalled, evKept, evAged := out[0].ID, out[1].ID, out[2].ID

	mustDraft := func(fp string, ev ...int64) int64 {
		t.Helper()
		res, err := s.UpsertDraftEntry(ctx, draft(ws, fp, "AI "+fp, ev...))
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	untouched := mustDraft("fp-untouched", evRecalled, evKept)
	unrelated := mustDraft("fp-unrelated", evKept)
	edited := mustDraft("fp-edited", evRecalled)
	if _, err := s.HumanEditEntry(ctx, ws, edited, EntryPatch{Title: ptr("reworded by a person")}); err != nil {
		t.Fatal(err)
	}
	confirmed := mustDraft("fp-confirmed", evRecalled)
	if _, err := s.HumanEditEntry(ctx, ws, confirmed, EntryPatch{Status: ptr(EntryStatusConfirmed)}); err != nil {
		t.Fatal(err)
	}
	human, err := s.CreateHumanEntry(ctx, HumanEntry{Workspace: ws, OccurredAt: t0, Kind: "note", Title: "a person's note",
		Body: "their words", EvidenceIDs: []int64{evRecalled}})
	if err != nil {
		t.Fatal(err)
	}
	agedDraft := mustDraft("fp-aged", evAged)
	if _, err := s.PutAISummaryIfNotHuman(ctx, ws, "summary quoting v42", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}

	// Retention's redaction (metadata "retention": true) is not a recall.
	ret := redacted(aged, t0.Add(time.Hour))
	ret.Metadata = []byte(`{"chat_id":"oc_a","deleted":true,"retention":true}`)
	if got := mustUpsert(t, s, ret); got[0].Result != EvidenceRedacted {
		t.Fatalf("retention redaction: %+v", got)
	}
	if e, _ := s.GetEntry(ctx, ws, agedDraft); e.Status != EntryStatusDraft || e.Title != "AI fp-aged" || e.WithdrawnAt != nil || e.NeedsReviewAt != nil {
		t.Fatalf("retention touched a draft: %+v", e)
	}
	if sum, _ := s.GetSummary(ctx, ws); sum.Text != "summary quoting v42" || sum.RefreshDueAt != nil {
		t.Fatalf("retention touched the summary: %+v", sum)
	}

	// The recall.
	if got := mustUpsert(t, s, redacted(live, t0.Add(time.Hour))); got[0].Result != EvidenceRedacted {
		t.Fatalf("recall: %+v", got)
	}
	e, err := s.GetEntry(ctx, ws, untouched)
	if err != nil || e.Status != EntryStatusHidden || e.Title != "" || e.Body != "" || e.WithdrawnAt == nil || e.NeedsReviewAt != nil {
		t.Fatalf("untouched draft after the recall: %+v %v", e, err)
	}
	for _, id := range []int64{edited, confirmed, human.ID} {
		before := map[int64]string{edited: "reworded by a person", confirmed: "AI fp-confirmed", human.ID: "a person's note"}[id]
		e, err := s.GetEntry(ctx, ws, id)
		if err != nil || e.Title != before || e.Status == EntryStatusHidden || e.NeedsReviewAt == nil || e.WithdrawnAt != nil {
			t.Fatalf("human-owned entry %d after the recall: %+v %v", id, e, err)
		}
	}
	if e, _ := s.GetEntry(ctx, ws, unrelated); e.Status != EntryStatusDraft || e.Title != "AI fp-unrelated" || e.NeedsReviewAt != nil {
		t.Fatalf("a draft not citing the message changed: %+v", e)
	}
	sum, err := s.GetSummary(ctx, ws)
	if err != nil || sum.Text != "" || sum.RefreshDueAt == nil {
		t.Fatalf("summary after the recall: %+v %v", sum, err)
	}
	visible, err := s.ListVisibleEntries(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range visible {
		if v.ID == untouched {
			t.Fatal("the withdrawn draft is still visible")
		}
	}

	// Synthesis writing the same fingerprint again leaves the withdrawn draft alone.
	if res, err := s.UpsertDraftEntry(ctx, draft(ws, "fp-untouched", "AI again", evRecalled, evKept)); err != nil || !res.HumanOwned {
		t.Fatalf("re-upsert of a withdrawn draft: %+v %v", res, err)
	}
	if e, _ := s.GetEntry(ctx, ws, untouched); e.Title != "" || e.Status != EntryStatusHidden {
		t.Fatalf("withdrawn draft rewritten: %+v", e)
	}

	// A draft written after the recall (its synthesizer read the message before) is
	// withdrawn as it is written.
	late := mustDraft("fp-late", evRecalled)
	if e, _ := s.GetEntry(ctx, ws, late); e.Status != EntryStatusHidden || e.Title != "" || e.WithdrawnAt == nil {
		t.Fatalf("draft citing recalled evidence written after the recall: %+v", e)
	}

	// A human edit is the review: the flag goes, the text is the person's.
	e, err = s.HumanEditEntry(ctx, ws, human.ID, EntryPatch{Body: ptr("reviewed")})
	if err != nil || e.NeedsReviewAt != nil {
		t.Fatalf("after the review: %+v %v", e, err)
	}

	// Writing a summary clears the refresh marker.
	if _, err := s.PutAISummaryIfNotHuman(ctx, ws, "fresh summary", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if sum, _ := s.GetSummary(ctx, ws); sum.RefreshDueAt != nil || sum.Text != "fresh summary" {
		t.Fatalf("summary after the refresh: %+v", sum)
	}
}

// TestWorkspacesHoldingMessage (issue #29): every workspace holding any version of a
// Lark message is found, and only those.
func TestWorkspacesHoldingMessage(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	live := larkEvidence("ws-hold-b", "oc_h", "om_held", t0, "text")
	mustUpsert(t, s, live, larkEvidence("ws-hold-a", "oc_h", "om_held", t0, "text"),
		larkEvidence("ws-hold-c", "oc_h", "om_other", t0, "text"))
	mustUpsert(t, s, redacted(live, t0.Add(time.Minute)))
	tests := []struct {
		name string
		chat ids.ChatID
		msg  ids.MessageID
		want []ids.WorkspaceID
	}{
		{"held twice, once redacted", "oc_h", "om_held", []ids.WorkspaceID{"ws-hold-a", "ws-hold-b"}},
		{"held once", "oc_h", "om_other", []ids.WorkspaceID{"ws-hold-c"}},
		{"never held", "oc_h", "om_never", nil},
		{"another chat", "oc_x", "om_held", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.WorkspacesHoldingMessage(ctx, tc.chat, tc.msg)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
