package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestRecallWithdrawsDraftsThroughTheSink (issue #19 item 3, decisions D12): a recall
// read from the evidence topic withdraws the untouched AI draft citing the message,
// flags the person's entry citing it, and empties the AI summary, in the transaction
// that redacts the evidence; a retention redaction of another message changes no entry.
// The sink that applied them is killed before it commits its offsets, and its
// successor, which gets the recall again (unchanged), finds the work done.
func TestRecallWithdrawsDraftsThroughTheSink(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := context.Background()
	group := uniqueGroup(t)
	const ws ids.WorkspaceID = "ws-sink-recall"
	const chat ids.ChatID = "oc_recall"
	orig := evidenceOf(ws, chat, "om_recalled", "we roll back v42 now", t0)
	kept := evidenceOf(ws, chat, "om_kept", "latency is back to normal", t0)
	aged := evidenceOf(ws, chat, "om_aged", "an old message", t0)

	first := start(t, e.options(group, e.st), hooks{})
	e.produce(t, e.record(t, orig), e.record(t, kept), e.record(t, aged))
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	first.shutdown(t)
	rows := e.rows(t)
	evRecalled, evKept, evAged := rows[rowKey(orig)].ID, rows[rowKey(kept)].ID, rows[rowKey(aged)].ID

	newDraft := func(fp string, ev ...int64) int64 {
		t.Helper()
		res, err := e.st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: ws, Fingerprint: fp, EntryContent: store.EntryContent{
			OccurredAt: t0, Kind: "mitigation", Title: "Rolled back v42 (" + fp + ")", Body: "derived from the chat",
			EvidenceIDs: ev,
		}})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	draft := newDraft("fp-draft", evRecalled, evKept)
	agedDraft := newDraft("fp-aged", evAged)
	human, err := e.st.CreateHumanEntry(ctx, store.HumanEntry{Workspace: ws, OccurredAt: t0, Kind: "note",
		Title: "A person's note", Body: "their words", EvidenceIDs: []int64{evRecalled}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PutAISummaryIfNotHuman(ctx, ws, "We rolled back v42.", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}

	// Retention's redacted version of om_aged, as processors/retention publishes it, and
	// the recall of om_recalled.
	retention := recalled(aged, t0)
	retention.ActorDisplayName, retention.IngestPath = "", schemas.IngestManual
	retention.MetadataJSON = fmt.Sprintf(`{"chat_id":%q,"message_type":"text","deleted":true,"retention":true}`, chat)
	recall := recalled(orig, t0.Add(time.Hour))
	e.produce(t, e.record(t, retention), e.record(t, recall))

	killed := start(t, e.options(group, e.st), hooks{afterWrite: func(context.Context, []*kgo.Record) error { return errKilled }})
	if err := killed.wait(t); !errors.Is(err, errKilled) {
		t.Fatalf("Run = %v, want the failpoint's error", err)
	}
	killed.err = nil // expected
	killed.s.Close()
	if got := e.rows(t)[rowKey(orig)]; !got.Deleted || got.Content != "" {
		t.Fatalf("the killed sink did not redact the recalled message: %+v", got)
	}
	checkRecallApplied(t, e.st, ws, draft, agedDraft, human.ID)

	restarted := start(t, e.options(group, e.st), hooks{})
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	if got := restarted.outcome(outcomeUnchanged); got < 2 {
		t.Fatalf("restarted sink saw %d unchanged records, want the 2 redelivered", got)
	}
	checkRecallApplied(t, e.st, ws, draft, agedDraft, human.ID)
}

func checkRecallApplied(t *testing.T, st *store.Store, ws ids.WorkspaceID, draft, agedDraft, human int64) {
	t.Helper()
	ctx := context.Background()
	d, err := st.GetEntry(ctx, ws, draft)
	if err != nil || d.Status != store.EntryStatusHidden || d.Title != "" || d.Body != "" || d.WithdrawnAt == nil {
		t.Fatalf("the draft citing the recalled message was not withdrawn: %+v %v", d, err)
	}
	h, err := st.GetEntry(ctx, ws, human)
	if err != nil || h.Title != "A person's note" || h.Body != "their words" || h.Status != store.EntryStatusConfirmed ||
		h.NeedsReviewAt == nil {
		t.Fatalf("the person's entry citing the recalled message: %+v %v (want its text kept and a review flag)", h, err)
	}
	a, err := st.GetEntry(ctx, ws, agedDraft)
	if err != nil || a.Status != store.EntryStatusDraft || a.Title == "" || a.WithdrawnAt != nil || a.NeedsReviewAt != nil {
		t.Fatalf("retention's redaction changed a draft: %+v %v", a, err)
	}
	sum, err := st.GetSummary(ctx, ws)
	if err != nil || sum.Text != "" || sum.RefreshDueAt == nil {
		t.Fatalf("the AI summary after the recall: %+v %v (want no text and a refresh due)", sum, err)
	}
}
