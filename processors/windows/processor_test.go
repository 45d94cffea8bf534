package windows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/ids"
)

// fakeClock is a controllable wall clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// jsonWire is a test wire format; the Avro wire is exercised by the integration tests.
type jsonWire struct{}

type wireEvidence struct {
	Evidence
	Bad bool
}

func (jsonWire) DecodeEvidence(key string, v []byte) (Evidence, error) {
	var e wireEvidence
	if err := json.Unmarshal(v, &e); err != nil {
		return Evidence{}, err
	}
	if e.Bad {
		return Evidence{}, errors.New("unknown schema fingerprint 0x1234")
	}
	return e.Evidence, nil
}
func (jsonWire) DecodeCheckpoint(key string, v []byte) (Checkpoint, error) {
	var c Checkpoint
	err := json.Unmarshal(v, &c)
	return c, err
}
func (jsonWire) EncodeClosedWindow(w ClosedWindow) ([]byte, error) { return json.Marshal(w) }
func (jsonWire) EncodeDeadLetter(d DeadLetter) ([]byte, error) {
	return json.Marshal(map[string]any{"reason": d.Reason, "err": d.Err.Error(), "key": string(d.Key)})
}

const (
	ws   = ids.WorkspaceID("ws-1")
	chat = ids.ChatID("oc_chat1")
)

var t0 = time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC) // a window boundary

type harness struct {
	t       *testing.T
	tt      *tester.Tester
	p       *Processor
	clock   *fakeClock
	closed  *tester.QueueTracker
	dead    *tester.QueueTracker
	reg     *prometheus.Registry
	opts    Options
	evTopic string
}

func newHarness(t *testing.T, mutate func(*Options)) *harness {
	t.Helper()
	tt := tester.New(t)
	clock := &fakeClock{now: t0}
	reg := prometheus.NewRegistry()
	o := Options{
		Brokers:          []string{"unused"},
		ProcessorVersion: "v1",
		EvidenceTopic:    "evidence",
		CheckpointTopic:  "checkpoints",
		ClosedTopic:      "closed",
		DeadLetterTopic:  "dead",
		Window:           10 * time.Minute,
		Grace:            3 * time.Minute,
		Retention:        72 * time.Hour,
		ScanInterval:     time.Hour, // tests drive scans by hand
		Wire:             jsonWire{},
		Clock:            clock.Now,
		Registry:         reg,
		Goka:             []goka.ProcessorOption{goka.WithTester(tt)},
	}
	if mutate != nil {
		mutate(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.proc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("processor run: %v", err)
		}
	})
	return &harness{t: t, tt: tt, p: p, clock: clock, reg: reg, opts: o, evTopic: o.EvidenceTopic,
		closed: tt.NewQueueTracker(o.ClosedTopic), dead: tt.NewQueueTracker(o.DeadLetterTopic)}
}

func (h *harness) evidence(msg string, at time.Time, hash string, mods ...func(*wireEvidence)) {
	h.t.Helper()
	e := wireEvidence{Evidence: Evidence{Workspace: ws, Chat: chat, Message: ids.MessageID(msg),
		OccurredAt: at, ContentHash: hash, SynthesisEligible: true}}
	for _, m := range mods {
		m(&e)
	}
	b, _ := json.Marshal(e)
	h.tt.Consume(h.evTopic, ids.EvidenceKey(ws, chat, ids.MessageID(msg)), b)
}

func (h *harness) checkpoint(until time.Time) {
	h.t.Helper()
	b, _ := json.Marshal(Checkpoint{Workspace: ws, Chat: chat, CoveredUntil: until})
	h.tt.Consume(h.opts.CheckpointTopic, ids.ChatKey(ws, chat), b)
}

func (h *harness) scanAt(now time.Time) {
	h.t.Helper()
	h.clock.Set(now)
	if err := h.p.ScanOnce(context.Background()); err != nil {
		h.t.Fatalf("scan: %v", err)
	}
	h.tt.Catchup()
}

func (h *harness) closedWindows() []ClosedWindow {
	h.t.Helper()
	var out []ClosedWindow
	for {
		_, v, ok := h.closed.Next()
		if !ok {
			return out
		}
		var w ClosedWindow
		if err := json.Unmarshal(v.([]byte), &w); err != nil {
			h.t.Fatalf("closed record: %v", err)
		}
		out = append(out, w)
	}
}

func msgIDs(w ClosedWindow) []string {
	out := make([]string, len(w.Evidence))
	for i, e := range w.Evidence {
		out[i] = fmt.Sprintf("%s:%s", e.Message, e.ContentHash)
	}
	return out
}

func TestWindowMath(t *testing.T) {
	tests := []struct {
		name   string
		length time.Duration
		at     time.Time
		want   string
	}{
		{"utc boundary", 10 * time.Minute, t0, "ws-1/oc_chat1/window/2026-11-30T02:00:00Z"},
		{"last ms of window", 10 * time.Minute, t0.Add(10*time.Minute - time.Millisecond), "ws-1/oc_chat1/window/2026-11-30T02:00:00Z"},
		{"next window", 10 * time.Minute, t0.Add(10 * time.Minute), "ws-1/oc_chat1/window/2026-11-30T02:10:00Z"},
		{"non-UTC input", 10 * time.Minute, t0.Add(7 * time.Minute).In(time.FixedZone("CST", 8*3600)), "ws-1/oc_chat1/window/2026-11-30T02:00:00Z"},
		{"15 minute windows", 15 * time.Minute, t0.Add(29 * time.Minute), "ws-1/oc_chat1/window/2026-11-30T02:15:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := windowKey(ids.ChatKey(ws, chat), ids.WindowStart(tt.at, tt.length))
			if got != tt.want {
				t.Fatalf("got %s want %s", got, tt.want)
			}
			ck, start, ok := splitWindowKey(got)
			if !ok || ck != ids.ChatKey(ws, chat) || !start.Equal(ids.WindowStart(tt.at, tt.length)) {
				t.Fatalf("split %q: %q %v %v", got, ck, start, ok)
			}
			if string(ids.PartitionKey([]byte(got))) != ids.ChatKey(ws, chat) {
				t.Fatalf("window key does not hash with its chat")
			}
		})
	}
}

func TestCloseOnWallClockAfterGrace(t *testing.T) {
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
	if w.Workspace != ws || w.Chat != chat || !w.Start.Equal(t0) || !w.End.Equal(t0.Add(10*time.Minute)) ||
		w.ProcessorVersion != "v1" || w.Reason != ReasonGraceElapsed {
		t.Fatalf("record fields: %+v", w)
	}
	if fmt.Sprint(msgIDs(w)) != "[om_a:h1 om_b:h2]" {
		t.Fatalf("evidence not ordered by occurred_at: %v", msgIDs(w))
	}
	if w.Evidence[0].Key != "ws-1/oc_chat1/om_a" {
		t.Fatalf("evidence key %q", w.Evidence[0].Key)
	}
	if w.AggregateHash != aggregateHash(ids.ChatKey(ws, chat), []msgRef{{ID: "om_a", Hash: "h1"}, {ID: "om_b", Hash: "h2"}}) {
		t.Fatalf("aggregate hash mismatch")
	}
	h.scanAt(t0.Add(20 * time.Minute))
	if again := h.closedWindows(); len(again) != 0 {
		t.Fatalf("window emitted twice: %+v", again)
	}
}

func TestDedupEditsAndDeliveryOrder(t *testing.T) {
	h := newHarness(t, nil)
	h.evidence("om_a", t0.Add(time.Minute), "h1")
	h.evidence("om_a", t0.Add(time.Minute), "h1") // redelivery: nothing changes
	h.evidence("om_c", t0.Add(3*time.Minute), "h3")
	h.evidence("om_a", t0.Add(time.Minute), "h1-edited") // edit updates the aggregate
	h.evidence("om_b", t0.Add(2*time.Minute), "h2")      // out of order
	h.evidence("om_x", t0.Add(4*time.Minute), "hx", func(e *wireEvidence) { e.Deleted = true })
	h.scanAt(t0.Add(13 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 {
		t.Fatalf("want 1 window, got %d", len(got))
	}
	if fmt.Sprint(msgIDs(got[0])) != "[om_a:h1-edited om_b:h2 om_c:h3]" {
		t.Fatalf("evidence %v", msgIDs(got[0]))
	}
	if v := testutil.ToFloat64(h.p.m.evidence.WithLabelValues("duplicate")); v != 1 {
		t.Fatalf("duplicate count %v", v)
	}
	if v := testutil.ToFloat64(h.p.m.evidence.WithLabelValues("updated")); v != 1 {
		t.Fatalf("updated count %v", v)
	}
	if v := testutil.ToFloat64(h.p.m.evidence.WithLabelValues("deleted_unseen")); v != 1 {
		t.Fatalf("deleted_unseen count %v", v)
	}
}

func TestEmptyAndIneligibleCreateNoWindow(t *testing.T) {
	h := newHarness(t, nil)
	h.evidence("om_bot", t0.Add(time.Minute), "hb", func(e *wireEvidence) { e.SynthesisEligible = false })
	h.scanAt(t0.Add(24 * time.Hour))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("ineligible evidence opened a window: %+v", got)
	}
	if v := h.tt.TableValue(goka.GroupTable(GroupName("v1")), windowKey(ids.ChatKey(ws, chat), t0)); v != nil {
		t.Fatalf("state exists for an empty window: %+v", v)
	}
	if v := h.tt.TableValue(goka.GroupTable(GroupName("v1")), ids.ChatKey(ws, chat)); v != nil {
		t.Fatalf("chat state exists for a chat without windows: %+v", v)
	}
}

func TestOldestFirstUnderSteadyTraffic(t *testing.T) {
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
	if len(got) != 1 || !got[0].Start.Equal(t0) {
		t.Fatalf("oldest window not closed on time: %+v", got)
	}
	h.scanAt(t0.Add(40 * time.Minute))
	got = h.closedWindows()
	if len(got) != 2 || !got[0].Start.Equal(t0.Add(10*time.Minute)) || !got[1].Start.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("want the two remaining windows oldest first, got %+v", got)
	}
}

func TestLateEvidenceNeverReopens(t *testing.T) {
	h := newHarness(t, nil)
	h.evidence("om_a", t0.Add(time.Minute), "h1")
	h.scanAt(t0.Add(13 * time.Minute))
	if n := len(h.closedWindows()); n != 1 {
		t.Fatalf("want 1 closed, got %d", n)
	}
	h.evidence("om_late", t0.Add(2*time.Minute), "hl")
	h.evidence("om_a", t0.Add(time.Minute), "h1-edited")
	h.scanAt(t0.Add(30 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("late evidence reopened the window: %+v", got)
	}
	if v := testutil.ToFloat64(h.p.m.late); v != 2 {
		t.Fatalf("late records %v, want 2", v)
	}
	v := h.tt.TableValue(goka.GroupTable(GroupName("v1")), windowKey(ids.ChatKey(ws, chat), t0)).(*tableValue)
	if v.Window.Late != 2 || len(v.Window.Msgs) != 0 || v.Window.Count != 1 {
		t.Fatalf("closed marker %+v", v.Window)
	}
	// the marker goes after retention; state is bounded by open windows
	h.scanAt(t0.Add(10*time.Minute + 72*time.Hour + time.Minute))
	if v := h.tt.TableValue(goka.GroupTable(GroupName("v1")), windowKey(ids.ChatKey(ws, chat), t0)); v != nil {
		t.Fatalf("marker kept past retention: %+v", v)
	}
}

func TestCoverageGating(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RequireCoverage = true })
	h.evidence("om_a", t0.Add(time.Minute), "h1")
	h.evidence("om_b", t0.Add(11*time.Minute), "h2")
	h.scanAt(t0.Add(30 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("closed without history coverage: %+v", got)
	}
	h.checkpoint(t0.Add(9 * time.Minute)) // not yet the window end
	h.scanAt(t0.Add(31 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("closed with partial coverage: %+v", got)
	}
	h.checkpoint(t0.Add(10 * time.Minute)) // covers the first window: it closes at once
	got := h.closedWindows()
	if len(got) != 1 || !got[0].Start.Equal(t0) || got[0].Reason != ReasonGraceElapsedCovered {
		t.Fatalf("want first window closed on coverage, got %+v", got)
	}
	h.checkpoint(t0.Add(5 * time.Minute)) // an older checkpoint never moves coverage back
	h.checkpoint(t0.Add(25 * time.Minute))
	got = h.closedWindows()
	if len(got) != 1 || !got[0].Start.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("want second window, got %+v", got)
	}
}

func TestBadInputIsDeadLettered(t *testing.T) {
	h := newHarness(t, nil)
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_bad", []byte("not json"))
	h.evidence("om_u", t0, "h", func(e *wireEvidence) { e.Bad = true })
	h.evidence("om_ok", t0.Add(time.Minute), "h1") // the processor keeps going
	h.scanAt(t0.Add(13 * time.Minute))
	var n int
	for {
		_, _, ok := h.dead.Next()
		if !ok {
			break
		}
		n++
	}
	if n != 2 {
		t.Fatalf("dead-lettered %d, want 2", n)
	}
	if got := h.closedWindows(); len(got) != 1 || len(got[0].Evidence) != 1 {
		t.Fatalf("good evidence lost after bad input: %+v", got)
	}
}

func TestAgedOutEvidenceIgnored(t *testing.T) {
	h := newHarness(t, nil)
	h.clock.Set(t0.Add(100 * time.Hour))
	h.evidence("om_old", t0, "h")
	h.scanAt(t0.Add(100 * time.Hour))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("aged-out evidence formed a window: %+v", got)
	}
	if v := testutil.ToFloat64(h.p.m.evidence.WithLabelValues("aged_out")); v != 1 {
		t.Fatalf("aged_out %v", v)
	}
}

func TestVersionedGroups(t *testing.T) {
	if GroupName("v2") != "larkline-windows-v2" {
		t.Fatalf("group %s", GroupName("v2"))
	}
	h := newHarness(t, func(o *Options) { o.ProcessorVersion = "v2" })
	h.evidence("om_a", t0, "h1")
	h.scanAt(t0.Add(13 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 || got[0].ProcessorVersion != "v2" {
		t.Fatalf("versioned record %+v", got)
	}
}

func TestOptionsValidation(t *testing.T) {
	base := func() Options {
		return Options{ProcessorVersion: "v1", EvidenceTopic: "e", ClosedTopic: "c", DeadLetterTopic: "d",
			Window: 10 * time.Minute, Grace: 3 * time.Minute, Retention: 72 * time.Hour, ScanInterval: time.Minute, Wire: jsonWire{}}
	}
	tests := []struct {
		name   string
		mutate func(*Options)
	}{
		{"bad version", func(o *Options) { o.ProcessorVersion = "v/1" }},
		{"window not dividing an hour", func(o *Options) { o.Window = 7 * time.Minute }},
		{"grace not shorter than window", func(o *Options) { o.Grace = 10 * time.Minute }},
		{"coverage without topic", func(o *Options) { o.RequireCoverage = true }},
		{"no wire", func(o *Options) { o.Wire = nil }},
		{"no scan interval", func(o *Options) { o.ScanInterval = 0 }},
		{"retention shorter than a window", func(o *Options) { o.Retention = time.Minute }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.mutate(&o)
			if _, err := New(o); !errors.Is(err, ErrOptions) {
				t.Fatalf("want ErrOptions, got %v", err)
			}
		})
	}
}

func TestWakeupCoalescesAndDrops(t *testing.T) {
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
