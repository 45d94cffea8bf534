package ingest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

const (
	tToken  = "vtoken-ingest-test"
	tKey    = "encrypt-key-ingest-test"
	tApp    = "cli_ingesttest0001"
	tBot    = "ou_ingestbot"
	tAlice  = "ou_alice"
	tTenant = "tenant-ingest"
	tChat   = ids.ChatID("oc_bound")
	tWS     = ids.WorkspaceID("ws-1")
	tURL    = "http://larkline.test/lark/events"
)

// memSource is a bindings.Source over a map, for unit tests (the Postgres one is
// exercised by the integration tests).
type memSource struct {
	mu     sync.Mutex
	byChat map[ids.ChatID][]store.WorkspaceBinding
	err    error
	// held is what the evidence table holds: message id → workspaces (Holders).
	held    map[ids.MessageID][]ids.WorkspaceID
	heldErr error
}

func (s *memSource) WorkspacesHoldingMessage(_ context.Context, _ ids.ChatID, msg ids.MessageID) ([]ids.WorkspaceID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ids.WorkspaceID(nil), s.held[msg]...), s.heldErr
}

// hold records that the evidence table holds msg in ws.
func (s *memSource) hold(msg ids.MessageID, ws ...ids.WorkspaceID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[ids.MessageID][]ids.WorkspaceID{}
	}
	s.held[msg] = append(s.held[msg], ws...)
}

// unbind removes every binding of chat.
func (s *memSource) unbind(chat ids.ChatID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byChat, chat)
}

func (s *memSource) BindingsForChat(_ context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	return append([]store.WorkspaceBinding(nil), s.byChat[chat]...), nil
}

func (s *memSource) ListenBindings(ctx context.Context, _ store.BindingEvents) error {
	<-ctx.Done()
	return nil
}

func (s *memSource) bind(chat ids.ChatID, ws ids.WorkspaceID, status store.WorkspaceStatus, created time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byChat == nil {
		s.byChat = map[ids.ChatID][]store.WorkspaceBinding{}
	}
	s.byChat[chat] = append(s.byChat[chat], store.WorkspaceBinding{Chat: chat, BoundAt: created,
		Workspace: store.Workspace{ID: ws, Type: "incident", Status: status, CreatedAt: created}})
}

// recordingProducer keeps what it is asked to produce, or fails every record with err.
type recordingProducer struct {
	mu   sync.Mutex
	recs []*kgo.Record
	err  error
}

func (p *recordingProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(kgo.ProduceResults, 0, len(rs))
	for _, r := range rs {
		if p.err != nil {
			out = append(out, kgo.ProduceResult{Record: r, Err: p.err})
			continue
		}
		p.recs = append(p.recs, r)
		out = append(out, kgo.ProduceResult{Record: r})
	}
	return out
}

func (p *recordingProducer) records() []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*kgo.Record(nil), p.recs...)
}

func (p *recordingProducer) setErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

func newCodec(t testing.TB) *schemas.Codec[schemas.EvidenceRecord] {
	t.Helper()
	c, err := schemas.NewEvidenceCodec()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newNormalizer(t testing.TB, maxContent int) *normalize.Normalizer {
	t.Helper()
	n, err := normalize.New(normalize.Options{SelfAppID: tApp, SelfBotOpenID: tBot, MaxContentBytes: maxContent})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// unit is a webhook over an in-memory binding source and a recording producer.
type unit struct {
	t        testing.TB
	src      *memSource
	producer *recordingProducer
	reg      *prometheus.Registry
	ing      *Ingester
	hook     *Webhook
	sender   *larktest.Sender
	builder  larktest.Builder
	codec    *schemas.Codec[schemas.EvidenceRecord]
}

type unitOptions struct {
	key        string // "" for no encrypt key
	maxContent int
	maxBody    int64
	messages   MessageLookup
	now        func() time.Time
	cacheTTL   time.Duration     // binding cache TTL; 0: 1ns (every event reads the source)
	producer   evidence.Producer // nil: a recordingProducer (u.producer)
	topic      string            // "": the default evidence topic
	src        *memSource        // nil: a new one (u.src)
}

func newUnit(t testing.TB, o unitOptions) *unit {
	t.Helper()
	if o.now == nil {
		o.now = time.Now
	}
	u := &unit{t: t, src: cmp.Or(o.src, &memSource{}), producer: &recordingProducer{}, reg: prometheus.NewRegistry(), codec: newCodec(t)}
	if o.cacheTTL == 0 {
		o.cacheTTL = time.Nanosecond
	}
	res, err := bindings.New(bindings.Options{Source: u.src, WorkspaceTypes: []string{"incident"},
		CacheTTL: o.cacheTTL, FallbackTTL: o.cacheTTL, Clock: o.now})
	if err != nil {
		t.Fatal(err)
	}
	u.ing, err = New(Options{Normalizer: newNormalizer(t, o.maxContent), Resolver: res, Holders: u.src, Producer: cmp.Or[evidence.Producer](o.producer, u.producer),
		Codec: u.codec, Topic: o.topic, Messages: o.messages, Clock: o.now, Registry: u.reg})
	if err != nil {
		t.Fatal(err)
	}
	u.hook, err = NewWebhook(WebhookOptions{Ingester: u.ing, VerificationToken: tToken, EncryptKey: o.key, MaxBodyBytes: o.maxBody, Clock: o.now})
	if err != nil {
		t.Fatal(err)
	}
	u.sender = newSender(t, o.key, tToken, o.now)
	u.builder = larktest.Builder{AppID: tApp, TenantKey: tTenant, Token: tToken}
	return u
}

func newSender(t testing.TB, key, token string, now func() time.Time) *larktest.Sender {
	t.Helper()
	s, err := larktest.NewSender(larktest.SenderOptions{EncryptKey: key, VerificationToken: token, AppID: tApp, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// request builds the POST Lark would send for plaintext.
func (u *unit) request(plaintext []byte) *http.Request {
	u.t.Helper()
	req, err := u.sender.Request(context.Background(), tURL, plaintext)
	if err != nil {
		u.t.Fatal(err)
	}
	return req
}

func envJSON(t testing.TB, env larktest.Envelope) []byte {
	t.Helper()
	b, err := env.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answer is a webhook answer.
type answer struct {
	status int
	body   map[string]string
	ctype  string
	allow  string // the Allow header
}

func (u *unit) serve(req *http.Request) answer {
	u.t.Helper()
	rec := httptest.NewRecorder()
	u.hook.ServeHTTP(rec, req)
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		u.t.Fatalf("answer is not a JSON object of strings: %q", rec.Body.String())
	}
	return answer{status: rec.Code, body: body, ctype: rec.Header().Get("Content-Type"), allow: rec.Header().Get("Allow")}
}

func (u *unit) post(plaintext []byte) answer {
	u.t.Helper()
	return u.serve(u.request(plaintext))
}

// events returns larkline_lark_events_total{outcome,reason}.
func (u *unit) events(outcome Outcome, reason string) float64 {
	return testutil.ToFloat64(u.ing.m.events.WithLabelValues(string(outcome), reason))
}

// decoded decodes every produced record.
func (u *unit) decoded() []schemas.EvidenceRecord {
	u.t.Helper()
	var out []schemas.EvidenceRecord
	for _, r := range u.producer.records() {
		rec, err := u.codec.Decode(context.Background(), r.Value)
		if err != nil {
			u.t.Fatalf("decode produced record %s: %v", r.Key, err)
		}
		if string(r.Key) != rec.Key() {
			u.t.Fatalf("record key %s, value key %s", r.Key, rec.Key())
		}
		out = append(out, rec)
	}
	return out
}

// msg describes a message of the bound chat sent by Alice at.
func msg(id string, at time.Time) larktest.Msg {
	return larktest.Msg{ID: ids.MessageID(id), Chat: tChat, From: larktest.Author{OpenID: tAlice}, At: at}
}

// rawEnvelope is an event envelope with a hand-written event object.
func rawEnvelope(eventType, event string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"schema":"2.0","header":{"event_id":"ev-raw","event_type":"` + eventType +
		`","create_time":"1749736821016","token":"` + tToken + `","app_id":"` + tApp + `","tenant_key":"` + tTenant + `"},"event":`)
	b.WriteString(event)
	b.WriteString("}")
	return b.Bytes()
}

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// httptestServer serves h and returns its URL.
func httptestServer(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
