package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
)

// TestIntegrationRecallShownInTheAPI (issue #19 item 3, decisions D12): after a recall
// the timeline no longer shows the withdrawn AI draft, shows the person's entry citing
// the message with needs_review, and the summary answers with no text and refresh_due;
// the person's edit clears the flag.
func TestIntegrationRecallShownInTheAPI(t *testing.T) {
	t.Parallel()
	st := newRealStore(t)
	ctx := context.Background()
	mustWorkspace(t, st, wsA)
	msg := message{id: "om_r1", sender: "ou_a", senderName: "Alice", text: "rolling back v42", at: t0}
	ev := mustEvidence(t, st, wsA, msg)
	res, err := st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: wsA, Fingerprint: "fp-r", EntryContent: store.EntryContent{
		OccurredAt: t0, Kind: "mitigation", Title: "Rolled back v42", Body: "AI body", EvidenceIDs: ev,
	}})
	if err != nil {
		t.Fatal(err)
	}
	human, err := st.CreateHumanEntry(ctx, store.HumanEntry{Workspace: wsA, OccurredAt: t0.Add(time.Minute), Kind: "note",
		Title: "Alice rolled back", EvidenceIDs: ev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutAISummaryIfNotHuman(ctx, wsA, "Rolled back v42.", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	msg.recalled, msg.text = true, ""
	mustEvidence(t, st, wsA, msg)

	c, _ := serve(t, st, nil)
	var tl timelineJSON
	c.do(http.MethodGet, "/api/v1/workspaces/"+string(wsA)+"/timeline", tokA, "").decode(t, &tl)
	if len(tl.Entries) != 1 || tl.Entries[0].ID != human.ID || !tl.Entries[0].NeedsReview || tl.Entries[0].NeedsReviewAt == nil ||
		tl.Entries[0].Title != "Alice rolled back" || tl.Entries[0].Withdrawn {
		t.Fatalf("timeline after the recall: %+v (want only the person's entry, flagged)", tl.Entries)
	}
	var sum summaryJSON
	c.do(http.MethodGet, "/api/v1/workspaces/"+string(wsA)+"/summary", tokA, "").decode(t, &sum)
	if sum.Text != "" || !sum.RefreshDue {
		t.Fatalf("summary after the recall: %+v", sum)
	}
	e, err := st.GetEntry(ctx, wsA, res.ID)
	if err != nil || e.WithdrawnAt == nil || !toEntryJSON(&e).Withdrawn || toEntryJSON(&e).Title != "" {
		t.Fatalf("the withdrawn draft: %+v %v", e, err)
	}

	r := c.do(http.MethodPatch, fmt.Sprintf("/api/v1/workspaces/%s/timeline/%d", wsA, human.ID), tokA, `{"status":"confirmed"}`)
	var after entryJSON
	r.decode(t, &after)
	if r.status != http.StatusOK || after.NeedsReview {
		t.Fatalf("after the person's edit: %d %+v", r.status, after)
	}
}
