package synthesis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// TestOffsetsCommittedOnlyAfterTerminal: two windows of one chat (one partition). The
// first completes; the worker dies while the second is processing. The committed
// offset covers the first window only. A restarted worker (same group) does not see
// the first window again, and takes the second over once it is stale and completes it.
func TestOffsetsCommittedOnlyAfterTerminal(t *testing.T) {
	e := newEnv(t)
	second := win.Add(winLen)
	rowsA := e.seed(win, incidentLines...)
	var linesB []line
	for _, l := range incidentLines[3:] {
		l.id = "b" + l.id // messages of their own
		linesB = append(linesB, l)
	}
	rowsB := e.seed(second, linesB...)

	o1 := e.options()
	claimedB := make(chan struct{}, 1)
	o1.afterClaim = func(_ context.Context, st store.WindowState) error {
		if st.Key.Start.Equal(second) {
			claimedB <- struct{}{}
			return errCrash
		}
		return nil
	}
	w1 := e.start(o1)
	offs := e.produce(e.closedWindow(win, rowsA), e.closedWindow(second, rowsB))
	select {
	case <-claimedB:
	case <-time.After(waitFor):
		t.Fatal("window B was never claimed")
	}
	if st := e.waitState(win, "window A to finish", terminal); st.Status != store.WindowCompleted {
		t.Fatalf("window A %s", st.Status)
	}
	eventually(t, "window A's offset commit", func() bool { return e.committed() == offs[0]+1 })
	w1.stop(t)
	if c := e.committed(); c != offs[0]+1 {
		t.Fatalf("committed offset %d after stop, want %d: window B is not terminal", c, offs[0]+1)
	}
	if st, err := e.st.GetWindow(context.Background(), e.key(second)); err != nil || st.Status != store.WindowProcessing {
		t.Fatalf("window B = %+v, %v; want processing", st, err)
	}

	o2 := e.options()
	o2.StaleTimeout, o2.ScanInterval = 3*time.Second, time.Hour // only the record can bring window B back
	o2.ChunkTimeout, o2.ChunkRetries = 500*time.Millisecond, new(0)
	rec := &recorder{next: o2.Synthesizer}
	o2.Synthesizer = rec
	w2 := e.start(o2)
	st := e.waitState(second, "window B to be taken over and finish", terminal)
	if st.Attempts != 2 {
		t.Errorf("window B finished at attempt %d, want 2", st.Attempts)
	}
	eventually(t, "window B's offset commit", func() bool { return e.committed() == offs[1]+1 })
	for _, req := range rec.requests() {
		if req.WindowStart.Equal(win) {
			t.Fatal("the restarted worker synthesized the completed window A again")
		}
	}
	if got := w2.counter("larkline_synthesis_windows_total", "outcome", outcomeSkippedDone); got != 0 {
		t.Errorf("the restarted worker saw the committed window A again (%v skipped_done)", got)
	}
	if got := w2.counter("larkline_synthesis_claims_total", "outcome", "taken_over"); got != 1 {
		t.Errorf("takeovers = %v, want 1", got)
	}
	if got := w2.counter("larkline_synthesis_claims_total", "outcome", "busy"); got < 1 {
		t.Errorf("busy claims = %v: the record should have waited for the stale window", got)
	}
}

// slow is a synthesizer that signals each call and then waits: for hold, or, with
// hold zero, until its context ends.
type slow struct {
	next    synth.Synthesizer
	hold    time.Duration
	started chan struct{}
}

func (s slow) Synthesize(ctx context.Context, req synth.Request) (synth.Result, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	if s.hold == 0 {
		<-ctx.Done()
		return synth.Result{}, ctx.Err()
	}
	select {
	case <-time.After(s.hold):
	case <-ctx.Done():
		return synth.Result{}, ctx.Err()
	}
	return s.next.Synthesize(ctx, req)
}

// TestShutdownDrains: Close lets a window in progress finish within DrainTimeout and
// commits it; a window still running when the drain ends is released (failed with its
// attempt refunded: shutdown is not the window's failure; retried by its next owner at
// once) and its record is not committed.
func TestShutdownDrains(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hold     time.Duration
		drain    time.Duration
		status   store.WindowStatus
		attempts int // attempts counted against MaxAttempts
		refunded int
	}{
		{name: "finishes within the drain", hold: 300 * time.Millisecond, drain: waitFor, status: store.WindowCompleted, attempts: 1},
		{name: "released after the drain", hold: 0, drain: 200 * time.Millisecond, status: store.WindowFailed, refunded: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			rows := e.seed(win, incidentLines...)
			o := e.options()
			started := make(chan struct{}, 1)
			o.Synthesizer = slow{next: o.Synthesizer, hold: tc.hold, started: started}
			o.DrainTimeout = tc.drain
			r := e.start(o)
			off := e.produce(e.closedWindow(win, rows))[0]
			select {
			case <-started:
			case <-time.After(waitFor):
				t.Fatal("synthesis never started")
			}
			r.stop(t)
			st, err := e.st.GetWindow(context.Background(), e.key(win))
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != tc.status || st.Attempts != tc.attempts || st.Meta.RefundedAttempts != tc.refunded {
				t.Fatalf("window %s at attempt %d (%d refunded), want %s at %d (%d refunded)",
					st.Status, st.Attempts, st.Meta.RefundedAttempts, tc.status, tc.attempts, tc.refunded)
			}
			committed := e.committed()
			switch tc.status {
			case store.WindowCompleted:
				if committed != off+1 {
					t.Errorf("committed offset %d, want %d", committed, off+1)
				}
			default:
				if committed > off {
					t.Errorf("the interrupted window's record was committed (%d)", committed)
				}
				if !strings.Contains(st.Meta.Error, "interrupted") {
					t.Errorf("diagnostics %q", st.Meta.Error)
				}
			}
		})
	}
}
