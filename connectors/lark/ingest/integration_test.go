package ingest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/freeport"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	itSecret     = "app-secret-it"
	itPartitions = 3
)

// stack is the event path wired as in production: real Postgres bindings through the
// resolver's LISTEN cache, a franz-go producer on the real broker, the real SDK's
// clients against larktest (contacts, recall lookups), and the webhook behind HTTP.
type stack struct {
	t        *testing.T
	st       *store.Store
	resolver *bindings.Resolver
	topic    string
	client   *kgo.Client
	lark     *larktest.Server
	sdk      *lark.Client
	contacts *Contacts
	ing      *Ingester
	hook     *Webhook
	url      string
	reg      *prometheus.Registry

	mu sync.Mutex
	// failed counts, per message, the POSTs that did not get a 200. Ingest is at
	// least once: a POST the webhook gave up on (its 2.5 s bound, on a loaded
	// machine) may still have landed its records, and Lark's redelivery lands them
	// again, so each failed POST may add a record per workspace holding the chat.
	failed map[ids.MessageID]int
}

// maxHolders is the most workspaces any chat of these tests is bound to.
const maxHolders = 2

// noteFailed records the POSTs of rep that did not get a 200.
func (s *stack) noteFailed(rep larktest.Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = map[ids.MessageID]int{}
	}
	for _, d := range rep.Deliveries {
		for _, a := range d.Attempts {
			if a.Status != http.StatusOK {
				s.failed[d.MessageID]++
			}
		}
	}
}

// mayRepeat is how many records beyond the expected the failed POSTs of msg (all
// messages: "") may have added.
func (s *stack) mayRepeat(msg ids.MessageID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for m, f := range s.failed {
		if msg == "" || m == msg {
			n += f * maxHolders
		}
	}
	return n
}

type stackOptions struct {
	scenario *larktest.Scenario
	topic    string // "" for a fresh topic
	brokers  []string
	timeout  time.Duration
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	ctx := context.Background()
	s := &stack{t: t, reg: prometheus.NewRegistry()}

	s.st = teststore.New(t, teststore.MaxConns(6))
	for _, w := range o.scenario.Workspaces() {
		ws := store.Workspace{ID: w.ID, Type: w.Type, Status: store.WorkspaceStatus(w.Status), CreatedAt: w.CreatedAt}
		if _, err := s.st.UpsertWorkspace(ctx, ws, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range o.scenario.Bindings() {
		if _, err := s.st.BindChat(ctx, b.WorkspaceID, b.ChatID); err != nil {
			t.Fatal(err)
		}
	}
	// Both TTLs are long: only NOTIFY makes a binding change visible.
	var err error
	s.resolver, err = bindings.New(bindings.Options{Source: s.st, WorkspaceTypes: []string{"incident"},
		CacheTTL: time.Hour, FallbackTTL: time.Hour, Registry: s.reg})
	if err != nil {
		t.Fatal(err)
	}
	s.background(s.resolver.Run)
	waitUntil(t, "binding listener up", s.resolver.Listening)

	s.topic = o.topic
	if s.topic == "" {
		s.topic = testenv.NewTopic(t, itPartitions, nil)
	}
	s.client = testkafka.Client(t, kafka.Options{Brokers: o.brokers, ClientID: "larkline-ingest-test"}) // o.brokers nil: testenv's

	appID := larktest.NewAppID()
	// Lark gives a webhook 3 s; here a slow answer on a loaded machine must not turn
	// into a redelivery (and so into records the tests do not count on): the tests
	// that want redeliveries make them (DeliverTwice, failed answers).
	s.lark, err = larktest.New(larktest.Options{AppID: appID, AppSecret: itSecret, VerificationToken: tToken,
		EncryptKey: tKey, Scenario: o.scenario, CallbackTimeout: time.Minute,
		RetrySchedule: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
			800 * time.Millisecond, 1600 * time.Millisecond, 3 * time.Second, 3 * time.Second, 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.lark.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.lark.Close() })
	s.sdk = lark.NewClient(appID, itSecret, lark.WithOpenBaseUrl(s.lark.URL()), lark.WithReqTimeout(2*time.Second))

	dir, err := larkapi.New(s.sdk)
	if err != nil {
		t.Fatal(err)
	}
	s.contacts, err = NewContacts(ContactsOptions{Directory: dir, BatchWait: 10 * time.Millisecond, RequestsPerSecond: 50, Registry: s.reg})
	if err != nil {
		t.Fatal(err)
	}
	s.background(s.contacts.Run)
	msgs, err := larkapi.New(s.sdk)
	if err != nil {
		t.Fatal(err)
	}
	app := o.scenario.App()
	norm, err := normalize.New(normalize.Options{SelfAppID: app.AppID, SelfBotOpenID: app.BotOpenID})
	if err != nil {
		t.Fatal(err)
	}
	s.ing, err = New(Options{Normalizer: norm, Resolver: s.resolver, Holders: s.st, Producer: s.client, Codec: newCodec(t),
		Topic: s.topic, Names: s.contacts, Messages: msgs, Timeout: o.timeout, Registry: s.reg})
	if err != nil {
		t.Fatal(err)
	}
	if s.hook, err = NewWebhook(WebhookOptions{Ingester: s.ing, VerificationToken: tToken, EncryptKey: tKey}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+DefaultWebhookPath, s.hook)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL + DefaultWebhookPath
	return s
}

// background runs f until the test ends.
func (s *stack) background(f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	s.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("background Run: %v", err)
		}
	})
}

func (s *stack) deliver(ctx context.Context) larktest.Report {
	s.t.Helper()
	rep, err := s.lark.Deliver(ctx, s.url)
	s.noteFailed(rep)
	if err != nil {
		s.t.Fatalf("deliver: %v (undelivered: %+v)", err, rep.Undelivered())
	}
	return rep
}

func (s *stack) events(outcome Outcome, reason string) float64 {
	return testutil.ToFloat64(s.ing.m.events.WithLabelValues(string(outcome), reason))
}

// consumed is one record read back from the evidence topic.
type consumed struct {
	rec       schemas.EvidenceRecord
	partition int32
}

// readAll reads the topic from the start until want records arrived (and a short
// quiet period passed, to catch extra ones) or the deadline. More than want is a
// failure unless failed POSTs explain them (stack.failed).
func (s *stack) readAll(want int) []consumed {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(testenv.KafkaBrokers(s.t)...), kgo.ConsumeTopics(s.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	codec := newCodec(s.t)
	var out []consumed
	deadline := time.Now().Add(30 * time.Second)
	quietUntil := time.Time{}
	for time.Now().Before(deadline) {
		if len(out) >= want {
			if quietUntil.IsZero() {
				quietUntil = time.Now().Add(500 * time.Millisecond)
			} else if time.Now().After(quietUntil) {
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				s.t.Fatalf("consume %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			rec, err := codec.Decode(context.Background(), r.Value)
			if err != nil {
				s.t.Fatalf("decode %s: %v", r.Key, err)
			}
			if string(r.Key) != rec.Key() {
				s.t.Fatalf("record key %s carries %s", r.Key, rec.Key())
			}
			out = append(out, consumed{rec: rec, partition: r.Partition})
		})
	}
	if extra := s.mayRepeat(""); len(out) < want || len(out) > want+extra {
		per := map[string]int{}
		for _, c := range out {
			per[string(c.rec.MessageID)+" in "+string(c.rec.WorkspaceID)]++
		}
		s.t.Fatalf("read %d records from %s, want %d (+ up to %d after failed POSTs); records per message: %v",
			len(out), s.topic, want, extra, per)
	}
	for _, c := range out {
		if p := kafka.Partition([]byte(c.rec.Key()), itPartitions); p != c.partition {
			s.t.Fatalf("record %s in partition %d, the shared partitioner says %d", c.rec.Key(), c.partition, p)
		}
	}
	return out
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, what, cond)
}

// byKey groups records by evidence key, in topic order.
func byKey(cs []consumed) map[string][]schemas.EvidenceRecord {
	out := map[string][]schemas.EvidenceRecord{}
	for _, c := range cs {
		out[c.rec.Key()] = append(out[c.rec.Key()], c.rec)
	}
	return out
}

// TestIncidentScenarioThroughWebhook replays the bundled incident chat through the
// real SDK dispatcher behind HTTP, signed and encrypted as Lark does, into the real
// broker, and checks every message's evidence.
func TestIncidentScenarioThroughWebhook(t *testing.T) {
	inc, err := larktest.Incident()
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err := inc.ShiftBefore(time.Now().Add(-time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{scenario: sc})
	rep := s.deliver(context.Background())

	var ws ids.WorkspaceID
	bound := map[ids.ChatID]bool{}
	for _, b := range sc.Bindings() {
		ws, bound[b.ChatID] = b.WorkspaceID, true
	}
	want := 0
	type expect struct {
		versions int // records
		hashes   int // distinct content hashes
		recalled bool
		info     larktest.MessageInfo
	}
	exp := map[string]*expect{}
	for _, m := range sc.Messages() {
		if !bound[m.ChatID] {
			continue
		}
		e := &expect{info: m, recalled: m.Recalled}
		switch m.Deliver {
		case larktest.DeliverOnce:
			e.versions, e.hashes = 1, 1
		case larktest.DeliverTwice:
			e.versions, e.hashes = 2, 1
		case larktest.DeliverDrop:
			e.versions, e.hashes = 0, 0
		}
		if m.Recalled {
			e.versions++
			e.hashes++
		}
		want += e.versions
		if e.versions > 0 {
			exp[string(ids.EvidenceKey(ws, m.ChatID, m.ID))] = e
		}
	}
	got := byKey(s.readAll(want))
	for key, e := range exp {
		recs := got[key]
		if len(recs) != e.versions {
			t.Errorf("%s: %d records, want %d", key, len(recs), e.versions)
			continue
		}
		hashes := map[string]bool{}
		for _, r := range recs {
			hashes[r.ContentHash] = true
			if !r.OccurredAt.Equal(e.info.CreateTime) {
				t.Errorf("%s: occurred_at %s, want %s", key, r.OccurredAt, e.info.CreateTime)
			}
		}
		if len(hashes) != e.hashes {
			t.Errorf("%s: %d distinct hashes, want %d (duplicates must share their hash)", key, len(hashes), e.hashes)
		}
		last := recs[len(recs)-1]
		if e.recalled != last.Deleted || (last.Deleted && last.Content != "") {
			t.Errorf("%s: last version deleted=%v content %q, recalled=%v", key, last.Deleted, last.Content, e.recalled)
		}
		if e.info.FromApp && last.SynthesisEligible {
			t.Errorf("%s: a message of our own app is synthesis-eligible", key)
		}
	}
	if len(got) != len(exp) {
		t.Errorf("records under %d keys, want %d", len(got), len(exp))
	}
	if n := s.events(OutcomeAccepted, ReasonOK) + s.events(OutcomeAccepted, ReasonRecall); int(n) != rep.Posts() {
		t.Errorf("accepted %v callbacks, Lark posted %d", n, rep.Posts())
	}
}

// TestDeliverySemantics covers duplicate and out-of-order delivery, one chat bound to
// two workspaces, a dropped message recalled (no workspace holds it: nothing is
// written, issue #29), a recall of a delivered message, and a sender name filled from
// the contacts cache.
func TestDeliverySemantics(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	created := now.Add(-time.Hour)
	const shared = ids.ChatID("oc_shared")
	sc, err := larktest.NewScenario(larktest.App{AppID: tApp, BotOpenID: tBot})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(sc.AddWorkspace(larktest.Workspace{ID: "ws-a", Type: "incident", Status: "firing", CreatedAt: created}))
	must(sc.AddWorkspace(larktest.Workspace{ID: "ws-b", Type: "incident", Status: "firing", CreatedAt: created}))
	must(sc.AddBinding("ws-a", shared))
	must(sc.AddBinding("ws-b", shared))
	must(sc.AddUser(larktest.User{OpenID: tAlice, Name: "Alice"}))
	b := larktest.Builder{AppID: tApp, TenantKey: tTenant}
	m := func(id string, at time.Time) larktest.Msg {
		return larktest.Msg{ID: ids.MessageID(id), Chat: shared, From: larktest.Author{OpenID: tAlice}, At: at}
	}
	t1 := now.Add(-30 * time.Minute)
	must(sc.AddEvent(larktest.DeliverOnce, b.Text(m("om_1", t1), "customers see 502 on checkout")))
	must(sc.AddEvent(larktest.DeliverTwice, b.Text(m("om_2", t1.Add(2*time.Minute)), "rolling back v2.31")))
	// Out of order: om_3 was created before om_2 but arrives after it.
	must(sc.AddEvent(larktest.DeliverOnce, b.Text(m("om_3", t1.Add(time.Minute)), "error rate 35%")))
	// om_4 never arrives as an event; only its recall does: nothing holds it.
	must(sc.AddEvent(larktest.DeliverDrop, b.Text(m("om_4", t1.Add(3*time.Minute)), "ssh password is hunter2")))
	must(sc.AddEvent(larktest.DeliverOnce, b.Recall("om_4", shared, t1.Add(4*time.Minute), "")))
	must(sc.AddEvent(larktest.DeliverOnce, b.Text(m("om_5", t1.Add(5*time.Minute)), "wrong chat, sorry")))
	must(sc.AddEvent(larktest.DeliverOnce, b.Recall("om_5", shared, t1.Add(6*time.Minute), "")))

	s := newStack(t, stackOptions{scenario: sc})
	s.deliver(context.Background())

	// Per workspace: om_1 1, om_2 2 (same hash), om_3 1, om_4 none, om_5 2.
	got := byKey(s.readAll(2 * 6))
	for _, ws := range []ids.WorkspaceID{"ws-a", "ws-b"} {
		key := func(id string) string { return ids.EvidenceKey(ws, shared, ids.MessageID(id)) }
		check := func(id string, versions, hashes int, lastDeleted bool) {
			t.Helper()
			recs := got[key(id)]
			if extra := s.mayRepeat(ids.MessageID(id)) / maxHolders; len(recs) < versions || len(recs) > versions+extra {
				t.Fatalf("%s: %d records, want %d (+ up to %d after failed POSTs)", key(id), len(recs), versions, extra)
			}
			distinct := map[string]bool{}
			for _, r := range recs {
				distinct[r.ContentHash] = true
			}
			if len(distinct) != hashes {
				t.Errorf("%s: %d distinct hashes, want %d", key(id), len(distinct), hashes)
			}
			if last := recs[len(recs)-1]; last.Deleted != lastDeleted {
				t.Errorf("%s: last version deleted=%v, want %v", key(id), last.Deleted, lastDeleted)
			}
		}
		check("om_1", 1, 1, false)
		check("om_2", 2, 1, false)
		check("om_3", 1, 1, false)
		check("om_5", 2, 2, true)
		if recs := got[key("om_4")]; len(recs) != 0 {
			t.Errorf("om_4 (never held) got %d records, want none", len(recs))
		}
	}
	if n := testutil.ToFloat64(s.ing.m.recalls.WithLabelValues("none", "not_held")); n != 1 {
		t.Errorf("recalls of messages nobody holds = %v, want 1 (om_4)", n)
	}
	if n := s.lark.Calls(larktest.PathGetMessage); n != 0 {
		t.Errorf("larktest get-message calls = %d, want 0 (om_5 is in the recent index, om_4 is held nowhere)", n)
	}

	// The contacts cache learned Alice's name in the background: a new message
	// carries it.
	waitUntil(t, "contacts cache knows Alice", func() bool { _, ok := s.contacts.Name(tAlice); return ok })
	must(s.lark.AddEvent(larktest.DeliverOnce, b.Text(m("om_6", now.Add(-time.Minute)), "recovered")))
	s.deliver(context.Background())
	named := 0
	for _, c := range s.readAll(2*6 + 2) {
		if c.rec.MessageID == "om_6" {
			named++
			if c.rec.ActorDisplayName != "Alice" {
				t.Errorf("om_6 record for %s: actor name %q, want Alice", c.rec.WorkspaceID, c.rec.ActorDisplayName)
			}
		}
	}
	if named != 2 {
		t.Errorf("om_6 has %d records, want 2", named)
	}
}

// TestBindingAddedAtRuntime: a chat bound while running is ingested from its next
// message, without a restart (the cache entry for the unbound chat is dropped by
// NOTIFY; both TTLs are an hour).
func TestBindingAddedAtRuntime(t *testing.T) {
	now := time.Now()
	sc := larktest.IncidentForTest(t, larktest.App{AppID: tApp, BotOpenID: tBot}, "ws-late", now.Add(-time.Hour))
	const chat = ids.ChatID("oc_late")
	b := larktest.Builder{AppID: tApp, TenantKey: tTenant}
	m := func(id string, at time.Time) larktest.Msg {
		return larktest.Msg{ID: ids.MessageID(id), Chat: chat, From: larktest.Author{OpenID: tAlice}, At: at}
	}
	if err := sc.AddEvent(larktest.DeliverOnce, b.Text(m("om_before", now.Add(-10*time.Minute)), "anyone here?")); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{scenario: sc})
	s.deliver(context.Background())
	if n := s.events(OutcomeIgnored, bindings.ReasonUnboundChat); n != 1 {
		t.Fatalf("unbound chat ignored %v times, want 1", n)
	}

	if _, err := s.st.BindChat(context.Background(), "ws-late", chat); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the binding is seen", func() bool {
		res, err := s.resolver.Resolve(context.Background(), chat, now)
		return err == nil && len(res.Targets) == 1
	})
	if err := s.lark.AddEvent(larktest.DeliverOnce, b.Text(m("om_after", now.Add(-time.Minute)), "bound now")); err != nil {
		t.Fatal(err)
	}
	s.deliver(context.Background())
	recs := s.readAll(1)
	if recs[0].rec.MessageID != "om_after" || recs[0].rec.WorkspaceID != "ws-late" {
		t.Fatalf("record %+v", recs[0].rec)
	}
}

// TestKafkaDownNothingAcknowledgedNothingLost: the evidence topic does not exist (the
// producer's client never auto-creates), so every callback fails with 503 and Lark
// redelivers; once the topic exists every event lands and nothing is lost.
func TestKafkaDownNothingAcknowledgedNothingLost(t *testing.T) {
	now := time.Now()
	sc := larktest.IncidentForTest(t, larktest.App{AppID: tApp, BotOpenID: tBot}, "ws-1", now.Add(-time.Hour), tChat)
	b := larktest.Builder{AppID: tApp, TenantKey: tTenant}
	const n = 5
	for i := range n {
		if err := sc.AddEvent(larktest.DeliverOnce, b.Text(msg("om_k"+strconv.Itoa(i), now.Add(-time.Duration(n-i)*time.Minute)), "status update")); err != nil {
			t.Fatal(err)
		}
	}
	topic := "larkline-ingest-missing-" + randomHex(t, 6)
	s := newStack(t, stackOptions{scenario: sc, topic: topic, timeout: time.Second})

	adm := kadm.NewClient(s.client)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
	var (
		wg   sync.WaitGroup
		rep  larktest.Report
		err2 error
	)
	wg.Go(func() { rep, err2 = s.lark.Deliver(context.Background(), s.url) })
	waitUntil(t, "callbacks failing", func() bool { return s.events(OutcomeFailed, ReasonKafkaUnavailable) >= 2 })
	if got := s.events(OutcomeAccepted, ReasonOK); got != 0 {
		t.Fatalf("accepted %v callbacks while the topic is missing", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, itPartitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	wg.Wait()
	s.noteFailed(rep)
	if err2 != nil {
		t.Fatalf("deliver: %v (undelivered %+v)", err2, rep.Undelivered())
	}
	failures := 0
	for _, d := range rep.Deliveries {
		for _, a := range d.Attempts {
			if a.Status != http.StatusOK {
				failures++
				if a.Status != http.StatusServiceUnavailable {
					t.Errorf("event %s: a failed attempt answered %d, want 503", d.MessageID, a.Status)
				}
			}
		}
	}
	if failures == 0 {
		t.Fatal("no attempt failed; the outage was not exercised")
	}
	recs := s.readAll(n)
	var msgs []string
	for _, c := range recs {
		msgs = append(msgs, string(c.rec.MessageID))
	}
	slices.Sort(msgs)
	msgs = slices.Compact(msgs)
	if len(msgs) != n {
		t.Fatalf("messages in the topic: %v, want %d distinct", msgs, n)
	}
}

// TestBrokerUnreachable: a producer pointed at a closed port answers 503 within the
// event timeout and produces nothing.
func TestBrokerUnreachable(t *testing.T) {
	// The topic exists on the test broker, so that only the closed port can make the
	// produce fail (without it a missing topic answered 503 too).
	u := newUnit(t, unitOptions{key: tKey, topic: testenv.NewTopic(t, 1, nil),
		producer: testkafka.Client(t, kafka.Options{Brokers: []string{closedPort(t)}})})
	u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
	u.ing.timeout = 500 * time.Millisecond
	a := u.post(envJSON(t, u.builder.Text(msg("om_nobroker", time.Now()), "hi")))
	if a.status != http.StatusServiceUnavailable || a.body["reason"] != ReasonKafkaUnavailable {
		t.Fatalf("answer %d %v, want 503 %s", a.status, a.body, ReasonKafkaUnavailable)
	}
}

// callback is the signed and encrypted POST sender makes, to the stack, of a text
// message id in tChat.
func (s *stack) callback(t testing.TB, sender *larktest.Sender, id string, at time.Time, text string) *http.Request {
	t.Helper()
	b := larktest.Builder{AppID: tApp, TenantKey: tTenant, Token: tToken}
	req, err := sender.Request(context.Background(), s.url, envJSON(t, b.Text(msg(id, at), text)))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// newCallbackStack is a stack for incident ws-1, firing for an hour before now and
// bound to tChat, and a sender whose callbacks it accepts.
func newCallbackStack(t *testing.T, now time.Time) (*stack, *larktest.Sender) {
	t.Helper()
	sc := larktest.IncidentForTest(t, larktest.App{AppID: tApp, BotOpenID: tBot}, "ws-1", now.Add(-time.Hour), tChat)
	return newStack(t, stackOptions{scenario: sc}), newSender(t, tKey, tToken, nil)
}

// postRequest posts req to the stack and returns the answer's status and body.
func postRequest(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// TestForgedAndStaleCallbacksProduceNothing sends, through HTTP to the full stack, a
// forged signature and a stale timestamp (both rejected) and then a genuine event:
// only the genuine one is in the topic.
func TestForgedAndStaleCallbacksProduceNothing(t *testing.T) {
	now := time.Now()
	s, sender := newCallbackStack(t, now)
	forged := s.callback(t, sender, "om_forged", now, "transfer the money")
	forged.Header.Set(larktest.HeaderSignature, "00"+forged.Header.Get(larktest.HeaderSignature)[2:])
	if got, _ := postRequest(t, forged); got != http.StatusBadRequest {
		t.Fatalf("forged signature answered %d, want 400 (every rejection alike)", got)
	}
	stale := newSender(t, tKey, tToken, func() time.Time { return time.Now().Add(-time.Hour) })
	replay := s.callback(t, stale, "om_replayed", now, "old news")
	if got, _ := postRequest(t, replay); got != http.StatusBadRequest {
		t.Fatalf("stale timestamp answered %d, want 400 (every rejection alike)", got)
	}
	genuine := s.callback(t, sender, "om_genuine", now, "all clear")
	if got, _ := postRequest(t, genuine); got != http.StatusOK {
		t.Fatalf("genuine callback answered %d", got)
	}
	recs := s.readAll(1)
	if recs[0].rec.MessageID != "om_genuine" {
		t.Fatalf("topic holds %s", recs[0].rec.MessageID)
	}
	if s.events(OutcomeRejected, ReasonBadSignature) != 1 || s.events(OutcomeRejected, ReasonStaleTimestamp) != 1 {
		t.Fatal("rejections not counted")
	}
}

// TestReplayedCallbackProducesNothing captures a genuine, signed and encrypted
// callback and sends the very same bytes again (issue #19): the replay is answered 200
// (a redelivery of an answered event must stop Lark's retries) but nothing is
// produced, while a new event still is. Before the replay guard the copy was
// produced a second time.
func TestReplayedCallbackProducesNothing(t *testing.T) {
	now := time.Now()
	s, sender := newCallbackStack(t, now)
	captured := s.callback(t, sender, "om_captured", now, "rotate the db password")
	body, err := io.ReadAll(captured.Body)
	if err != nil {
		t.Fatal(err)
	}
	again := func() *http.Request {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = captured.Header.Clone()
		return req
	}
	if code, answer := postRequest(t, again()); code != http.StatusOK {
		t.Fatalf("original callback: %d %s", code, answer)
	}
	for i := range 3 {
		if code, answer := postRequest(t, again()); code != http.StatusOK {
			t.Fatalf("replay %d: %d %s, want 200", i+1, code, answer)
		}
	}
	next := s.callback(t, sender, "om_next", now.Add(time.Second), "done")
	if code, answer := postRequest(t, next); code != http.StatusOK {
		t.Fatalf("a new event after the replays: %d %s", code, answer)
	}
	recs := s.readAll(2)
	if len(recs) != 2 || recs[0].rec.MessageID != "om_captured" || recs[1].rec.MessageID != "om_next" {
		var got []string
		for _, r := range recs {
			got = append(got, string(r.rec.MessageID))
		}
		t.Fatalf("topic holds %v, want [om_captured om_next]", got)
	}
	if n := s.events(OutcomeIgnored, ReasonReplayedEvent); n != 3 {
		t.Fatalf("replays counted %v, want 3", n)
	}
	if n := s.events(OutcomeAccepted, ReasonOK); n != 2 {
		t.Fatalf("accepted events %v, want 2", n)
	}
}

// TestContactsThroughSDK fills the contacts cache with the real SDK's batch call
// against larktest, including Lark's rate-limit answer.
func TestContactsThroughSDK(t *testing.T) {
	sc, err := larktest.NewScenario(larktest.App{AppID: tApp, BotOpenID: tBot})
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]string{"ou_maya": "Maya Chen", "ou_lei": "王磊", "ou_priya": "Priya Nair"}
	for id, name := range users {
		if err := sc.AddUser(larktest.User{OpenID: id, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	appID := larktest.NewAppID()
	srv := larktest.StartForTest(t, larktest.Options{AppID: appID, AppSecret: itSecret, Scenario: sc})
	if err := srv.FailNext(larktest.PathUsersBatch, 1, larktest.FaultRateLimit(1)); err != nil {
		t.Fatal(err)
	}
	dir, err := larkapi.New(lark.NewClient(appID, itSecret, lark.WithOpenBaseUrl(srv.URL()), lark.WithReqTimeout(2*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c, err := NewContacts(ContactsOptions{Directory: dir, BatchWait: 20 * time.Millisecond, RequestsPerSecond: 100,
		NegativeTTL: time.Hour, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	ask := []string{"ou_maya", "ou_lei", "ou_priya", "ou_stranger"}
	for _, id := range ask {
		if _, ok := c.Name(id); ok {
			t.Fatalf("%s known before any lookup", id)
		}
	}
	// The first batch meets the rate limit; the ids are asked for again when seen
	// again, after Lark's reset (1 s).
	waitUntil(t, "every known user resolved", func() bool {
		all := true
		for id, want := range users {
			if got, ok := c.Name(id); !ok || got != want {
				all = false
			}
		}
		c.Name("ou_stranger")
		return all
	})
	if n := testutil.ToFloat64(c.m.requests.WithLabelValues("retryable_error")); n != 1 {
		t.Errorf("rate-limited requests = %v, want 1", n)
	}
	waitUntil(t, "stranger cached as unknown", func() bool {
		c.Name("ou_stranger")
		return testutil.ToFloat64(c.m.lookups.WithLabelValues("unknown")) >= 1
	})
	waitUntil(t, "the lookups done", func() bool { return len(queuedLookups(c)) == 0 })
	calls := srv.Calls(larktest.PathUsersBatch)
	for range 10 {
		for _, id := range ask {
			c.Name(id) // queues a lookup, if it would, before it returns
		}
	}
	if q := queuedLookups(c); len(q) != 0 {
		t.Errorf("cached names queued lookups of %v", q)
	}
	if got := srv.Calls(larktest.PathUsersBatch); got != calls {
		t.Errorf("cached names caused %d more batch calls", got-calls)
	}
	if calls > 4 {
		t.Errorf("%d batch calls for 4 ids; lookups are not batched", calls)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	p, err := freeport.Reserve() // reserved: no other test binds it meanwhile
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Release() })
	return p.Addr()
}
