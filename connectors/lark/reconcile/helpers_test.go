package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// waitBound only keeps a broken test from hanging; nothing asserts on speed.
const waitBound = 2 * time.Minute

const (
	tSecret = "secret-reconcile-test"
	tTenant = "tenant-reconcile"
	tAlice  = "ou_alice"
	tToken  = "vtoken-reconcile-test"
	tKey    = "encrypt-key-reconcile-test"
)

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// lark is a local Lark (larktest) behind a recording handler, and an SDK client
// pointed at it. Each gets its own app id: the SDK's token cache is process-wide.
type larkEnv struct {
	srv     *larktest.Server
	http    *httptest.Server
	client  *lark.Client
	appID   string
	botID   string
	builder larktest.Builder

	mu    sync.Mutex
	lists []listCall
	// refuse answers the next n requests for a thread container with a
	// non-retryable Lark error (the bot may not read the thread).
	refuse map[string]int
}

// refuseThread makes Lark refuse the next n reads of thread.
func (l *larkEnv) refuseThread(thread string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse == nil {
		l.refuse = map[string]int{}
	}
	l.refuse[thread] += n
}

func (l *larkEnv) refused(r *http.Request) bool {
	q := r.URL.Query()
	if q.Get("container_id_type") != larkapi.ContainerThread {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse[q.Get("container_id")] == 0 {
		return false
	}
	l.refuse[q.Get("container_id")]--
	return true
}

// listCall is one GET /open-apis/im/v1/messages as the server received it.
type listCall struct {
	container, id, sort, token string
	start, end                 *int64
	pageSize                   int
}

func newLark(t testing.TB, chats ...ids.ChatID) *larkEnv {
	t.Helper()
	return newLarkAt(t, time.Now, chats...)
}

// newLarkAt is newLark on the clock now (which decides what history shows).
func newLarkAt(t testing.TB, now func() time.Time, chats ...ids.ChatID) *larkEnv {
	t.Helper()
	l := &larkEnv{appID: larktest.NewAppID(), botID: "ou_bot" + randomHex(t, 4)}
	// The bot is a member of every chat of the test, even before its first message.
	sc := larktest.IncidentForTest(t, larktest.App{AppID: l.appID, BotOpenID: l.botID}, "lt-ws", now().Add(-1000*time.Hour), chats...)
	var err error
	l.srv, err = larktest.New(larktest.Options{
		AppSecret: tSecret, Scenario: sc, TokenTTL: 1000 * time.Hour, Now: now,
		VerificationToken: tToken, EncryptKey: tKey, RetrySchedule: []time.Duration{},
	})
	if err != nil {
		t.Fatal(err)
	}
	inner := l.srv.Handler()
	l.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == larktest.PathListMessages {
			l.record(r)
			if l.refused(r) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"code":230027,"msg":"Lack of necessary permissions"}`))
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(l.http.Close)
	l.client = lark.NewClient(l.appID, tSecret, lark.WithOpenBaseUrl(l.http.URL), lark.WithLogLevel(larkcore.LogLevelError))
	l.builder = larktest.Builder{AppID: l.appID, TenantKey: tTenant, Token: tToken}
	return l
}

func (l *larkEnv) record(r *http.Request) {
	q := r.URL.Query()
	c := listCall{container: q.Get("container_id_type"), id: q.Get("container_id"), sort: q.Get("sort_type"), token: q.Get("page_token")}
	c.pageSize, _ = strconv.Atoi(q.Get("page_size"))
	for _, f := range []struct {
		name string
		dst  **int64
	}{{"start_time", &c.start}, {"end_time", &c.end}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				*f.dst = &n
			}
		}
	}
	l.mu.Lock()
	l.lists = append(l.lists, c)
	l.mu.Unlock()
}

// calls returns the history requests received so far.
func (l *larkEnv) calls() []listCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lists)
}

// say adds a text message to Lark's history, delivered (or dropped) as d says.
func (l *larkEnv) say(t testing.TB, d larktest.Delivery, m larktest.Msg, text string) {
	t.Helper()
	if m.From.OpenID == "" {
		m.From = larktest.Author{OpenID: tAlice}
	}
	if err := l.srv.AddEvent(d, l.builder.Text(m, text)); err != nil {
		t.Fatal(err)
	}
}

// sayEvery adds n text messages om_<name>000… to chat's history, the i-th at
// first + (i+1)·step, delivered (or dropped) as d says.
func (l *larkEnv) sayEvery(t testing.TB, d larktest.Delivery, chat ids.ChatID, name string, n int, first time.Time, step time.Duration, text string) {
	t.Helper()
	for i := range n {
		l.say(t, d, larktest.Msg{ID: msgID(name, i), Chat: chat, At: first.Add(time.Duration(i+1) * step)}, text)
	}
}

// env is one integration environment: the real broker with fresh evidence and
// checkpoint topics, a fresh migrated database, and a local Lark.
type env struct {
	st       *store.Store
	brokers  []string
	evTopic  string
	cpTopic  string
	prod     *kgo.Client
	codecs   *schemas.Codecs
	norm     *normalize.Normalizer
	lark     *larkEnv
	registry *prometheus.Registry
}

func newEnv(t testing.TB, chats ...ids.ChatID) *env {
	t.Helper()
	return newEnvAt(t, time.Now, chats...)
}

// newEnvAt is newEnv with Lark on the clock now.
func newEnvAt(t testing.TB, now func() time.Time, chats ...ids.ChatID) *env {
	t.Helper()
	e := &env{brokers: testenv.KafkaBrokers(t)}
	e.evTopic = testenv.NewTopic(t, 3, nil)
	e.cpTopic = testenv.NewTopic(t, 3, nil)
	e.st = teststore.New(t, teststore.MaxConns(8))
	var err error
	if e.codecs, err = schemas.NewCodecs(schemas.Topics{Evidence: e.evTopic, Checkpoint: e.cpTopic}); err != nil {
		t.Fatal(err)
	}
	e.prod = testkafka.Client(t, kafka.Options{Brokers: e.brokers, Producer: kafka.ProducerOptions{Linger: new(time.Duration(0))}})
	e.lark = newLarkAt(t, now, chats...)
	if e.norm, err = normalize.New(normalize.Options{SelfAppID: e.lark.appID, SelfBotOpenID: e.lark.botID}); err != nil {
		t.Fatal(err)
	}
	return e
}

// newIncident is newEnv with one firing incident workspace ws, created age ago and
// bound to chat; it returns the environment and the workspace's creation time.
func newIncident(t testing.TB, ws ids.WorkspaceID, chat ids.ChatID, age time.Duration) (*env, time.Time) {
	t.Helper()
	e := newEnv(t, chat)
	created := time.Now().Add(-age)
	e.workspace(t, ws, "incident", store.WorkspaceFiring, created, chat)
	return e, created
}

// workspace stores a workspace and binds chats to it.
func (e *env) workspace(t testing.TB, ws ids.WorkspaceID, typ string, status store.WorkspaceStatus, created time.Time, chats ...ids.ChatID) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.st.UpsertWorkspace(ctx, store.Workspace{ID: ws, Type: typ, Status: status, CreatedAt: created}, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range chats {
		if _, err := e.st.BindChat(ctx, ws, c); err != nil {
			t.Fatal(err)
		}
	}
}

// resolver is the event path's eligibility rule over the test database, without
// caching (every call reads Postgres), so that status changes are seen at once.
func (e *env) resolver(t testing.TB) *bindings.Resolver {
	t.Helper()
	res, err := bindings.New(bindings.Options{
		Source: e.st, WorkspaceTypes: []string{"incident"},
		CacheTTL: time.Nanosecond, FallbackTTL: time.Nanosecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Close() })
	return res
}

// options are test defaults: small pages, no real sleeping is needed because
// nothing retries unless a test injects faults (and then it injects Sleep too).
func (e *env) options(t testing.TB) Options {
	t.Helper()
	h, err := larkapi.New(e.lark.client)
	if err != nil {
		t.Fatal(err)
	}
	e.registry = prometheus.NewRegistry()
	src, err := larkapi.New(e.lark.client)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := chats.New(chats.Options{Source: src, Registry: e.registry})
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Store: e.st, Eligibility: e.resolver(t), Chats: guard, History: h, Normalizer: e.norm, Producer: e.prod,
		EvidenceCodec: e.codecs.Evidence, CheckpointCodec: e.codecs.Checkpoint,
		EvidenceTopic: e.evTopic, CheckpointTopic: e.cpTopic,
		PageSize: 5, RequestsPerSecond: MaxRequestsPerSecond, Burst: 1000,
		ReconcileOverlap: 3 * time.Minute, Settle: time.Second,
		Logger:   slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registry: e.registry,
	}
}

// deliverWebhook sends the events Lark has not delivered yet through the real
// webhook path (package ingest) and fails the test unless each was answered.
func (e *env) deliverWebhook(t testing.TB, ctx context.Context) larktest.Report {
	t.Helper()
	ing, err := ingest.New(ingest.Options{Normalizer: e.norm, Resolver: e.resolver(t), Holders: e.st, Producer: e.prod, Codec: e.codecs.Evidence, Topic: e.evTopic})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := ingest.NewWebhook(ingest.WebhookOptions{Ingester: ing, VerificationToken: tToken, EncryptKey: tKey})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(hook)
	t.Cleanup(hs.Close)
	report, err := e.lark.srv.Deliver(ctx, hs.URL)
	if err != nil || len(report.Undelivered()) != 0 {
		t.Fatalf("deliver: %v, undelivered %+v", err, report.Undelivered())
	}
	return report
}

func (e *env) reconciler(t testing.TB, opts Options) *Reconciler {
	t.Helper()
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// runOne runs one pass of r and returns its only chat report.
func runOne(t testing.TB, ctx context.Context, r *Reconciler) ChatReport {
	t.Helper()
	rep, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return oneChat(t, rep)
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// evidence decodes the evidence topic.
func (e *env) evidence(t testing.TB) []schemas.EvidenceRecord {
	t.Helper()
	var out []schemas.EvidenceRecord
	for _, r := range testenv.ReadTopic(t, e.evTopic) {
		v, err := e.codecs.Evidence.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatalf("decode evidence %s: %v", r.Key, err)
		}
		if string(r.Key) != v.Key() {
			t.Fatalf("evidence key %s holds %s", r.Key, v.Key())
		}
		out = append(out, v)
	}
	slices.SortStableFunc(out, func(a, b schemas.EvidenceRecord) int { return a.OccurredAt.Compare(b.OccurredAt) })
	return out
}

// coverage decodes the checkpoint topic and returns the latest coverage per key.
func (e *env) coverage(t testing.TB) map[string]schemas.CollectionCheckpoint {
	t.Helper()
	out := map[string]schemas.CollectionCheckpoint{}
	for _, r := range testenv.ReadTopic(t, e.cpTopic) {
		v, err := e.codecs.Checkpoint.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatalf("decode checkpoint %s: %v", r.Key, err)
		}
		if string(r.Key) != v.Key() {
			t.Fatalf("checkpoint key %s holds %s", r.Key, v.Key())
		}
		if p, ok := out[v.Key()]; !ok || v.CoveredUntil.After(p.CoveredUntil) {
			out[v.Key()] = v
		}
	}
	return out
}

// sinkAll writes every evidence record of the topic into the store, as the
// evidence sink does.
func (e *env) sinkAll(t testing.TB) {
	t.Helper()
	recs := e.evidence(t)
	rows := make([]store.Evidence, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		rows = append(rows, store.Evidence{
			WorkspaceID: r.WorkspaceID, Source: r.Source, SourceType: r.SourceType, SourceKey: r.SourceKey,
			OccurredAt: r.OccurredAt, SourceUpdatedAt: r.SourceUpdatedAt, ObservedAt: r.ObservedAt,
			ActorID: r.ActorID, ActorDisplayName: r.ActorDisplayName, Content: r.Content, ContentHash: r.ContentHash,
			Metadata: json.RawMessage(r.MetadataJSON), Deleted: r.Deleted, SynthesisEligible: r.SynthesisEligible,
		})
	}
	if len(rows) == 0 {
		return
	}
	if _, err := e.st.UpsertEvidence(context.Background(), rows); err != nil {
		t.Fatalf("sink: %v", err)
	}
}

func (e *env) checkpoint(t testing.TB, ws ids.WorkspaceID, chat ids.ChatID) (store.Checkpoint, bool) {
	t.Helper()
	cp, err := e.st.GetCheckpoint(context.Background(), ws, chat)
	if errors.Is(err, store.ErrNotFound) {
		return store.Checkpoint{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cp, true
}

// byMessage indexes records by message id (the last version wins).
func byMessage(recs []schemas.EvidenceRecord) map[ids.MessageID][]schemas.EvidenceRecord {
	out := map[ids.MessageID][]schemas.EvidenceRecord{}
	for _, r := range recs {
		out[r.MessageID] = append(out[r.MessageID], r)
	}
	return out
}

// msgID and chatID make readable ids.
func msgID(name string, i int) ids.MessageID { return ids.MessageID(fmt.Sprintf("om_%s%03d", name, i)) }

// sec truncates to the second, as Lark's start_time and end_time do.
func sec(t time.Time) int64 { return t.Unix() }

func ctxTimeout(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	t.Cleanup(cancel)
	return ctx
}
