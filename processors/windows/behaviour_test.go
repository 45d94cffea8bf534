package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/schemas"
)

func TestCloseOnWallClockAfterGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.evidence("om_b", t0.Add(2*time.Minute), "h2")
	h.evidence("om_a", t0.Add(1*time.Minute), "h1")

	h.scanAt(t0.Add(12 * time.Minute)) // window end + 2m: grace not over
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("closed before grace: %+v", got)
	}
	h.scanAt(t0.Add(13 * time.Minute)) // quiet chat: only the clock moved
	got := h.closedWindows()
	if len(got) != 1 {
		t.Fatalf("want one closed window, got %d", len(got))
	}
	w := got[0]
	if w.WorkspaceID != ws || w.ChatID != chat || !w.WindowStart.Equal(t0) || !w.WindowEnd.Equal(t0.Add(10*time.Minute)) ||
		w.ProcessorVersion != "v1" || w.Reason != ReasonGraceElapsed || w.EvidenceCount != 2 ||
		!w.ClosedAt.Equal(t0.Add(13*time.Minute)) ||
		w.EvidenceLowOffset != 0 || w.EvidenceEndOffset != 2 ||
		!w.FirstOccurredAt.Equal(t0.Add(time.Minute)) || !w.LastOccurredAt.Equal(t0.Add(2*time.Minute)) || w.Oversized {
		t.Fatalf("record fields: %+v", w)
	}
	// read back from the closed topic: the window is closed for good
	c := h.chatState()
	if c == nil || len(c.Open) != 0 || !c.isClosed(h.p.mach.index(t0.UnixMilli())) {
		t.Fatalf("chat state after read-back: %+v", c)
	}
	if v := testutil.ToFloat64(h.p.m.readBack.WithLabelValues("closed")); v != 1 {
		t.Fatalf("read back %v", v)
	}
	h.scanAt(t0.Add(20 * time.Minute))
	if again := h.closedWindows(); len(again) != 0 {
		t.Fatalf("window emitted twice: %+v", again)
	}
}

func TestRedeliveryAndVersions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.evidence("om_a", t0.Add(time.Minute), "h1")
	h.evidence("om_c", t0.Add(3*time.Minute), "h3")
	h.evidence("om_a", t0.Add(time.Minute), "h1-edited") // an edit is one more version
	h.evidence("om_b", t0.Add(2*time.Minute), "h2")      // out of order
	h.evidence("om_a", t0.Add(time.Minute), "hx", recalled)
	// a redelivered record (an offset already applied) changes nothing: replay the
	// first note as Goka would after a crash before the commit
	h.tt.Consume(h.p.graph.LoopStream().Topic(), "ws-1/oc_chat1", &loopMsg{Op: opNote, Offset: 0, Kind: kindEligible, At: t0.Add(time.Minute).UnixMilli()})
	h.scanAt(t0.Add(13 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 || got[0].EvidenceCount != 5 || got[0].EvidenceLowOffset != 0 || got[0].EvidenceEndOffset != 5 {
		t.Fatalf("want 1 window of 5 versions at [0,5), got %+v", got)
	}
	for out, want := range map[string]float64{outOpened: 1, outAdded: 3, outRecalled: 1, outDuplicate: 1} {
		if v := testutil.ToFloat64(h.p.m.evidence.WithLabelValues(out)); v != want {
			t.Errorf("%s = %v, want %v", out, v, want)
		}
	}
}

func TestIneligibleAndLoneRecallOpenNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.evidence("om_bot", t0.Add(time.Minute), "hb", func(e *schemas.EvidenceRecord) {
		e.SynthesisEligible, e.IneligibleReason = false, "own_app"
	})
	h.evidence("om_gone", t0.Add(2*time.Minute), "hg", recalled)
	h.scanAt(t0.Add(24 * time.Hour))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("ineligible evidence or a lone recall opened a window: %+v", got)
	}
	// only the chain of the run's notes is kept (D28)
	if v := h.chatState(); v != nil && (len(v.Open) != 0 || v.anyClosed() || len(v.Held) != 0 || v.Run == 0) {
		t.Fatalf("chat state beyond the note chain for a chat without windows: %+v", v)
	}
	if v := testutil.ToFloat64(h.p.m.evidence.WithLabelValues(outRecallUnopened)); v != 1 {
		t.Fatalf("recall_unopened %v", v)
	}
}

func TestOldestFirstUnderSteadyTraffic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// evidence in three consecutive windows, delivered newest first
	h.evidence("om_3", t0.Add(25*time.Minute), "h3")
	h.evidence("om_2", t0.Add(15*time.Minute), "h2")
	h.evidence("om_1", t0.Add(5*time.Minute), "h1")
	// steady traffic in the newest window keeps arriving; the oldest closes on time
	for i := range 50 {
		h.evidence(fmt.Sprintf("om_t%02d", i), t0.Add(26*time.Minute), fmt.Sprintf("t%d", i))
	}
	if due := h.p.untilNextDue(); due != 13*time.Minute {
		t.Fatalf("watcher not told the oldest window's due time: %v", due)
	}
	h.scanAt(t0.Add(13 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 || !got[0].WindowStart.Equal(t0) {
		t.Fatalf("oldest window not closed on time: %+v", got)
	}
	h.scanAt(t0.Add(40 * time.Minute))
	got = h.closedWindows()
	if len(got) != 2 || !got[0].WindowStart.Equal(t0.Add(10*time.Minute)) || !got[1].WindowStart.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("want the two remaining windows oldest first, got %+v", got)
	}
	if got[1].EvidenceCount != 51 {
		t.Fatalf("newest window versions %d", got[1].EvidenceCount)
	}
}

func TestLateEvidenceNeverReopens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.evidence("om_a", t0.Add(time.Minute), "h1")
	h.scanAt(t0.Add(13 * time.Minute))
	if n := len(h.closedWindows()); n != 1 {
		t.Fatalf("want 1 closed, got %d", n)
	}
	h.evidence("om_late", t0.Add(2*time.Minute), "hl")
	h.evidence("om_a", t0.Add(time.Minute), "h1-edited")
	h.evidence("om_a", t0.Add(time.Minute), "h1-gone", recalled)
	h.scanAt(t0.Add(30 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("late evidence reopened or re-emitted the window: %+v", got)
	}
	if e, r := testutil.ToFloat64(h.p.m.late.WithLabelValues(outLateEdit)), testutil.ToFloat64(h.p.m.late.WithLabelValues(outLateRecall)); e != 2 || r != 1 {
		t.Fatalf("late edits %v recalls %v, want 2 and 1", e, r)
	}
	if closed, closing := testutil.ToFloat64(h.p.m.lateEdits.WithLabelValues(lateClosed)),
		testutil.ToFloat64(h.p.m.lateEdits.WithLabelValues(lateClosing)); closed != 2 || closing != 0 {
		t.Fatalf("late edits by reason: window_closed %v, window_closing %v; want 2 and 0", closed, closing)
	}
	// the closed mark goes after retention; the chain of the run's notes stays (D28)
	h.scanAt(t0.Add(10*time.Minute + 72*time.Hour + 700*time.Minute))
	if v := h.chatState(); v != nil && (len(v.Open) != 0 || v.anyClosed() || len(v.Held) != 0 || v.Run == 0) {
		t.Fatalf("state kept past retention: %+v", v)
	}
}

func TestCoverageGatingAndBarrier(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.RequireCoverage = true })
	h.evidence("om_a", t0.Add(time.Minute), "h1")    // offset 0
	h.evidence("om_b", t0.Add(11*time.Minute), "h2") // offset 1
	h.scanAt(t0.Add(30 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("closed without history coverage: %+v", got)
	}
	h.checkpoint(t0.Add(9*time.Minute), 0) // not yet the window end
	h.scanAt(t0.Add(31 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("closed with partial coverage: %+v", got)
	}
	// covers the first window, but names evidence at offset 2 the chat has not applied
	h.checkpoint(t0.Add(10*time.Minute), 3)
	h.scanAt(t0.Add(32 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("closed before the barrier's evidence was applied: %+v", got)
	}
	if v := testutil.ToFloat64(h.p.m.barrierHeld); v != 1 {
		t.Fatalf("barrier held %v", v)
	}
	h.evidence("om_c", t0.Add(5*time.Minute), "h3") // offset 2: the barrier's evidence
	h.scanAt(t0.Add(33 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 || !got[0].WindowStart.Equal(t0) || got[0].Reason != ReasonGraceElapsedCovered || got[0].EvidenceCount != 2 {
		t.Fatalf("want first window (with the recovered message) closed on coverage, got %+v", got)
	}
	h.checkpoint(t0.Add(5*time.Minute), 0) // an older checkpoint never moves coverage back
	h.checkpoint(t0.Add(25*time.Minute), 0)
	h.scanAt(t0.Add(34 * time.Minute))
	got = h.closedWindows()
	if len(got) != 1 || !got[0].WindowStart.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("want second window, got %+v", got)
	}
}

func TestBadInputIsDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.RequireCoverage = true })
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_bad", []byte("not avro"))
	unknown := []byte{0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0}     // a schema nobody knows
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_unknown", unknown) // …parked, not dropped
	good, _ := h.opts.Codecs.Evidence.Encode(context.Background(), evidenceRecord("om_k", t0, "k"))
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_other", good) // key does not match the value
	h.tt.Consume(h.evTopic, "garbage-key", []byte("x"))     // no chat in the key
	h.tt.Consume(h.opts.CheckpointTopic, "ws-1/oc_chat1", []byte("not a checkpoint"))
	h.evidence("om_ok", t0.Add(time.Minute), "h1") // the processor keeps going
	h.checkpoint(t0.Add(time.Hour), 0)
	h.scanAt(t0.Add(13 * time.Minute))
	var reasons []string
	for _, r := range h.dead.all() {
		d, err := h.opts.Codecs.DeadLetter.Decode(context.Background(), r.value)
		if err != nil {
			t.Fatalf("dead letter: %v", err)
		}
		// Evidence records are parked by reference (their text stays in the evidence
		// topic, issue #19); others keep their value.
		if string(d.Key) != r.key || d.Stage != "windows" || d.Offset < 0 ||
			(d.Topic == h.evTopic) != (len(d.Value) == 0) {
			t.Fatalf("dead letter of %s: %+v", d.Topic, d)
		}
		reasons = append(reasons, d.Topic+":"+d.Reason)
	}
	if len(reasons) != 5 || reasons[2] != "evidence:key_mismatch" || reasons[4][:12] != "checkpoints:" {
		t.Fatalf("dead-lettered %v, want 5 (the third a key mismatch, the last the checkpoint)", reasons)
	}
	if got := h.closedWindows(); len(got) != 1 || got[0].EvidenceCount != 1 || got[0].EvidenceLowOffset != 4 {
		t.Fatalf("good evidence lost after bad input: %+v", got)
	}
}

func TestDeadLetterOutageFailsTheProcessor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.dead.err = errors.New("broker down")
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_bad", []byte("not avro"))
	h.p.failedMu.Lock()
	err := h.p.failed
	h.p.failedMu.Unlock()
	if err == nil {
		t.Fatal("a dead letter that could not be parked did not fail the processor")
	}
	h.calls.mu.Lock()
	h.calls.calls = nil // the failed callback stopped before its produce, by design
	h.calls.mu.Unlock()
	h.failureExpected.Store(true)
}

func TestAgedOutEvidenceIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.clock.Set(t0.Add(100 * time.Hour))
	h.evidence("om_old", t0, "h")
	h.scanAt(t0.Add(100 * time.Hour))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("aged-out evidence formed a window: %+v", got)
	}
	if v := testutil.ToFloat64(h.p.m.evidence.WithLabelValues(outAgedOut)); v != 1 {
		t.Fatalf("aged_out %v", v)
	}
}

// A window above the bound is flagged, never failed; bound 0 never flags.
func TestOversizedWindowIsFlaggedNotFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bound   int
		flagged bool
	}{{bound: 20, flagged: true}, {bound: 0, flagged: false}} {
		t.Run(fmt.Sprint(tc.bound), func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.OversizedVersions = new(tc.bound) })
			for i := range 30 {
				h.evidence(fmt.Sprintf("om_%03d", i), t0.Add(time.Duration(i)*time.Second), fmt.Sprint(i))
			}
			h.scanAt(t0.Add(13 * time.Minute))
			got := h.closedWindows()
			if len(got) != 1 || got[0].Oversized != tc.flagged || got[0].EvidenceCount != 30 {
				t.Fatalf("want one record of 30 versions, flagged %v, got %+v", tc.flagged, got)
			}
			if v := testutil.ToFloat64(h.p.m.oversized); v != map[bool]float64{true: 1}[tc.flagged] {
				t.Fatalf("oversized counted %v times, flagged %v", v, tc.flagged)
			}
		})
	}
}

func TestVersionedGroupsAndForeignRecords(t *testing.T) {
	t.Parallel()
	if GroupName("", "v2") != "larkline-windows-v2" || GroupName("staging", "v2") != "staging-windows-v2" {
		t.Fatalf("group %s / %s", GroupName("", "v2"), GroupName("staging", "v2"))
	}
	h := newHarness(t, func(o *Options) { o.ProcessorVersion = "v2" })
	// another version's record for the same chat and window is not this version's close
	foreign, err := h.opts.Codecs.ClosedWindow.Encode(context.Background(), schemas.ClosedWindow{
		WorkspaceID: ws, ChatID: chat, WindowStart: t0, WindowEnd: t0.Add(10 * time.Minute), ProcessorVersion: "v1",
		EvidenceCount: 1, ClosedAt: t0, Reason: ReasonGraceElapsed, EvidenceLowOffset: 0, EvidenceEndOffset: 1,
		FirstOccurredAt: t0, LastOccurredAt: t0,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.evidence("om_a", t0, "h1")
	h.tt.Consume(h.opts.ClosedTopic, "ws-1/oc_chat1", foreign)
	h.closedWindows() // the foreign record itself
	h.scanAt(t0.Add(13 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 || got[0].ProcessorVersion != "v2" {
		t.Fatalf("versioned record %+v", got)
	}
	if v := testutil.ToFloat64(h.p.m.readBack.WithLabelValues("foreign")); v != 1 {
		t.Fatalf("foreign %v", v)
	}
}

func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	base := func() Options {
		return Options{ProcessorVersion: "v1", EvidenceTopic: "e", ClosedTopic: "c", DeadLetterTopic: "d",
			Window: 10 * time.Minute, Grace: 3 * time.Minute, Retention: 72 * time.Hour, ScanInterval: time.Minute,
			Codecs: mustCodecs(t), DeadLetters: &fakeDead{}, inlineEmit: true}
	}
	tests := []struct {
		name   string
		mutate func(*Options)
	}{
		{"bad version", func(o *Options) { o.ProcessorVersion = "v/1" }},
		{"window not dividing an hour", func(o *Options) { o.Window = 7 * time.Minute }},
		{"grace not shorter than window", func(o *Options) { o.Grace = 10 * time.Minute }},
		{"coverage without topic", func(o *Options) { o.RequireCoverage = true }},
		{"no codecs", func(o *Options) { o.Codecs = nil }},
		{"no scan interval", func(o *Options) { o.ScanInterval = 0 }},
		{"negative re-emit interval", func(o *Options) { o.ReemitAfter = -time.Second }},
		{"negative oversized bound", func(o *Options) { o.OversizedVersions = new(-1) }},
		{"retention shorter than a window", func(o *Options) { o.Retention = time.Minute }},
		{"no client options for the publisher", func(o *Options) { o.inlineEmit = false }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.mutate(&o)
			if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("want ErrInvalidOptions, got %v", err)
			}
		})
	}
}

func TestWakeupCoalescesAndDrops(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.p.Wakeup() // watcher not running
	if v := testutil.ToFloat64(h.p.m.wakeups.WithLabelValues("dropped")); v != 1 {
		t.Fatalf("dropped %v", v)
	}
	h.p.running.Store(true)
	h.p.Wakeup()
	h.p.Wakeup()
	if s, c := testutil.ToFloat64(h.p.m.wakeups.WithLabelValues("sent")), testutil.ToFloat64(h.p.m.wakeups.WithLabelValues("coalesced")); s != 1 || c != 1 {
		t.Fatalf("sent %v coalesced %v", s, c)
	}
}

func TestStateCodec(t *testing.T) {
	t.Parallel()
	c := &chatValue{Applied: 42, Run: 1<<63 + 5, RunNext: 40, CoveredUntil: t0.UnixMilli(), Held: []heldCoverage{{Until: 5, End: 7}},
		Open: []window{
			{Start: t0.UnixMilli(), Status: statusClosing, Versions: 3, Low: 10, High: 30, FirstAt: t0.UnixMilli() + 5, LastAt: t0.UnixMilli() + 9,
				FirstSeen: 99, ClosedAt: 100, Covered: true, EmittedAt: 101, Oversized: true},
			{Start: t0.UnixMilli() + 600_000, Status: statusOpen, Versions: 1, Low: 31, High: 31, FirstAt: t0.UnixMilli() + 600_001, LastAt: t0.UnixMilli() + 600_001},
		}}
	c.markClosed(-3)
	c.markClosed(1000)
	b := encodeChat(c)
	got, err := decodeChat(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, c)
	}
	if !got.isClosed(-3) || !got.isClosed(1000) || got.isClosed(999) || got.closedCount() != 2 {
		t.Fatalf("bitmap %+v", got)
	}
	for _, bad := range [][]byte{nil, {formatCurrent}, {9, tagChat}, b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		if _, err := decodeChat(bad); !errors.Is(err, ErrStateFormat) {
			t.Errorf("decode %x: %v, want ErrStateFormat", bad, err)
		}
	}
	// a state format this binary does not read is refused with a clear error
	if _, err := decodeChat([]byte{3, 1, 0}); !errors.Is(err, ErrStateFormat) || !strings.Contains(err.Error(), "replay under a new processor version") {
		t.Fatalf("state format 3: %v, want ErrStateFormat saying what to do", err)
	}
	for _, m := range []loopMsg{{Op: opNote, Offset: 7, Run: 1<<64 - 1, After: 3, Kind: kindRecall, At: -5}, {Op: opClose, Start: 600_000, Decided: 900_000}, {Op: opTidy}} {
		got, err := decodeLoop(encodeLoop(&m))
		if err != nil || *got != m {
			t.Fatalf("loop round trip %+v: %+v %v", m, got, err)
		}
	}
}

// TestTwoDecisionsOneRecord: two scans decide to close the same window before the
// first decision is applied; the window is announced (and emitted) once.
func TestTwoDecisionsOneRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.evidence("om_a", t0.Add(time.Minute), "h1")
	h.clock.Set(t0.Add(13 * time.Minute))
	for range 2 {
		if err := h.p.ScanOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	h.tt.Catchup()
	if got := h.closedWindows(); len(got) != 1 {
		t.Fatalf("two decisions emitted %d records, want 1", len(got))
	}
}
