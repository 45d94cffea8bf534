package synthesis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/logtest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/processors/synthesis/rules"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// waitFor bounds every wait of the integration tests. It is a deadline for a test
// that would otherwise hang, not an assertion on speed.
const waitFor = 90 * time.Second

// win is the first test window: 2024-05-01 14:00 UTC, 10 minutes.
var (
	win    = time.Date(2024, 5, 1, 14, 0, 0, 0, time.UTC)
	winLen = 10 * time.Minute
)

// env is one test's real Postgres database and Kafka topics.
type env struct {
	t       testing.TB
	st      *store.Store
	brokers []string
	topic   string
	dlq     string
	group   string
	codecs  *schemas.Codecs
	prod    *kgo.Client
	ws      ids.WorkspaceID
	chat    ids.ChatID
}

func newEnv(t testing.TB) *env {
	t.Helper()
	st := teststore.New(t, teststore.MaxConns(12))
	e := &env{t: t, st: st, brokers: testenv.KafkaBrokers(t), topic: testenv.NewTopic(t, 1, nil),
		dlq: testenv.NewTopic(t, 1, nil), ws: "ws-incident", chat: "oc_incident"}
	e.group = "synthesis-" + e.topic
	var err error
	if e.codecs, err = schemas.NewCodecs(schemas.Topics{ClosedWindow: e.topic, DeadLetter: e.dlq}); err != nil {
		t.Fatal(err)
	}
	e.prod = testkafka.Client(t, kafka.Options{Brokers: e.brokers})
	return e
}

// line is one chat message of a test, at offset at from the window it is seeded into.
type line struct {
	id      string // message id suffix: om_<id>
	at      time.Duration
	sender  string
	text    string
	thread  string
	root    string // message id suffix of the root
	parent  string // message id suffix of the parent
	bot     bool
	noElig  bool // not synthesis eligible
	msgType string
}

func hashText(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (e *env) evidence(start time.Time, l line) store.Evidence {
	meta := map[string]string{"chat_id": string(e.chat), "message_type": "text", "sender_type": "user"}
	if l.msgType != "" {
		meta["message_type"] = l.msgType
	}
	if l.bot {
		meta["sender_type"] = "app"
	}
	if l.thread != "" {
		meta["thread_id"] = l.thread
	}
	if l.root != "" {
		meta["root_id"] = "om_" + l.root
	}
	if l.parent != "" {
		meta["parent_id"] = "om_" + l.parent
	}
	var b strings.Builder
	b.WriteString("{")
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%q", k, meta[k])
	}
	b.WriteString("}")
	at := start.Add(l.at)
	return store.Evidence{
		WorkspaceID: e.ws, Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
		SourceKey:  ids.MessageSourceKey(e.chat, ids.MessageID("om_"+l.id)),
		OccurredAt: at, SourceUpdatedAt: at, ActorID: "ou_" + strings.ToLower(l.sender), ActorDisplayName: l.sender,
		Content: l.text, ContentHash: hashText(l.id + "\x00" + l.text), Metadata: []byte(b.String()),
		SynthesisEligible: !l.noElig,
	}
}

// seed upserts lines into the window starting at start and returns the stored rows
// (with their ids) in (occurred_at, id) order.
func (e *env) seed(start time.Time, lines ...line) []store.Evidence {
	e.t.Helper()
	ctx := context.Background()
	batch := make([]store.Evidence, len(lines))
	keys := make([]string, len(lines))
	for i, l := range lines {
		batch[i] = e.evidence(start, l)
		keys[i] = batch[i].SourceKey
	}
	if _, err := e.st.UpsertEvidence(ctx, batch); err != nil {
		e.t.Fatalf("upsert evidence: %v", err)
	}
	rows, err := e.st.EvidenceByKeys(ctx, e.ws, store.LarkMessageEvidence, keys)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

// byMessage maps message id suffixes to evidence ids.
func byMessage(rows []store.Evidence) map[string]int64 {
	out := map[string]int64{}
	for _, r := range rows {
		out[r.SourceKey[strings.LastIndex(r.SourceKey, "/om_")+4:]] = r.ID
	}
	return out
}

// closedWindow is the closed-window record the window processor would emit for rows
// (the eligible ones inside [start, start+winLen)): their evidence is offsets [0, n)
// of evidence partition 0. The env's worker has no SinkProgress, so it reads the table
// at once.
func (e *env) closedWindow(start time.Time, rows []store.Evidence) schemas.ClosedWindow {
	cw := schemas.ClosedWindow{WorkspaceID: e.ws, ChatID: e.chat, WindowStart: start, WindowEnd: start.Add(winLen),
		ProcessorVersion: ids.DefaultProcessorVersion, ClosedAt: time.Now().UTC().Truncate(time.Millisecond),
		Reason: schemas.CloseReasonGraceElapsed}
	for _, r := range rows {
		if !r.SynthesisEligible || r.OccurredAt.Before(start) || !r.OccurredAt.Before(cw.WindowEnd) {
			continue
		}
		if cw.EvidenceCount == 0 || r.OccurredAt.Before(cw.FirstOccurredAt) {
			cw.FirstOccurredAt = r.OccurredAt
		}
		if r.OccurredAt.After(cw.LastOccurredAt) {
			cw.LastOccurredAt = r.OccurredAt
		}
		cw.EvidenceCount++
	}
	cw.EvidenceEndOffset = int64(cw.EvidenceCount)
	return cw
}

// produce writes closed windows and returns their offsets.
func (e *env) produce(cws ...schemas.ClosedWindow) []int64 {
	e.t.Helper()
	var offs []int64
	for _, cw := range cws {
		v, err := e.codecs.ClosedWindow.Encode(context.Background(), cw)
		if err != nil {
			e.t.Fatalf("encode closed window: %v", err)
		}
		offs = append(offs, e.produceRaw([]byte(cw.Key()), v))
	}
	return offs
}

func (e *env) produceRaw(key, value []byte) int64 {
	e.t.Helper()
	return testkafka.Produce(e.t, e.prod, &kgo.Record{Topic: e.topic, Key: key, Value: value})[0].Record.Offset
}

func (e *env) key(start time.Time) store.WindowKey {
	return store.WindowKey{Workspace: e.ws, Chat: e.chat, Start: start}
}

// running is a worker started by a test.
type running struct {
	w      *Worker
	reg    *prometheus.Registry
	logs   *logtest.Buffer
	done   chan struct{}
	runErr error
	once   sync.Once
}

// options are a test worker's defaults: fast backoffs, the rule synthesizer.
func (e *env) options() Options {
	syn, err := rules.New(rules.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	return Options{
		Kafka: kafka.Options{Brokers: e.brokers, Consumer: kafka.ConsumerOptions{
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, FetchMaxWait: 200 * time.Millisecond}},
		Group: e.group, Topic: e.topic, DeadLetterTopic: e.dlq,
		Store: e.st, Codecs: e.codecs, Synthesizer: syn, Summarizer: syn,
		RetryBackoffMin: 10 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
		EvidenceWait: 5 * time.Second, DrainTimeout: 5 * time.Second,
	}
}

// start builds a worker from o and runs it until the test ends (or stop is called).
func (e *env) start(o Options) *running {
	e.t.Helper()
	r := &running{reg: o.Registry, logs: &logtest.Buffer{}, done: make(chan struct{})}
	if r.reg == nil {
		r.reg = prometheus.NewRegistry()
		o.Registry = r.reg
	}
	o.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := New(o)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	r.w = w
	go func() {
		defer close(r.done)
		r.runErr = w.Run(context.Background())
	}()
	e.t.Cleanup(func() { r.stop(e.t) })
	return r
}

// stop closes the worker and checks that Run returned cleanly.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.w.Close()
	select {
	case <-r.done:
	case <-time.After(waitFor):
		t.Error("Run did not return after Close")
		return
	}
	r.once.Do(func() {
		if r.runErr != nil && !errors.Is(r.runErr, ErrClosed) {
			t.Errorf("Run: %v", r.runErr)
		}
	})
}

func (r *running) counter(name string, labels ...string) float64 {
	m, err := r.reg.Gather()
	if err != nil {
		panic(err)
	}
	total := 0.0
	for _, f := range m {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, mm := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range mm.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			switch {
			case mm.GetCounter() != nil:
				total += mm.GetCounter().GetValue()
			case mm.GetGauge() != nil:
				total += mm.GetGauge().GetValue()
			case mm.GetHistogram() != nil:
				total += float64(mm.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, waitFor, what, cond)
}

// waitState waits until the window's state satisfies cond and returns it.
func (e *env) waitState(start time.Time, what string, cond func(store.WindowState) bool) store.WindowState {
	e.t.Helper()
	var st store.WindowState
	eventually(e.t, what, func() bool {
		s, err := e.st.GetWindow(context.Background(), e.key(start))
		if err != nil {
			return false
		}
		st = s
		return cond(s)
	})
	return st
}

func terminal(s store.WindowState) bool {
	return s.Status == store.WindowCompleted || s.Status == store.WindowIgnored
}

// committed returns the group's committed offset of partition 0 of the topic (-1: none).
func (e *env) committed() int64 {
	e.t.Helper()
	adm := kadm.NewClient(e.prod)
	offs, err := adm.FetchOffsets(context.Background(), e.group)
	if err != nil {
		e.t.Fatalf("fetch offsets: %v", err)
	}
	o, ok := offs.Lookup(e.topic, 0)
	if !ok {
		return -1
	}
	return o.At
}

// entries lists every entry of the workspace, hidden included.
func (e *env) entries() []store.Entry {
	e.t.Helper()
	p, err := e.st.ListEntries(context.Background(), e.ws, store.EntryQuery{IncludeHidden: true, Limit: store.MaxPageSize})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Items
}

// recorder is a synth.Synthesizer that records each request and delegates to next,
// or fails as fail decides (n counts calls from 1).
type recorder struct {
	next synth.Synthesizer
	fail func(n int, req synth.Request) error

	mu   sync.Mutex
	reqs []synth.Request
}

func (r *recorder) Synthesize(ctx context.Context, req synth.Request) (synth.Result, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	n := len(r.reqs)
	r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(n, req); err != nil {
			return synth.Result{Synthesizer: "recorder"}, err
		}
	}
	return r.next.Synthesize(ctx, req)
}

func (r *recorder) requests() []synth.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// countingSummarizer counts calls and delegates to next, or fails with err.
type countingSummarizer struct {
	next synth.Summarizer
	err  error

	mu    sync.Mutex
	calls int
}

func (c *countingSummarizer) Summarize(ctx context.Context, req synth.SummaryRequest) (string, synth.Usage, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	if c.err != nil {
		return "", synth.Usage{}, c.err
	}
	return c.next.Summarize(ctx, req)
}

func (c *countingSummarizer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// primaryIDs returns the non-context evidence ids of a request, in group order.
func primaryIDs(req synth.Request) (primary, context []int64) {
	for _, g := range req.Groups {
		for _, m := range g.Messages {
			if m.Context {
				context = append(context, m.EvidenceID)
			} else {
				primary = append(primary, m.EvidenceID)
			}
		}
	}
	return primary, context
}

func (e *env) newTopic(t *testing.T) string { return testenv.NewTopic(t, 1, nil) }

// readDeadLetter reads the first dead letter of the test's dead-letter topic.
func (e *env) readDeadLetter() schemas.DeadLetter {
	e.t.Helper()
	opts, err := kafka.NewClientOptions(kafka.Options{Brokers: e.brokers})
	if err != nil {
		e.t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(e.dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		fs := cl.PollRecords(ctx, 1)
		if ctx.Err() != nil {
			e.t.Fatal("no dead letter arrived")
		}
		for _, r := range fs.Records() {
			dl, err := e.codecs.DeadLetter.Decode(ctx, r.Value)
			if err != nil {
				e.t.Fatalf("decode dead letter: %v", err)
			}
			return dl
		}
	}
}

// contextBefore is three messages of thread from Alice in the three minutes before
// the window, text a format with the message's number (pre0, pre1, pre2).
func contextBefore(thread, text string) []line {
	var lines []line
	for i := range 3 {
		lines = append(lines, line{id: fmt.Sprintf("pre%d", i), at: -time.Duration(3-i) * time.Minute, sender: "Alice",
			text: fmt.Sprintf(text, i), thread: thread})
	}
	return lines
}
