package windows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/larkline/larkline/schemas"
)

// fakeClock is a controllable wall clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

func mustCodecs(t testing.TB) *schemas.Codecs {
	t.Helper()
	c, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	ws   = ids.WorkspaceID("ws-1")
	chat = ids.ChatID("oc_chat1")
)

var t0 = time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC) // a window boundary

// fakeOffsets is a controllable CommittedOffsets.
type fakeOffsets struct {
	mu      sync.Mutex
	offsets map[int32]int64
	err     error
	calls   int
	group   string
	topic   string
}

func (f *fakeOffsets) CommittedOffsets(_ context.Context, group, topic string) (map[int32]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.group, f.topic = group, topic
	out := map[int32]int64{}
	for p, o := range f.offsets {
		out[p] = o
	}
	return out, f.err
}

func (f *fakeOffsets) set(partition int32, committed int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.offsets == nil {
		f.offsets = map[int32]int64{}
	}
	f.offsets[partition] = committed
}

func (f *fakeOffsets) callCount() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

type harness struct {
	t       *testing.T
	offsets *fakeOffsets
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
	offsets := &fakeOffsets{}
	o := Options{
		CommittedOffsets: offsets,
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
		Codecs:           mustCodecs(t),
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
	// Wait until the processor runs, so that stopping it at cleanup never races its
	// start-up (Goka reports a start-up cut short as an error).
	for deadline := time.Now().Add(30 * time.Second); !p.proc.Recovered(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("processor not running after 30s")
		}
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("processor run: %v", err)
		}
	})
	return &harness{t: t, offsets: offsets, tt: tt, p: p, clock: clock, reg: reg, opts: o, evTopic: o.EvidenceTopic,
		closed: tt.NewQueueTracker(o.ClosedTopic), dead: tt.NewQueueTracker(o.DeadLetterTopic)}
}

// hashOf makes a valid content hash from a short test label.
func hashOf(label string) string {
	s := sha256.Sum256([]byte(label))
	return hex.EncodeToString(s[:])
}

func evidenceRecord(msg string, at time.Time, label string) schemas.EvidenceRecord {
	m := ids.MessageID(msg)
	return schemas.EvidenceRecord{
		WorkspaceID: ws, ChatID: chat, MessageID: m,
		Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage, SourceKey: ids.MessageSourceKey(chat, m),
		OccurredAt: at, SourceUpdatedAt: at, ObservedAt: at, ActorID: "ou_user", MessageType: "text",
		Content: "text of " + label, ContentHash: hashOf(label), SynthesisEligible: true,
		MetadataJSON: "{}", IngestPath: schemas.IngestEvent,
	}
}

func (h *harness) evidence(msg string, at time.Time, label string, mods ...func(*schemas.EvidenceRecord)) {
	h.t.Helper()
	e := evidenceRecord(msg, at, label)
	for _, m := range mods {
		m(&e)
	}
	b, err := h.opts.Codecs.Evidence.Encode(context.Background(), e)
	if err != nil {
		h.t.Fatalf("encode evidence: %v", err)
	}
	h.tt.Consume(h.evTopic, e.Key(), b)
}

func (h *harness) checkpoint(until time.Time) {
	h.t.Helper()
	b, err := h.opts.Codecs.Checkpoint.Encode(context.Background(), schemas.CollectionCheckpoint{
		WorkspaceID: ws, ChatID: chat, CoveredUntil: until, CursorCreateTimeMS: until.UnixMilli() - 1,
		CursorMessageID: "om_cursor", UpdatedAt: until, ReconcileVersion: "test",
	})
	if err != nil {
		h.t.Fatalf("encode checkpoint: %v", err)
	}
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

func (h *harness) closedWindows() []schemas.ClosedWindow {
	h.t.Helper()
	var out []schemas.ClosedWindow
	for {
		k, v, ok := h.closed.Next()
		if !ok {
			return out
		}
		w, err := h.opts.Codecs.ClosedWindow.Decode(context.Background(), v.([]byte))
		if err != nil {
			h.t.Fatalf("closed record: %v", err)
		}
		if k != w.Key() {
			h.t.Fatalf("closed record key %q, want %q", k, w.Key())
		}
		out = append(out, w)
	}
}

// msgIDs lists a closed window's evidence as message:label, checking each hash.
func msgIDs(w schemas.ClosedWindow, labels ...string) []string {
	byHash := map[string]string{}
	for _, l := range labels {
		byHash[hashOf(l)] = l
	}
	out := make([]string, len(w.Evidence))
	for i, e := range w.Evidence {
		l, ok := byHash[e.ContentHash]
		if !ok {
			l = "?" + e.ContentHash[:8]
		}
		out[i] = fmt.Sprintf("%s:%s", e.MessageID, l)
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
	if w.WorkspaceID != ws || w.ChatID != chat || !w.WindowStart.Equal(t0) || !w.WindowEnd.Equal(t0.Add(10*time.Minute)) ||
		w.ProcessorVersion != "v1" || w.Reason != ReasonGraceElapsed || w.EvidenceCount != 2 ||
		!w.ClosedAt.Equal(t0.Add(13*time.Minute)) {
		t.Fatalf("record fields: %+v", w)
	}
	if fmt.Sprint(msgIDs(w, "h1", "h2")) != "[om_a:h1 om_b:h2]" {
		t.Fatalf("evidence not ordered by occurred_at: %v", msgIDs(w, "h1", "h2"))
	}
	if w.Evidence[0].Key != "ws-1/oc_chat1/om_a" {
		t.Fatalf("evidence key %q", w.Evidence[0].Key)
	}
	if w.AggregateHash != schemas.WindowAggregateHash(w.Evidence) {
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
	h.evidence("om_x", t0.Add(4*time.Minute), "hx", func(e *schemas.EvidenceRecord) {
		e.Deleted, e.Content, e.SynthesisEligible = true, "", false
	})
	h.scanAt(t0.Add(13 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 {
		t.Fatalf("want 1 window, got %d", len(got))
	}
	if got := fmt.Sprint(msgIDs(got[0], "h1-edited", "h2", "h3")); got != "[om_a:h1-edited om_b:h2 om_c:h3]" {
		t.Fatalf("evidence %v", got)
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
	h.evidence("om_bot", t0.Add(time.Minute), "hb", func(e *schemas.EvidenceRecord) {
		e.SynthesisEligible, e.IneligibleReason = false, "own_app"
	})
	h.scanAt(t0.Add(24 * time.Hour))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("ineligible evidence opened a window: %+v", got)
	}
	if v := h.tt.TableValue(goka.GroupTable(GroupName("", "v1")), windowKey(ids.ChatKey(ws, chat), t0)); v != nil {
		t.Fatalf("state exists for an empty window: %+v", v)
	}
	if v := h.tt.TableValue(goka.GroupTable(GroupName("", "v1")), ids.ChatKey(ws, chat)); v != nil {
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
	if len(got) != 1 || !got[0].WindowStart.Equal(t0) {
		t.Fatalf("oldest window not closed on time: %+v", got)
	}
	h.scanAt(t0.Add(40 * time.Minute))
	got = h.closedWindows()
	if len(got) != 2 || !got[0].WindowStart.Equal(t0.Add(10*time.Minute)) || !got[1].WindowStart.Equal(t0.Add(20*time.Minute)) {
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
	v := h.tt.TableValue(goka.GroupTable(GroupName("", "v1")), windowKey(ids.ChatKey(ws, chat), t0)).(*tableValue)
	if v.Window.Late != 2 || len(v.Window.Msgs) != 0 || v.Window.Count != 1 {
		t.Fatalf("closed marker %+v", v.Window)
	}
	// the marker goes after retention; state is bounded by open windows
	h.scanAt(t0.Add(10*time.Minute + 72*time.Hour + time.Minute))
	if v := h.tt.TableValue(goka.GroupTable(GroupName("", "v1")), windowKey(ids.ChatKey(ws, chat), t0)); v != nil {
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
	if len(got) != 1 || !got[0].WindowStart.Equal(t0) || got[0].Reason != ReasonGraceElapsedCovered {
		t.Fatalf("want first window closed on coverage, got %+v", got)
	}
	h.checkpoint(t0.Add(5 * time.Minute)) // an older checkpoint never moves coverage back
	h.checkpoint(t0.Add(25 * time.Minute))
	got = h.closedWindows()
	if len(got) != 1 || !got[0].WindowStart.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("want second window, got %+v", got)
	}
}

func TestBadInputIsDeadLettered(t *testing.T) {
	h := newHarness(t, nil)
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_bad", []byte("not avro"))
	unknown := []byte{0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0}     // a schema nobody knows
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_unknown", unknown) // …parked, not dropped
	good, _ := h.opts.Codecs.Evidence.Encode(context.Background(), evidenceRecord("om_k", t0, "k"))
	h.tt.Consume(h.evTopic, "ws-1/oc_chat1/om_other", good) // key does not match the value
	h.evidence("om_ok", t0.Add(time.Minute), "h1")          // the processor keeps going
	h.scanAt(t0.Add(13 * time.Minute))
	var reasons []string
	for {
		k, v, ok := h.dead.Next()
		if !ok {
			break
		}
		d, err := h.opts.Codecs.DeadLetter.Decode(context.Background(), v.([]byte))
		if err != nil {
			t.Fatalf("dead letter: %v", err)
		}
		if string(d.Key) != k || d.Topic != "evidence" || d.Stage != "windows" || len(d.Value) == 0 {
			t.Fatalf("dead letter lost the record: %+v", d)
		}
		reasons = append(reasons, d.Reason)
	}
	if len(reasons) != 3 || reasons[2] != "key_mismatch" {
		t.Fatalf("dead-lettered %v, want 3 ending in key_mismatch", reasons)
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
	if GroupName("", "v2") != "larkline-windows-v2" || GroupName("staging", "v2") != "staging-windows-v2" {
		t.Fatalf("group %s / %s", GroupName("", "v2"), GroupName("staging", "v2"))
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
			Window: 10 * time.Minute, Grace: 3 * time.Minute, Retention: 72 * time.Hour, ScanInterval: time.Minute, Codecs: mustCodecs(t)}
	}
	tests := []struct {
		name   string
		mutate func(*Options)
	}{
		{"bad version", func(o *Options) { o.ProcessorVersion = "v/1" }},
		{"window not dividing an hour", func(o *Options) { o.Window = 7 * time.Minute }},
		{"grace not shorter than window", func(o *Options) { o.Grace = 10 * time.Minute }},
		{"coverage without topic", func(o *Options) { o.RequireCoverage = true }},
		{"coverage without committed offsets", func(o *Options) { o.RequireCoverage, o.CheckpointTopic = true, "cp" }},
		{"no codecs", func(o *Options) { o.Codecs = nil }},
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
