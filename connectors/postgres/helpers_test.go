package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
const waitBound = 3 * time.Minute

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// env is one integration environment: a real broker with a fresh evidence topic and
// dead-letter topic, and a fresh, migrated Postgres database.
type env struct {
	brokers []string
	topic   string
	dlq     string
	dsn     string
	pool    *pgxpool.Pool // direct pool, for assertions and for sinks that are not cut off
	st      *store.Store
	codecs  *schemas.Codecs
	prod    *kgo.Client
	adm     *kadm.Client
	parts   int32
}

func newEnv(t testing.TB, partitions int32) *env {
	t.Helper()
	e := &env{
		brokers: testenv.KafkaBrokers(t),
		topic:   testenv.NewTopic(t, partitions, nil),
		dlq:     testenv.NewTopic(t, 1, nil),
		dsn:     testenv.PostgresDSN(t),
		parts:   partitions,
	}
	e.pool, e.st = migratedStore(t, e.dsn, 8)
	var err error
	if e.codecs, err = schemas.NewCodecs(schemas.Topics{Evidence: e.topic, DeadLetter: e.dlq}); err != nil {
		t.Fatal(err)
	}
	e.prod = testkafka.Client(t, kafka.Options{Brokers: e.brokers, Producer: kafka.ProducerOptions{Linger: new(time.Duration(0))}})
	e.adm = kadm.NewClient(e.prod)
	return e
}

// migratedStore opens a pool on dsn (closed when the test ends), migrates the
// database and returns the pool and a store on it.
func migratedStore(t testing.TB, dsn string, maxConns int32) (*pgxpool.Pool, *store.Store) {
	t.Helper()
	db := teststore.Open(t, teststore.DSN(dsn), teststore.MaxConns(maxConns))
	return db.Pool, db.Store
}

// uniqueGroup returns a consumer group id no other test uses.
func uniqueGroup(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "larkline-sink-test-" + hex.EncodeToString(b[:])
}

// options returns sink options for this environment and group, writing through st.
func (e *env) options(group string, st Store) Options {
	return Options{
		Kafka: kafka.Options{
			Brokers:  e.brokers,
			Consumer: kafka.ConsumerOptions{SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second},
		},
		Group:           group,
		EvidenceTopic:   e.topic,
		DeadLetterTopic: e.dlq,
		Store:           st,
		Codecs:          e.codecs,
		RetryBackoffMin: 20 * time.Millisecond,
		RetryBackoffMax: 300 * time.Millisecond,
		DrainTimeout:    5 * time.Second,
		Logger:          testLogger(),
		Registry:        prometheus.NewRegistry(),
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("LARKLINE_TEST_SINK_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// running is a sink started by start.
type running struct {
	s    *Sink
	done chan struct{}
	err  error
	stop context.CancelFunc
}

// start runs a sink with o (and hooks) until the test ends or wait/stop is called.
func start(t testing.TB, o Options, h hooks) *running {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.hooks = h
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{s: s, done: make(chan struct{}), stop: cancel}
	go func() {
		defer close(r.done)
		r.err = s.Run(ctx)
	}()
	t.Cleanup(func() { r.shutdown(t) })
	return r
}

// shutdown stops the sink, waits for Run and closes it; it fails the test if Run
// returned an error.
func (r *running) shutdown(t testing.TB) {
	t.Helper()
	r.stop()
	r.wait(t)
	r.s.Close()
	if r.err != nil {
		t.Errorf("Run: %v", r.err)
		r.err = nil
	}
}

// wait waits for Run to return by itself and returns its error.
func (r *running) wait(t testing.TB) error {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(waitBound):
		t.Fatalf("Run did not return within %s", waitBound)
	}
	return r.err
}

// counter reads a sink metric.
func (r *running) counter(c *prometheus.CounterVec, label string) int {
	return int(testutil.ToFloat64(c.WithLabelValues(label)))
}

func (r *running) outcome(o string) int { return r.counter(r.s.m.evidence, o) }

// committedOffsets sums the group's committed offsets on the evidence topic.
func (e *env) committedOffsets(t testing.TB, group string) int64 {
	t.Helper()
	committed, err := e.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Topic == e.topic && o.At > 0 {
			n += o.At
		}
	})
	return n
}

// resetGroup sets every committed offset of the (stopped) group back to the start.
func (e *env) resetGroup(t testing.TB, group string) {
	t.Helper()
	offsets := kadm.Offsets{}
	for p := range e.parts {
		offsets.Add(kadm.Offset{Topic: e.topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	resp, err := e.adm.CommitOffsets(context.Background(), group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("reset offsets of %s: %v", group, err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// evidenceOf builds a valid, synthesis-eligible evidence version of one message.
// Versions with equal updated times differ only by content: then only the order in
// which they are applied decides which one stays.
func evidenceOf(ws ids.WorkspaceID, chat ids.ChatID, msg ids.MessageID, text string, updated time.Time) schemas.EvidenceRecord {
	return schemas.EvidenceRecord{
		WorkspaceID:       ws,
		ChatID:            chat,
		MessageID:         msg,
		Source:            ids.SourceLark,
		SourceType:        ids.SourceTypeLarkMessage,
		SourceKey:         ids.MessageSourceKey(chat, msg),
		OccurredAt:        t0,
		SourceUpdatedAt:   updated,
		ObservedAt:        updated.Add(time.Second),
		ActorID:           "ou_alice",
		ActorDisplayName:  "Alice",
		MessageType:       "text",
		Content:           text,
		ContentHash:       sha("live\x00" + text),
		SynthesisEligible: true,
		MetadataJSON:      fmt.Sprintf(`{"chat_id":%q,"message_type":"text"}`, chat),
		IngestPath:        schemas.IngestEvent,
	}
}

// recalled is the deleted (redacted) version of r.
func recalled(r schemas.EvidenceRecord, at time.Time) schemas.EvidenceRecord {
	r.Content, r.Deleted = "", true
	r.SynthesisEligible, r.IneligibleReason = false, schemas.IneligibleDeleted
	r.ContentHash = sha("deleted\x00" + string(r.MessageID))
	r.SourceUpdatedAt, r.ObservedAt = at, at
	r.MetadataJSON = "{}"
	return r
}

// record encodes r for the evidence topic under its own key.
func (e *env) record(t testing.TB, r schemas.EvidenceRecord) *kgo.Record {
	t.Helper()
	v, err := e.codecs.Evidence.Encode(context.Background(), r)
	if err != nil {
		t.Fatalf("encode evidence: %v", err)
	}
	return &kgo.Record{Topic: e.topic, Key: []byte(r.Key()), Value: v}
}

// tombstone is the null value that deletes key.
func (e *env) tombstone(key string) *kgo.Record {
	return &kgo.Record{Topic: e.topic, Key: []byte(key)}
}

// raw is a record with arbitrary bytes.
func (e *env) raw(key string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: e.topic, Key: []byte(key), Value: value}
}

func (e *env) produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records: %v", len(recs), err)
	}
}

// rows returns the evidence table by source key.
func (e *env) rows(t testing.TB) map[string]store.Evidence {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, workspace_id, source_key, content, content_hash,
		deleted, synthesis_eligible, source_updated_at FROM workspace_timeline_evidence`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]store.Evidence{}
	for rows.Next() {
		var ev store.Evidence
		var ws string
		if err := rows.Scan(&ev.ID, &ws, &ev.SourceKey, &ev.Content, &ev.ContentHash, &ev.Deleted,
			&ev.SynthesisEligible, &ev.SourceUpdatedAt); err != nil {
			t.Fatal(err)
		}
		ev.WorkspaceID = ids.WorkspaceID(ws)
		key := ws + "|" + ev.SourceKey
		if _, dup := out[key]; dup {
			t.Fatalf("two rows for %s", key)
		}
		out[key] = ev
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func rowKey(r schemas.EvidenceRecord) string { return string(r.WorkspaceID) + "|" + r.SourceKey }

// deadLetters reads and decodes the first n dead letters (more when one fetch
// brings more).
func (e *env) deadLetters(t testing.TB, n int) []schemas.DeadLetter {
	t.Helper()
	var out []schemas.DeadLetter
	for _, r := range testenv.ReadFirst(t, e.dlq, n) {
		d, err := e.codecs.DeadLetter.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatalf("dead letter at offset %d does not decode: %v", r.Offset, err)
		}
		if string(r.Key) != string(d.Key) {
			t.Errorf("dead letter record key %q, envelope key %q", r.Key, d.Key)
		}
		out = append(out, d)
	}
	return out
}

// rawDeadLetters reads the first n records of the dead-letter topic whole (key, value
// and headers concatenated).
func (e *env) rawDeadLetters(t testing.TB, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range testenv.ReadFirst(t, e.dlq, n) {
		b := append(append([]byte(nil), r.Key...), r.Value...)
		for _, h := range r.Headers {
			b = append(append(b, h.Key...), h.Value...)
		}
		out = append(out, b)
	}
	return out
}

// recordAt reads the record at topic/partition@offset.
func (e *env) recordAt(t testing.TB, topic string, partition int32, offset int64) *kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().At(offset)}}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s/%d@%d: %v", topic, partition, offset, err)
		}
		var got *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if got == nil && r.Offset == offset {
				got = r
			}
		})
		if got != nil {
			return got
		}
	}
}

// chatsPerPartition returns, for each partition of the evidence topic, one chat of
// workspace ws whose records land there.
func (e *env) chatsPerPartition(ws ids.WorkspaceID) []ids.ChatID {
	out := make([]ids.ChatID, e.parts)
	found := 0
	for i := 0; found < int(e.parts); i++ {
		c := ids.ChatID(fmt.Sprintf("oc_chat%04d", i))
		p := kafka.Partition([]byte(ids.ChatKey(ws, c)), e.parts)
		if out[p] == "" {
			out[p] = c
			found++
		}
	}
	return out
}

// pgProxy is a TCP proxy in front of Postgres that the test can cut: down, it closes
// every open connection and hangs up on new ones, as a database that crashed or
// became unreachable does.
type pgProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	up     bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newPGProxy(t testing.TB, dsn string) (*pgProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse dsn: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: u.Host, up: true, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		p.SetUp(false)
		p.wg.Wait()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if !p.up {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		p.wg.Go(func() { pipe(up, c) })
		p.wg.Go(func() { pipe(c, up) })
	}
}

// SetUp lets connections through (true) or cuts them all (false).
func (p *pgProxy) SetUp(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = up
	if !up {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// openStore opens a store over dsn with a small pool and a short connect timeout.
func openStore(t testing.TB, dsn string) *store.Store {
	t.Helper()
	pool, err := store.OpenPool(context.Background(), store.PoolConfig{DSN: dsn, MaxConns: 4, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	st, err := store.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var errKilled = errors.New("killed by the test between the database commit and the offset commit")
