package windows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/ids"
	"github.com/larkline/larkline/schemas"
)

// checkpointBehind publishes a checkpoint covering until whose evidence barrier is
// end (one past the highest evidence offset the reconciler produced before it).
func (h *harness) checkpointBehind(until time.Time, end int64) {
	h.t.Helper()
	b, err := h.opts.Codecs.Checkpoint.Encode(context.Background(), schemas.CollectionCheckpoint{
		WorkspaceID: ws, ChatID: chat, CoveredUntil: until, UpdatedAt: until, ReconcileVersion: "test",
		EvidenceEndOffset: end,
	})
	if err != nil {
		h.t.Fatalf("encode checkpoint: %v", err)
	}
	h.tt.Consume(h.opts.CheckpointTopic, ids.ChatKey(ws, chat), b)
}

// nextEvidenceOffset is the offset the next evidence record gets (the tester's
// topics have one partition, 0).
func (h *harness) nextEvidenceOffset() int64 {
	return h.tt.NewQueueTracker(h.evTopic).Hwm()
}

func (h *harness) barrierHeld() float64 { return testutil.ToFloat64(h.p.m.barrierHeld) }

// TestEvidenceBarrier: a checkpoint's coverage counts only once the processor has
// processed the evidence the reconciler produced before it, in this life or (the
// group's committed offset) an earlier one.
func TestEvidenceBarrier(t *testing.T) {
	coverage := func(o *Options) { o.RequireCoverage = true }

	t.Run("checkpoint before its evidence holds the window", func(t *testing.T) {
		h := newHarness(t, coverage)
		h.clock.Set(t0.Add(30 * time.Minute))
		h.evidence("om_a", t0.Add(time.Minute), "a")
		// Reconciliation recovered om_b (a missed message) and published the
		// checkpoint; the checkpoint topic is read first.
		end := h.nextEvidenceOffset() + 1
		h.checkpointBehind(t0.Add(10*time.Minute), end)
		if got := h.closedWindows(); len(got) != 0 {
			t.Fatalf("closed before the evidence behind the checkpoint: %v", msgIDs(got[0], "a", "b"))
		}
		h.scanAt(t0.Add(31 * time.Minute))
		if got := h.closedWindows(); len(got) != 0 {
			t.Fatalf("scan closed a held window: %v", msgIDs(got[0], "a", "b"))
		}
		if v := h.barrierHeld(); v != 1 {
			t.Fatalf("windows held by the barrier %v, want 1", v)
		}
		h.evidence("om_b", t0.Add(2*time.Minute), "b") // offset end-1: the barrier is met
		h.scanAt(t0.Add(32 * time.Minute))
		got := h.closedWindows()
		if len(got) != 1 || got[0].Reason != ReasonGraceElapsedCovered {
			t.Fatalf("want the window closed after its evidence, got %d records", len(got))
		}
		if ev := fmt.Sprint(msgIDs(got[0], "a", "b")); ev != "[om_a:a om_b:b]" {
			t.Fatalf("closed window evidence %s, want both messages", ev)
		}
		if v := h.barrierHeld(); v != 0 {
			t.Fatalf("windows held by the barrier %v after release", v)
		}
	})

	t.Run("the next checkpoint releases met coverage", func(t *testing.T) {
		h := newHarness(t, coverage)
		h.clock.Set(t0.Add(30 * time.Minute))
		h.evidence("om_a", t0.Add(time.Minute), "a")
		h.checkpointBehind(t0.Add(10*time.Minute), h.nextEvidenceOffset()+1)
		h.evidence("om_b", t0.Add(2*time.Minute), "b")
		// no scan: the next checkpoint finds the barrier met
		h.checkpointBehind(t0.Add(11*time.Minute), h.nextEvidenceOffset())
		if got := h.closedWindows(); len(got) != 1 || len(got[0].Evidence) != 2 {
			t.Fatalf("want the window closed with both messages, got %+v", got)
		}
	})

	t.Run("a later checkpoint without barrier does not bypass an earlier one", func(t *testing.T) {
		h := newHarness(t, coverage)
		h.clock.Set(t0.Add(30 * time.Minute))
		h.evidence("om_a", t0.Add(time.Minute), "a")
		h.checkpointBehind(t0.Add(10*time.Minute), h.nextEvidenceOffset()+1)
		h.checkpointBehind(t0.Add(20*time.Minute), 0) // a restarted reconciler knows no offset
		h.scanAt(t0.Add(31 * time.Minute))
		if got := h.closedWindows(); len(got) != 0 {
			t.Fatalf("closed past an unmet barrier: %+v", got)
		}
		h.evidence("om_b", t0.Add(2*time.Minute), "b")
		h.scanAt(t0.Add(32 * time.Minute))
		if got := h.closedWindows(); len(got) != 1 || len(got[0].Evidence) != 2 {
			t.Fatalf("want the window closed with both messages, got %+v", got)
		}
	})

	t.Run("restart where the committed offset meets the barrier", func(t *testing.T) {
		h := newHarness(t, coverage)
		h.clock.Set(t0.Add(30 * time.Minute))
		h.evidence("om_a", t0.Add(time.Minute), "a")
		// An earlier life processed evidence up to offset 6 of partition 0; this life
		// has not seen those records and will not see them again.
		const end = 7
		h.checkpointBehind(t0.Add(10*time.Minute), end)
		h.offsets.set(0, end-1) // committed: offsets up to end-2 processed
		h.scanAt(t0.Add(31 * time.Minute))
		if got := h.closedWindows(); len(got) != 0 {
			t.Fatalf("closed with the committed offset short of the barrier: %+v", got)
		}
		if h.offsets.callCount() != 1 || h.offsets.group != string(GroupName("", "v1")) || h.offsets.topic != h.evTopic {
			t.Fatalf("committed offsets read %d times for group %q topic %q", h.offsets.callCount(), h.offsets.group, h.offsets.topic)
		}
		h.offsets.set(0, end)
		h.scanAt(t0.Add(32 * time.Minute)) // within the scan interval: not read again
		if got := h.closedWindows(); len(got) != 0 || h.offsets.callCount() != 1 {
			t.Fatalf("committed offsets read again within the scan interval (%d reads, %d closed)", h.offsets.callCount(), len(got))
		}
		h.scanAt(t0.Add(32*time.Minute + h.opts.ScanInterval))
		got := h.closedWindows()
		if len(got) != 1 || len(got[0].Evidence) != 1 {
			t.Fatalf("want the window closed once the committed offset meets the barrier, got %+v", got)
		}
		if v := testutil.ToFloat64(h.p.m.committedFetches.WithLabelValues("ok")); v != 2 {
			t.Fatalf("committed offset reads %v, want 2", v)
		}
	})

	t.Run("committed offsets are read only while a barrier waits", func(t *testing.T) {
		h := newHarness(t, coverage)
		h.clock.Set(t0.Add(30 * time.Minute))
		h.evidence("om_a", t0.Add(time.Minute), "a")
		h.checkpointBehind(t0.Add(10*time.Minute), h.nextEvidenceOffset()) // met already
		if got := h.closedWindows(); len(got) != 1 {
			t.Fatalf("want the window closed at once, got %d", len(got))
		}
		h.scanAt(t0.Add(31 * time.Minute))
		if n := h.offsets.callCount(); n != 0 {
			t.Fatalf("committed offsets read %d times with nothing held", n)
		}
	})

	t.Run("a failed read keeps the window held", func(t *testing.T) {
		h := newHarness(t, coverage)
		h.clock.Set(t0.Add(30 * time.Minute))
		h.evidence("om_a", t0.Add(time.Minute), "a")
		h.checkpointBehind(t0.Add(10*time.Minute), 9)
		h.offsets.set(0, 9)
		h.offsets.err = errors.New("broker unreachable")
		h.scanAt(t0.Add(31 * time.Minute))
		if got := h.closedWindows(); len(got) != 0 {
			t.Fatalf("closed on a failed read: %+v", got)
		}
		if v := testutil.ToFloat64(h.p.m.committedFetches.WithLabelValues("error")); v != 1 {
			t.Fatalf("failed reads %v, want 1", v)
		}
		h.offsets.mu.Lock()
		h.offsets.err = nil
		h.offsets.mu.Unlock()
		h.scanAt(t0.Add(31*time.Minute + h.opts.ScanInterval))
		if got := h.closedWindows(); len(got) != 1 {
			t.Fatalf("want the window closed after a good read, got %d", len(got))
		}
	})
}

func TestHeldCoverage(t *testing.T) {
	met := func(upTo int64) func(int64) bool { return func(end int64) bool { return end <= upTo } }
	tests := []struct {
		name        string
		offers      [][2]int64 // (until, end)
		processed   int64
		wantCovered int64
		wantHeld    []heldCoverage
	}{
		{"no barrier counts at once", [][2]int64{{10, 0}}, 0, 10, nil},
		{"unmet barrier holds", [][2]int64{{10, 5}}, 4, 0, []heldCoverage{{10, 5}}},
		{"met barrier releases", [][2]int64{{10, 5}}, 5, 10, nil},
		{"released oldest first", [][2]int64{{10, 5}, {20, 8}}, 6, 10, []heldCoverage{{20, 8}}},
		{"later barrier includes the earlier", [][2]int64{{10, 5}, {20, 0}}, 4, 0, []heldCoverage{{20, 5}}},
		{"older coverage ignored", [][2]int64{{20, 5}, {10, 9}}, 4, 0, []heldCoverage{{20, 5}}},
		{"bounded: merged into the last", func() [][2]int64 {
			var o [][2]int64
			for i := range maxHeldCoverage + 3 {
				o = append(o, [2]int64{int64(10 * (i + 1)), int64(i + 1)})
			}
			return o
		}(), 0, 0, func() []heldCoverage {
			var h []heldCoverage
			for i := range maxHeldCoverage - 1 {
				h = append(h, heldCoverage{int64(10 * (i + 1)), int64(i + 1)})
			}
			return append(h, heldCoverage{10 * (maxHeldCoverage + 3), maxHeldCoverage + 3})
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &chatState{}
			for _, o := range tt.offers {
				c.offer(o[0], o[1])
			}
			held := c.release(met(tt.processed))
			if c.CoveredUntil != tt.wantCovered || fmt.Sprint(c.Held) != fmt.Sprint(tt.wantHeld) || held != (len(tt.wantHeld) > 0) {
				t.Fatalf("covered %d held %v (%v), want %d %v", c.CoveredUntil, c.Held, held, tt.wantCovered, tt.wantHeld)
			}
		})
	}
}

// TestVersionOrdering: a window keeps the newest version of each message by the
// evidence table's version rule, whatever order the versions arrive in, paged or not.
func TestVersionOrdering(t *testing.T) {
	at := t0.Add(time.Minute)
	version := func(upd time.Duration, deleted bool) func(*schemas.EvidenceRecord) {
		return func(e *schemas.EvidenceRecord) {
			e.SourceUpdatedAt = at.Add(upd)
			if deleted {
				e.Deleted, e.Content, e.SynthesisEligible = true, "", false
			}
		}
	}
	type arrival struct {
		label   string
		upd     time.Duration
		deleted bool
	}
	tests := []struct {
		name     string
		arrivals []arrival
		want     string
		// unpagedOnly: a paged window logs a recall it cannot tell from the recall of a
		// message it never held (which an unpaged window ignores), and such an entry
		// yields to the live version that follows it, as in an unpaged window. The
		// window then names a version the store ranks lower than its deletion, which
		// the synthesis evidence wait accepts.
		unpagedOnly bool
	}{
		{"newer then older (redelivered original)", []arrival{{"edit", time.Minute, false}, {"orig", 0, false}}, "edit", false},
		{"older then newer", []arrival{{"orig", 0, false}, {"edit", time.Minute, false}}, "edit", false},
		{"recall then an older live version", []arrival{{"orig", 0, false}, {"gone", time.Minute, true}, {"orig", 0, false}}, "gone", true},
		{"recall then a later live version", []arrival{{"orig", 0, false}, {"gone", time.Minute, true}, {"edit", 2 * time.Minute, false}}, "gone", true},
		{"equal rank: the later arrival", []arrival{{"orig", 0, false}, {"other", 0, false}}, "other", false},
	}
	for _, paged := range []bool{false, true} {
		for _, tt := range tests {
			if paged && tt.unpagedOnly {
				continue
			}
			t.Run(fmt.Sprintf("%s paged=%v", tt.name, paged), func(t *testing.T) {
				h := newHarness(t, func(o *Options) {
					if paged {
						o.pageSize = 2
					}
				})
				if paged { // fill and seal pages so the message's versions are resolved at close
					for i := range 5 {
						h.evidence(fmt.Sprintf("om_f%d", i), t0.Add(2*time.Minute), fmt.Sprintf("f%d", i))
					}
				}
				for _, a := range tt.arrivals {
					h.evidence("om_m", at, a.label, version(a.upd, a.deleted))
				}
				h.scanAt(t0.Add(13 * time.Minute))
				got := h.closedWindows()
				if len(got) != 1 {
					t.Fatalf("want one window, got %d", len(got))
				}
				var m *schemas.WindowEvidence
				for i := range got[0].Evidence {
					if got[0].Evidence[i].MessageID == "om_m" {
						m = &got[0].Evidence[i]
					}
				}
				if m == nil {
					t.Fatalf("om_m not in the closed window")
				}
				if m.ContentHash != hashOf(tt.want) {
					t.Fatalf("closed window names %s, want %s", msgIDs(got[0], "orig", "edit", "gone", "other"), tt.want)
				}
				var want arrival
				for _, a := range tt.arrivals {
					if a.label == tt.want {
						want = a
					}
				}
				if rank, known := m.Rank(); !known || !rank.SourceUpdatedAt.Equal(at.Add(want.upd)) || rank.Deleted != want.deleted {
					t.Fatalf("closed window rank %+v (known %v), want updated %s deleted %v", rank, known, at.Add(want.upd), want.deleted)
				}
			})
		}
	}
}
