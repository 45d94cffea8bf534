package windows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

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

// fakeDead is an in-memory DeadLetterWriter.
type fakeDead struct {
	mu   sync.Mutex
	recs []deadRec
	err  error
}

type deadRec struct {
	key   string
	value []byte
}

func (f *fakeDead) WriteDeadLetter(_ context.Context, key string, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.recs = append(f.recs, deadRec{key, value})
	return nil
}

func (f *fakeDead) all() []deadRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]deadRec(nil), f.recs...)
}

type harness struct {
	t       *testing.T
	tt      *tester.Tester
	p       *Processor
	clock   *testenv.Clock
	closed  *tester.QueueTracker
	dead    *fakeDead
	reg     *prometheus.Registry
	opts    Options
	evTopic string
	calls   *produceCounter
	// failureExpected: the test made the processor fail on purpose.
	failureExpected *atomic.Bool
}

func newHarness(t *testing.T, mutate func(*Options)) *harness {
	t.Helper()
	tt := tester.New(t)
	clock := testenv.NewClock(t0)
	reg := prometheus.NewRegistry()
	dead := &fakeDead{}
	calls := &produceCounter{}
	failureExpected := new(atomic.Bool)
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
		Codecs:           mustCodecs(t),
		DeadLetters:      dead,
		Clock:            clock.Now,
		Registry:         reg,
		Goka:             []goka.ProcessorOption{goka.WithTester(tt), goka.WithContextWrapper(calls.wrap)},
		inlineEmit:       true,
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
	go func() { done <- p.proc.Load().Run(ctx) }()
	// Wait until the processor runs, so that stopping it at cleanup never races its
	// start-up (Goka reports a start-up cut short as an error).
	readyCtx, readyCancel := context.WithTimeout(ctx, 30*time.Second)
	err = p.proc.Load().WaitForReadyContext(readyCtx) // Goka's own signal, not a poll
	readyCancel()
	if err != nil || !p.proc.Load().Recovered() {
		t.Fatalf("processor not running after 30s (it may have stopped): %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !failureExpected.Load() {
			t.Errorf("processor run: %v", err)
		}
		calls.check(t, o)
	})
	return &harness{t: t, tt: tt, p: p, clock: clock, reg: reg, opts: o, evTopic: o.EvidenceTopic,
		closed: tt.NewQueueTracker(o.ClosedTopic), dead: dead, calls: calls, failureExpected: failureExpected}
}

// produceCounter wraps every callback's context and counts what it produces, so a
// test can check the one-produce rules of callbacks.go on every path it drives.
type produceCounter struct {
	mu    sync.Mutex
	calls []*countingCtx
}

func (pc *produceCounter) wrap(ctx goka.Context) goka.Context {
	c := &countingCtx{gokaCtx: ctx, topic: string(ctx.Topic())}
	pc.mu.Lock()
	pc.calls = append(pc.calls, c)
	pc.mu.Unlock()
	return c
}

// check asserts the rules: an evidence callback loops exactly once and writes
// nothing; a loop, checkpoint or read-back callback makes exactly one table write
// and loops nothing (only a loop callback emits, closed records); a visit writes
// nothing.
func (pc *produceCounter) check(t *testing.T, o Options) {
	t.Helper()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for i, c := range pc.calls {
		c.mu.Lock()
		bad := ""
		switch {
		case c.topic == o.EvidenceTopic:
			if c.loops != 1 || c.writes != 0 || c.emits != 0 {
				bad = "evidence callback"
			}
		case c.topic == visitClose:
			if c.writes != 0 || c.emits != 0 {
				bad = "visit"
			}
		case strings.HasSuffix(c.topic, "-loop"):
			if c.writes != 1 || c.loops != 0 {
				bad = "loop callback"
			}
		default: // checkpoints, closed read-back
			if c.writes != 1 || c.loops != 0 || c.emits != 0 {
				bad = "input callback"
			}
		}
		if bad != "" {
			t.Errorf("%s #%d on %s: %d loopbacks, %d table writes, %d emits", bad, i, c.topic, c.loops, c.writes, c.emits)
		}
		c.mu.Unlock()
	}
}

// gokaCtx lets countingCtx embed goka.Context (whose Context method a field named
// Context would shadow).
type gokaCtx = goka.Context

type countingCtx struct {
	gokaCtx
	topic                string
	mu                   sync.Mutex
	loops, writes, emits int
}

func (c *countingCtx) Loopback(key string, v any, o ...goka.ContextOption) {
	c.mu.Lock()
	c.loops++
	c.mu.Unlock()
	c.gokaCtx.Loopback(key, v, o...)
}

func (c *countingCtx) SetValue(v any, o ...goka.ContextOption) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	c.gokaCtx.SetValue(v, o...)
}

func (c *countingCtx) Delete(o ...goka.ContextOption) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	c.gokaCtx.Delete(o...)
}

func (c *countingCtx) Emit(topic goka.Stream, key string, v any, o ...goka.ContextOption) {
	c.mu.Lock()
	c.emits++
	c.mu.Unlock()
	c.gokaCtx.Emit(topic, key, v, o...)
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

func recalled(e *schemas.EvidenceRecord) { e.Deleted, e.Content, e.SynthesisEligible = true, "", false }

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

func (h *harness) checkpoint(until time.Time, end int64) {
	h.t.Helper()
	b, err := h.opts.Codecs.Checkpoint.Encode(context.Background(), schemas.CollectionCheckpoint{
		WorkspaceID: ws, ChatID: chat, CoveredUntil: until, CursorCreateTimeMS: until.UnixMilli() - 1,
		CursorMessageID: "om_cursor", UpdatedAt: until, ReconcileVersion: "test", EvidenceEndOffset: end,
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

// closedWindows returns the closed records emitted since the last call.
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

// chatState is the chat's table value (nil when there is none).
func (h *harness) chatState() *chatValue {
	v, _ := h.tt.TableValue(goka.GroupTable(GroupName("", h.opts.ProcessorVersion)), ids.ChatKey(ws, chat)).(*chatValue)
	return v
}

func TestWindowMath(t *testing.T) {
	t.Parallel()
	m := machine{length: (10 * time.Minute).Milliseconds()}
	tests := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"utc boundary", t0, t0},
		{"last ms of window", t0.Add(10*time.Minute - time.Millisecond), t0},
		{"next window", t0.Add(10 * time.Minute), t0.Add(10 * time.Minute)},
		{"non-UTC input", t0.Add(7 * time.Minute).In(time.FixedZone("CST", 8*3600)), t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := msTime(m.start(tt.at.UnixMilli())); !got.Equal(tt.want) {
				t.Fatalf("got %s want %s", got, tt.want)
			}
			if got := m.start(tt.at.UnixMilli()); got != ids.WindowStart(tt.at, 10*time.Minute).UnixMilli() {
				t.Fatalf("machine and ids disagree: %d", got)
			}
		})
	}
}
