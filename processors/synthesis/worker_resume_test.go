package synthesis

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// resumeLines is a window of 5 incident messages (the only ones the rule synthesizer
// finds timeline-worthy) followed by 75 routine ones: with 20 evidence per chunk, only
// the first of its four chunks writes drafts.
func resumeLines() []line {
	lines := slices.Clone(incidentLines)
	for i := range 75 {
		lines = append(lines, line{id: fmt.Sprintf("r%03d", i), at: 5*time.Minute + time.Duration(i)*3*time.Second,
			sender: "Bob", text: fmt.Sprintf("routine status %d", i)})
	}
	return lines
}

// chunkScript is a synthesizer that records every request by its first primary
// evidence id (a chunk's identity) and runs act before delegating: act may fail the
// call or block it until ctx ends.
type chunkScript struct {
	next synth.Synthesizer
	act  func(ctx context.Context, n int) error

	mu    sync.Mutex
	calls []int64 // first primary evidence id of each call
}

func (c *chunkScript) Synthesize(ctx context.Context, req synth.Request) (synth.Result, error) {
	p, _ := primaryIDs(req)
	c.mu.Lock()
	c.calls = append(c.calls, slices.Min(p))
	n := len(c.calls)
	c.mu.Unlock()
	if c.act != nil {
		if err := c.act(ctx, n); err != nil {
			return synth.Result{Synthesizer: "script"}, err
		}
	}
	return c.next.Synthesize(ctx, req)
}

// asked counts the calls per chunk, in the order chunks were first asked.
func (c *chunkScript) asked() (order []int64, times map[int64]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	times = map[int64]int{}
	for _, id := range c.calls {
		if times[id] == 0 {
			order = append(order, id)
		}
		times[id]++
	}
	return order, times
}

// TestResumeAtNextUndoneChunk: an attempt that ends in its third chunk — refused by the
// model (a counted failure), by a model outage (refunded), or by the worker's
// shutdown (refunded) — is resumed by the next claim at that chunk: every committed
// chunk is asked of the model exactly once, the chunk in flight once more. The window
// still knows its first chunk's drafts: it completes (not ignored, though its last
// chunks write none) and gets its one summary attempt.
func TestResumeAtNextUndoneChunk(t *testing.T) {
	for _, tc := range []struct {
		name     string
		act      func(ctx context.Context, n int) error
		shutdown bool // the third call blocks; the worker is stopped and another started
		attempts int  // counted attempts when the window completes
		refunded int
	}{
		{name: "model refused the chunk", attempts: 2, act: func(_ context.Context, n int) error {
			if n == 3 {
				return fmt.Errorf("fake endpoint: 400 bad request")
			}
			return nil
		}},
		{name: "model outage", attempts: 1, refunded: 1, act: func(_ context.Context, n int) error {
			if n == 3 {
				return fmt.Errorf("fake endpoint: %w", synth.ErrUnavailable)
			}
			return nil
		}},
		{name: "shutdown", attempts: 1, refunded: 1, shutdown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			rows := e.seed(win, resumeLines()...)
			script := &chunkScript{act: tc.act}
			o := e.options()
			script.next, o.Synthesizer = o.Synthesizer, script
			summaries := &countingSummarizer{next: o.Summarizer}
			o.Summarizer = summaries
			o.EvidenceBatchLimit, o.ChunkRetries, o.MaxContextMessages = 20, new(0), new(0)
			if tc.shutdown {
				blocked := make(chan struct{})
				script.act = func(ctx context.Context, n int) error {
					if n == 3 {
						close(blocked)
						<-ctx.Done()
						return ctx.Err()
					}
					return nil
				}
				o1 := o
				o1.DrainTimeout = 100 * time.Millisecond
				first := e.start(o1)
				e.produce(e.closedWindow(win, rows))
				select {
				case <-blocked:
				case <-time.After(waitFor):
					t.Fatal("the third chunk was never asked")
				}
				first.stop(t)
				st, err := e.st.GetWindow(context.Background(), e.key(win))
				if err != nil || st.Status != store.WindowFailed || st.Meta.ChunkCount != 2 || st.Attempts != 0 {
					t.Fatalf("window after the shutdown: %s, %d chunks, attempt %d, %v; want failed (released, refunded) after 2 chunks",
						st.Status, st.Meta.ChunkCount, st.Attempts, err)
				}
				if got := first.counter("larkline_synthesis_attempts_refunded_total"); got != 1 {
					t.Errorf("refunds of the shut-down worker = %v, want 1", got)
				}
				e.start(o) // the same group: the uncommitted record comes again
			} else {
				e.start(o)
				e.produce(e.closedWindow(win, rows))
			}
			st := e.waitState(win, "the window to finish", terminal)

			order, times := script.asked()
			if len(order) != 4 {
				t.Fatalf("%d distinct chunks asked, want 4: %v", len(order), times)
			}
			for i, id := range order {
				want := 1
				if i == 2 {
					want = 2 // the chunk in flight when the attempt ended
				}
				if times[id] != want {
					t.Errorf("chunk %d (first evidence %d) asked %d times, want %d", i, id, times[id], want)
				}
			}
			var primary []store.Evidence
			for _, r := range rows {
				if r.SynthesisEligible {
					primary = append(primary, r)
				}
			}
			if st.Status != store.WindowCompleted || st.Attempts != tc.attempts || st.Meta.RefundedAttempts != tc.refunded ||
				st.Meta.ChunkCount != 4 || st.Meta.EvidenceCount != len(primary) || st.AggregateHash != AggregateHash(primary) {
				t.Fatalf("window %s attempt %d (%d refunded), %d chunks, %d evidence, aggregate %s; want completed at %d (%d refunded), 4 chunks, %d evidence, %s",
					st.Status, st.Attempts, st.Meta.RefundedAttempts, st.Meta.ChunkCount, st.Meta.EvidenceCount, st.AggregateHash,
					tc.attempts, tc.refunded, len(primary), AggregateHash(primary))
			}
			// The precondition that makes "completed" mean something: every draft cites
			// the first chunk only, so the resumed attempt wrote none itself.
			first := map[int64]bool{}
			for _, r := range primary[:20] {
				first[r.ID] = true
			}
			entries := e.entries()
			if len(entries) == 0 {
				t.Fatal("no entries")
			}
			for _, en := range entries {
				for _, id := range en.EvidenceIDs {
					if !first[id] {
						t.Fatalf("entry %d cites evidence %d outside the first chunk", en.ID, id)
					}
				}
			}
			eventually(t, "the window's summary attempt", func() bool {
				w, err := e.st.GetWindow(context.Background(), e.key(win))
				return err == nil && w.Meta.SummaryAttempted && summaries.count() == 1
			})
		})
	}
}

// TestHeartbeatKeepsALongAttempt: a chunk that runs longer than StaleTimeout does not
// make its window stale while its worker lives: the heartbeat (every StaleTimeout/3)
// keeps the claim fresh, so a second worker sweeping for stale windows all along never
// takes it over, and the window completes at attempt 1.
func TestHeartbeatKeepsALongAttempt(t *testing.T) {
	e := newEnv(t)
	rows := e.seed(win, incidentLines...)
	o := e.options()
	// heartbeats every second; the chunk takes 5.5 s
	o.StaleTimeout, o.ChunkTimeout, o.ChunkRetries = 3*time.Second, 6*time.Second, new(0)
	started := make(chan struct{}, 1)
	const hold = 5500 * time.Millisecond
	o.Synthesizer = slow{next: o.Synthesizer, hold: hold, started: started}
	holder := e.start(o)

	sweeper := e.options()
	sweeper.Topic = e.newTopic(t) // no record: only its sweep could find the window
	sweeper.Group = e.group + "-sweeper"
	sweeper.StaleTimeout, sweeper.ScanInterval = o.StaleTimeout, 100*time.Millisecond
	sweeper.ChunkTimeout, sweeper.ChunkRetries = 500*time.Millisecond, new(0)
	sw := e.start(sweeper)

	e.produce(e.closedWindow(win, rows))
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("the chunk never started")
	}
	st := e.waitState(win, "the window to finish", terminal)
	if st.Status != store.WindowCompleted || st.Attempts != 1 {
		t.Fatalf("window %s at attempt %d, want completed at attempt 1 (never taken over)", st.Status, st.Attempts)
	}
	if got := sw.counter("larkline_synthesis_claims_total", "outcome", "taken_over"); got != 0 {
		t.Errorf("the sweeper took the live window over %v times", got)
	}
	if got := holder.counter("larkline_synthesis_heartbeats_total", "outcome", "ok"); got < 4 {
		t.Errorf("heartbeats = %v, want at least 2 during a %s chunk", got, hold)
	}
}
