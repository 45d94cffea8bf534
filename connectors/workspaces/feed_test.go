package workspaces

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// feedEnv is a workspace topic and a dead-letter topic on the real broker.
type feedEnv struct {
	t       *testing.T
	brokers []string
	topic   string
	dlq     string
	codecs  *schemas.Codecs
	raw     *kgo.Client // produces arbitrary records, with larkline's settings
}

func newFeedEnv(t *testing.T, partitions int32) *feedEnv {
	t.Helper()
	compact := "compact"
	e := &feedEnv{
		t:       t,
		brokers: testenv.KafkaBrokers(t),
		topic:   testenv.NewTopic(t, partitions, map[string]*string{kafka.ConfigCleanupPolicy: &compact}),
		dlq:     testenv.NewTopic(t, 1, nil),
	}
	var err error
	if e.codecs, err = schemas.NewCodecs(schemas.Topics{Workspace: e.topic, DeadLetter: e.dlq}); err != nil {
		t.Fatal(err)
	}
	e.raw = testkafka.Client(t, kafka.Options{Brokers: e.brokers, ClientID: "workspaces-test"})
	return e
}

// record encodes and produces a workspace record keyed by its id (no validation
// beyond the schema's).
func (e *feedEnv) record(rec schemas.WorkspaceRecord) {
	e.t.Helper()
	e.recordKeyed(string(rec.ID), rec)
}

func (e *feedEnv) recordKeyed(key string, rec schemas.WorkspaceRecord) {
	e.t.Helper()
	b, err := e.codecs.Workspace.Encode(context.Background(), rec)
	if err != nil {
		e.t.Fatalf("encode %+v: %v", rec, err)
	}
	e.produce(key, b)
}

func (e *feedEnv) produce(key string, value []byte) {
	e.t.Helper()
	testkafka.Produce(e.t, e.raw, &kgo.Record{Topic: e.topic, Key: []byte(key), Value: value})
}

func rec(id ids.WorkspaceID, version int64, status string, chats ...ids.ChatID) schemas.WorkspaceRecord {
	return schemas.WorkspaceRecord{ID: id, Type: "incident", Status: status, CreatedAt: t0.Add(-time.Hour),
		Version: version, Chats: chats, UpdatedAt: t0}
}

// consumer starts a Consumer on the feed with group and applier, and returns a stop
// function that cancels Run, checks it returned nil and closes the consumer.
func (e *feedEnv) consumer(group string, a Applier, reg *prometheus.Registry) (stop func()) {
	e.t.Helper()
	c, err := NewConsumer(e.consumerOptions(group, a, reg))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Run: %v", err)
			}
			c.Close()
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *feedEnv) consumerOptions(group string, a Applier, reg *prometheus.Registry) ConsumerOptions {
	return ConsumerOptions{
		Kafka:           kafka.Options{Brokers: e.brokers, ClientID: "workspaces-test", Consumer: kafka.ConsumerOptions{FetchMaxWait: 100 * time.Millisecond}},
		Group:           group,
		Topic:           e.topic,
		DeadLetterTopic: e.dlq,
		Codecs:          e.codecs,
		Applier:         a,
		Now:             fixedNow,
		MinBackoff:      10 * time.Millisecond,
		MaxBackoff:      50 * time.Millisecond,
		Registry:        reg,
	}
}

// drain runs a consumer of group until it has committed the end of every
// partition, stops it and returns the registry of its metrics.
func (e *feedEnv) drain(group string, a Applier) *prometheus.Registry {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	stop := e.consumer(group, a, reg)
	testenv.WaitCommitted(e.t, waitLimit, group, e.topic)
	stop()
	return reg
}

// deadLetters reads and decodes the first n records of the dead-letter topic.
func (e *feedEnv) deadLetters(n int) []schemas.DeadLetter {
	e.t.Helper()
	var out []schemas.DeadLetter
	for _, r := range testenv.ReadFirst(e.t, e.dlq, n) {
		d, err := e.codecs.DeadLetter.Decode(context.Background(), r.Value)
		if err != nil {
			e.t.Fatalf("decode dead letter: %v", err)
		}
		if string(d.Key) != string(r.Key) {
			e.t.Errorf("dead letter keyed %q holds key %q", r.Key, d.Key)
		}
		out = append(out, d)
	}
	return out
}

// snapshot renders the workspace and binding tables, without the store's own
// updated_at and bound-at times.
func snapshot(t *testing.T, st *store.Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	rows, err := st.Pool().Query(ctx, `SELECT id, type, status, created_at, version FROM workspaces ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id, typ, status string
			created         time.Time
			version         int64
		)
		if err := rows.Scan(&id, &typ, &status, &created, &version); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "workspace %s %s %s %s v%d\n", id, typ, status, created.UTC().Format(time.RFC3339), version)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	rows, err = st.Pool().Query(ctx, `SELECT workspace_id, chat_id FROM workspace_chat_bindings ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ws, chat string
		if err := rows.Scan(&ws, &chat); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "binding %s %s\n", ws, chat)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return b.String()
}

func feedCount(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	m, err := newFeedMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return testutil.ToFloat64(m.records.WithLabelValues(outcome))
}

func applier(t *testing.T, st *store.Store) Applier {
	t.Helper()
	a, err := NewApplier(st)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestFeedOrderingTombstonesDeadLettersAndReplay runs the feed on the real broker and
// Postgres: an older version arriving after a newer one is ignored, a tombstone
// removes bindings and archives, invalid records are parked with their reason, a
// restart resumes from committed offsets, and a fresh group replaying the compacted
// topic from the start converges to the same tables, on a fresh database and on the
// same one.
func TestFeedOrderingTombstonesDeadLettersAndReplay(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 3)
	// Out of order: v2, then v1 — v2 wins, including its bindings.
	e.record(rec("A", 2, "firing", "oc_a1", "oc_a2"))
	e.record(rec("A", 1, "recovered", "oc_old"))
	// In order: bindings replaced, status changed.
	e.record(rec("D", 1, "firing", "oc_d1", "oc_d2"))
	e.record(rec("D", 2, "recovered", "oc_d2", "oc_d3"))
	// A tombstone removes the bindings and archives the workspace.
	e.record(rec("B", 1, "firing", "oc_b1", "oc_shared"))
	e.produce("B", nil)
	// A chat bound to two workspaces keeps the other binding.
	e.record(rec("C", 4, "firing", "oc_shared"))
	// A tombstone of an unknown workspace changes nothing.
	e.produce("NEVER", nil)
	// Invalid records.
	e.produce("E", []byte("not avro at all"))
	e.record(rec("F", 1, "open", "oc_f"))     // unknown status
	e.recordKeyed("G", rec("H", 1, "firing")) // key is not the record's id
	future := rec("I", 1, "firing")
	future.CreatedAt = t0.Add(time.Hour)
	e.record(future)
	e.produce("bad key/with slash", nil) // tombstone whose key is not a workspace id

	const want = `workspace A incident firing 2025-03-04T09:00:00Z v2
workspace B incident archived 2025-03-04T09:00:00Z v1
workspace C incident firing 2025-03-04T09:00:00Z v4
workspace D incident recovered 2025-03-04T09:00:00Z v2
binding A oc_a1
binding A oc_a2
binding C oc_shared
binding D oc_d2
binding D oc_d3
`
	st := newStore(t)
	reg := e.drain("g1", applier(t, st))
	if got := snapshot(t, st); got != want {
		t.Fatalf("tables after the feed:\n%s\nwant:\n%s", got, want)
	}
	for outcome, want := range map[string]float64{outcomeApplied: 5, outcomeIgnoredOlder: 1, outcomeTombstone: 2, outcomeDeadLettered: 5} {
		if got := feedCount(t, reg, outcome); got != want {
			t.Errorf("records{outcome=%s} = %v, want %v", outcome, got, want)
		}
	}

	// Every invalid record is parked once, with its reason, its place and its bytes.
	wantReasons := map[string]string{
		"E": schemas.ReasonMalformed, "F": schemas.ReasonInvalidRecord, "G": schemas.ReasonInvalidRecord,
		"I": schemas.ReasonInvalidRecord, "bad key/with slash": schemas.ReasonInvalidRecord,
	}
	wantInError := map[string]string{"F": "status", "G": "key", "I": "created_at", "bad key/with slash": "tombstone key"}
	for _, d := range e.deadLetters(len(wantReasons)) {
		key := string(d.Key)
		reason, ok := wantReasons[key]
		if !ok {
			t.Errorf("unexpected dead letter for key %q: %+v", key, d)
			continue
		}
		delete(wantReasons, key)
		if d.Reason != reason || d.Stage != string(ids.StageWorkspaces) || d.Topic != e.topic || d.Offset < 0 || d.Partition < 0 {
			t.Errorf("dead letter of %q: %+v, want reason %s", key, d, reason)
		}
		if !strings.Contains(d.Error, wantInError[key]) {
			t.Errorf("dead letter of %q: error %q does not mention %q", key, d.Error, wantInError[key])
		}
		if key == "E" && string(d.Value) != "not avro at all" {
			t.Errorf("dead letter of E lost the value: %q", d.Value)
		}
	}
	if len(wantReasons) != 0 {
		t.Errorf("not dead-lettered: %v", wantReasons)
	}

	// Restart with the same group: only the new records are processed.
	e.record(rec("A", 3, "archived", "oc_a3"))
	reg2 := e.drain("g1", applier(t, st))
	if got := feedCount(t, reg2, outcomeApplied) + feedCount(t, reg2, outcomeIgnoredOlder) + feedCount(t, reg2, outcomeTombstone) +
		feedCount(t, reg2, outcomeDeadLettered); got != 1 {
		t.Errorf("the restarted group processed %v records, want only the new one", got)
	}
	want2 := strings.Replace(want, "workspace A incident firing 2025-03-04T09:00:00Z v2", "workspace A incident archived 2025-03-04T09:00:00Z v3", 1)
	want2 = strings.Replace(want2, "binding A oc_a1\nbinding A oc_a2\n", "binding A oc_a3\n", 1)
	if got := snapshot(t, st); got != want2 {
		t.Fatalf("tables after the restart:\n%s\nwant:\n%s", got, want2)
	}

	// A fresh group on a fresh database replays the compacted topic to the same state.
	fresh := newStore(t)
	e.drain("g2", applier(t, fresh))
	if got := snapshot(t, fresh); got != want2 {
		t.Fatalf("a fresh group on a fresh database:\n%s\nwant:\n%s", got, want2)
	}
	// And on the same database it changes nothing: every record is an old version.
	reg3 := e.drain("g3", applier(t, st))
	if got := snapshot(t, st); got != want2 {
		t.Fatalf("a fresh group on the same database:\n%s\nwant:\n%s", got, want2)
	}
	if got := feedCount(t, reg3, outcomeApplied); got != 0 {
		t.Errorf("replay on the same database applied %v records, want 0", got)
	}
	if got := feedCount(t, reg3, outcomeIgnoredOlder); got != 7 {
		t.Errorf("replay on the same database ignored %v records, want 7", got)
	}
}

// TestFeedChangesAreVisibleAndNotified: a binding added through the feed is visible to
// store.BindingsForChat and announced on the bindings channel once applied; so is a
// status change to recovered, and the removal of a binding by a tombstone.
func TestFeedChangesAreVisibleAndNotified(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 1)
	st := newStore(t)
	n := listen(t, st)
	e.consumer("g", applier(t, st), nil)
	const ws, chat = ids.WorkspaceID("INC-F"), ids.ChatID("oc_feed")

	e.record(rec(ws, 1, "firing", chat))
	n.waitFor(t, chat)
	if b, ok := bindingOf(t, st, chat, ws); !ok || b.Workspace.Status != store.WorkspaceFiring || b.Workspace.Version != 1 {
		t.Fatalf("binding after the feed bound it: %+v %t", b, ok)
	}

	e.record(rec(ws, 2, "recovered", chat))
	n.waitFor(t, chat)
	if b, ok := bindingOf(t, st, chat, ws); !ok || b.Workspace.Status != store.WorkspaceRecovered {
		t.Fatalf("binding after the feed recovered the workspace: %+v %t", b, ok)
	}

	e.produce(string(ws), nil)
	n.waitFor(t, chat)
	if b, ok := bindingOf(t, st, chat, ws); ok {
		t.Fatalf("binding after the tombstone: %+v", b)
	}
	if w, err := st.GetWorkspace(context.Background(), ws); err != nil || w.Status != store.WorkspaceArchived || w.Version != 2 {
		t.Fatalf("workspace after the tombstone: %+v %v", w, err)
	}
}

// fakeApplier fails its first failures calls with err, then records what it applies.
type fakeApplier struct {
	err      error
	failures int32
	calls    atomic.Int32
	applied  chan ids.WorkspaceID
}

func (f *fakeApplier) ApplyRecord(_ context.Context, w store.Workspace, _ int64, _ []ids.ChatID) (ApplyResult, error) {
	if f.calls.Add(1) <= f.failures {
		return ApplyResult{}, f.err
	}
	f.applied <- w.ID
	return ApplyResult{Outcome: store.WorkspaceInserted}, nil
}

func (f *fakeApplier) ApplyTombstone(_ context.Context, ws ids.WorkspaceID) (TombstoneResult, error) {
	if f.calls.Add(1) <= f.failures {
		return TombstoneResult{}, f.err
	}
	f.applied <- ws
	return TombstoneResult{Found: true}, nil
}

func retries(t *testing.T, reg *prometheus.Registry, op string) float64 {
	t.Helper()
	m, err := newFeedMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return testutil.ToFloat64(m.retries.WithLabelValues(op))
}

// TestFeedRetriesADatabaseOutage: a retryable database error is retried, with
// backoff, until the record applies; the record is neither skipped nor parked.
func TestFeedRetriesADatabaseOutage(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 1)
	outage := &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}
	f := &fakeApplier{err: outage, failures: 5, applied: make(chan ids.WorkspaceID, 10)}
	e.record(rec("INC-R", 1, "firing"))
	e.produce("INC-T", nil)
	reg := e.drain("g", f)
	if got := []ids.WorkspaceID{<-f.applied, <-f.applied}; got[0] != "INC-R" || got[1] != "INC-T" {
		t.Fatalf("applied %v, want INC-R then INC-T", got)
	}
	if got := retries(t, reg, opApply); got != 5 {
		t.Errorf("apply retries = %v, want 5", got)
	}
	if got := feedCount(t, reg, outcomeDeadLettered); got != 0 {
		t.Errorf("dead-lettered %v records during an outage", got)
	}
}

// TestFeedStopsOnAFatalDatabaseError: an error that is neither retryable nor about
// the record's data (here: permission denied) stops Run with the error, and the
// record's offset is not committed, so the next consumer of the group applies it.
func TestFeedStopsOnAFatalDatabaseError(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 1)
	e.record(rec("INC-P", 1, "firing"))
	denied := &pgconn.PgError{Code: "42501", Message: "permission denied for table workspaces"}
	f := &fakeApplier{err: denied, failures: 1, applied: make(chan ids.WorkspaceID, 10)}
	c, err := NewConsumer(e.consumerOptions("g", f, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err = c.Run(ctx)
	c.Close()
	if !errors.As(err, new(*pgconn.PgError)) || !strings.Contains(err.Error(), "INC-P") {
		t.Fatalf("Run = %v, want the permission error naming the workspace", err)
	}
	// The next consumer of the group gets the record again and applies it.
	e.consumer("g", f, nil)
	testenv.WaitCommitted(t, waitLimit, "g", e.topic)
	if got := <-f.applied; got != "INC-P" {
		t.Fatalf("applied %s, want INC-P", got)
	}
}

// TestFeedParksRecordsTheDatabaseRejects: a data or constraint error is not retried
// (it cannot succeed) and not fatal: the record is parked with reason
// rejected_by_store and the feed moves on.
func TestFeedParksRecordsTheDatabaseRejects(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 1)
	rejected := &pgconn.PgError{Code: "23514", Message: "new row violates check constraint"}
	f := &fakeApplier{err: rejected, failures: 1, applied: make(chan ids.WorkspaceID, 10)}
	e.record(rec("INC-X", 1, "firing"))
	e.record(rec("INC-Y", 1, "firing"))
	reg := e.drain("g", f)
	if got := <-f.applied; got != "INC-Y" {
		t.Fatalf("applied %s, want INC-Y", got)
	}
	d := e.deadLetters(1)[0]
	if string(d.Key) != "INC-X" || d.Reason != ReasonRejectedByStore {
		t.Fatalf("dead letter %+v, want INC-X rejected_by_store", d)
	}
	if got := retries(t, reg, opApply); got != 0 {
		t.Errorf("retried a rejected record %v times", got)
	}
}

func TestNewConsumerOptions(t *testing.T) {
	t.Parallel()
	codecs, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	valid := ConsumerOptions{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9"}}, Codecs: codecs, Applier: &fakeApplier{}}
	for _, tc := range []struct {
		name   string
		mutate func(*ConsumerOptions)
	}{
		{"no brokers", func(o *ConsumerOptions) { o.Kafka.Brokers = nil }},
		{"no codecs", func(o *ConsumerOptions) { o.Codecs = nil }},
		{"no applier", func(o *ConsumerOptions) { o.Applier = nil }},
		{"acks leader", func(o *ConsumerOptions) {
			o.Kafka.Producer.Acks = kafka.AcksLeader
			o.Kafka.Producer.DisableIdempotence = true
		}},
		{"same topic twice", func(o *ConsumerOptions) { o.DeadLetterTopic = schemas.DefaultWorkspaceTopic }},
		{"negative skew", func(o *ConsumerOptions) { o.ClockSkew = -time.Second }},
		{"max backoff below min", func(o *ConsumerOptions) { o.MinBackoff, o.MaxBackoff = time.Second, time.Millisecond }},
		{"bad group topic", func(o *ConsumerOptions) { o.Topic = "bad topic" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := valid
			tc.mutate(&o)
			if c, err := NewConsumer(o); !errors.Is(err, ErrInvalidOptions) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("NewConsumer = %v, want ErrInvalidOptions", err)
			}
		})
	}
	c, err := NewConsumer(valid)
	if err != nil {
		t.Fatalf("valid options: %v", err)
	}
	c.Close()
	c.Close() // idempotent
}
