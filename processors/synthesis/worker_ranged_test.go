package synthesis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// fakeSinkProgress is a controllable SinkProgress.
type fakeSinkProgress struct {
	mu        sync.Mutex
	committed map[int32]int64
	calls     int
}

func (f *fakeSinkProgress) Committed(_ context.Context, partition int32) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if o, ok := f.committed[partition]; ok {
		return o, nil
	}
	return -1, nil
}

func (f *fakeSinkProgress) set(partition int32, o int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.committed == nil {
		f.committed = map[int32]int64{}
	}
	f.committed[partition] = o
}

func (f *fakeSinkProgress) callCount() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

// rangedWindow is the version 3 record of a window whose evidence is the offsets
// [low, end) of evidence partition 2.
func (e *env) rangedWindow(start time.Time, versions int, low, end int64) schemas.ClosedWindow {
	return schemas.ClosedWindow{WorkspaceID: e.ws, ChatID: e.chat, WindowStart: start, WindowEnd: start.Add(winLen),
		ProcessorVersion: ids.DefaultProcessorVersion, ClosedAt: start.Add(winLen + 3*time.Minute), Reason: schemas.CloseReasonGraceElapsed,
		EvidenceCount: versions, EvidencePartition: 2, EvidenceLowOffset: low, EvidenceEndOffset: end,
		FirstOccurredAt: start, LastOccurredAt: start.Add(4 * time.Minute)}
}

// TestRangedWindowWaitsForTheSink: a version 3 window is not claimed until the
// evidence sink has committed its range's end on the evidence partition; a sink that
// is behind past EvidenceWait is counted, spends no attempt, and the window completes
// once the sink catches up.
func TestRangedWindowWaitsForTheSink(t *testing.T) {
	e := newEnv(t)
	e.seed(win, incidentLines...)
	sink := &fakeSinkProgress{}
	sink.set(2, 40) // behind the window's end (57)
	o := e.options()
	o.SinkProgress = sink
	o.EvidenceWait = 300 * time.Millisecond
	r := e.start(o)
	e.produce(e.rangedWindow(win, len(incidentLines), 50, 57))

	eventually(t, "the wait for the sink to be counted past EvidenceWait", func() bool {
		return r.counter("larkline_synthesis_sink_wait_timeouts_total") >= 1
	})
	if _, err := e.st.GetWindow(context.Background(), e.key(win)); err == nil {
		t.Fatal("the window was claimed before the sink stored its evidence range")
	}
	sink.set(2, 57)
	st := e.waitState(win, "the window to complete", terminal)
	if st.Status != store.WindowCompleted || st.Attempts != 1 || st.Meta.EvidenceCount != len(incidentLines) {
		t.Fatalf("window %s at attempt %d with %d evidence, want completed at attempt 1 with %d", st.Status, st.Attempts,
			st.Meta.EvidenceCount, len(incidentLines))
	}
	if n := len(e.entries()); n == 0 {
		t.Fatal("no draft entries from the ranged window")
	}
	if sink.callCount() == 0 {
		t.Fatal("sink progress never read")
	}
}

// TestRangedWindowReadsTheMessagesItsRecordNames: a version 3 window reads the
// messages first carried below its end offset, not a message that reached the chat's
// partition after the window closed (a late message inside its time range), nor does
// a stale-sweep takeover, which has no record and reads the bound from the window
// state.
func TestRangedWindowReadsTheMessagesItsRecordNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rows := make([]store.Evidence, 0, len(incidentLines)+1)
	for i, l := range incidentLines {
		r := e.evidence(win, l)
		r.Offset, r.HasOffset = int64(50+i), true // offsets 50..54, below the end 57
		rows = append(rows, r)
	}
	late := e.evidence(win, line{id: "late", at: 3 * time.Minute, sender: "Carol",
		text: "We decided to fail over payments-db to the replica. Carol owns it."})
	late.Offset, late.HasOffset = 80, true // after the window closed
	rows = append(rows, late)
	if _, err := e.st.UpsertEvidence(ctx, rows); err != nil {
		t.Fatal(err)
	}
	lateRow, err := e.st.EvidenceByKeys(ctx, e.ws, store.LarkMessageEvidence, []string{late.SourceKey})
	if err != nil || len(lateRow) != 1 {
		t.Fatalf("late row: %v %v", lateRow, err)
	}

	o1 := e.options()
	claimed := make(chan struct{}, 1)
	o1.afterClaim = func(context.Context, store.WindowState) error { claimed <- struct{}{}; return errCrash }
	w1 := e.start(o1)
	e.produce(e.rangedWindow(win, len(incidentLines), 50, 57))
	select {
	case <-claimed:
	case <-time.After(waitFor):
		t.Fatal("the window was never claimed")
	}
	w1.stop(t)
	if st, err := e.st.GetWindow(ctx, e.key(win)); err != nil || st.Meta.BelowOffset != 57 {
		t.Fatalf("claimed window's evidence bound: %d (%v), want 57", st.Meta.BelowOffset, err)
	}

	// only the sweep of a worker on another topic can finish it
	o2 := e.options()
	o2.Topic, o2.Group = e.newTopic(t), e.group+"-sweeper"
	o2.StaleTimeout, o2.ScanInterval = 3*time.Second, 200*time.Millisecond
	w2 := e.start(o2)
	st := e.waitState(win, "the sweep to finish the window", terminal)
	if st.Status != store.WindowCompleted || st.Meta.EvidenceCount != len(incidentLines) {
		t.Fatalf("window %s with %d evidence, want completed with the %d messages its record names", st.Status, st.Meta.EvidenceCount, len(incidentLines))
	}
	if got := w2.counter("larkline_synthesis_claims_total", "outcome", "taken_over"); got != 1 {
		t.Errorf("takeovers = %v, want 1", got)
	}
	for _, en := range e.entries() {
		for _, id := range en.EvidenceIDs {
			if id == lateRow[0].ID {
				t.Fatalf("entry %d cites the message that arrived after the window closed", en.ID)
			}
		}
	}
}
