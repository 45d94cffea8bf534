package lagexport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func uniqueGroup(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "larkline-lagexport-test-" + hex.EncodeToString(b[:])
}

// admin returns an admin client on the test broker; groups are deleted at cleanup.
func admin(t testing.TB, groups ...string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(testenv.KafkaBrokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := adm.DeleteGroups(ctx, groups...); err != nil {
			t.Logf("deleting groups %v: %v", groups, err)
		}
		cl.Close()
	})
	return adm
}

func commit(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, at map[int32]int64) {
	t.Helper()
	offsets := kadm.Offsets{}
	for p, o := range at {
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, group, offsets); err != nil {
		t.Fatalf("committing %v for %s: %v", at, group, err)
	}
}

// series counts the series of name whose labels include the given ones.
func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metrics
				}
			}
			n++
		}
	}
	return n
}

// wantStatus checks that exactly the given status of the group is 1.
func wantStatus(t *testing.T, reg *prometheus.Registry, group string, want kafka.Status) {
	t.Helper()
	for _, s := range statuses {
		v, ok := testenv.MetricValue(t, reg, "larkline_consumergroup_status", map[string]string{"group": group, "status": s.String()})
		if !ok {
			t.Fatalf("status %s of group %s not exported", s, group)
		}
		if (s == want) != (v == 1) || (v != 0 && v != 1) {
			t.Fatalf("larkline_consumergroup_status{group=%s,status=%s} = %v, want the current status to be %s", group, s, v, want)
		}
	}
}

func wantGauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, want float64) {
	t.Helper()
	v, ok := testenv.MetricValue(t, reg, name, labels)
	if !ok {
		t.Fatalf("%s%v not exported", name, labels)
	}
	if v != want {
		t.Fatalf("%s%v = %v, want %v", name, labels, v, want)
	}
}

// TestExporterOnRealBroker produces N records, commits N-k for a group, and checks the
// exported lag, lag_seconds, members and status; then it moves the group and watches
// the status follow the evaluator: STOP → OK for a group without members, WARN →
// STALL for one whose member does not commit.
func TestExporterOnRealBroker(t *testing.T) {
	const n, k = 30, 8
	ctx := testenv.Context(t, 3*time.Minute)
	topic := testenv.NewTopic(t, 2, nil)
	stopped, stuck, absent := uniqueGroup(t), uniqueGroup(t), uniqueGroup(t)
	adm := admin(t, stopped, stuck, absent)

	opts, err := kafka.NewClientOptions(kafka.Options{Brokers: testenv.KafkaBrokers(t), ClientID: "larkline-lagexport-test"})
	if err != nil {
		t.Fatal(err)
	}
	producer, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	// Partition 0: N records with CreateTime base+i seconds; partition 1: two.
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Partition: 0, Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	recs = append(recs, &kgo.Record{Partition: 1, Value: []byte("a"), Timestamp: base}, &kgo.Record{Partition: 1, Value: []byte("b"), Timestamp: base})
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit(t, ctx, adm, stopped, topic, map[int32]int64{0: n - k, 1: 2})
	commit(t, ctx, adm, stuck, topic, map[int32]int64{0: n - k, 1: 2})

	clock := testenv.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	e, err := New(Options{
		Kafka:    kafka.Options{Brokers: testenv.KafkaBrokers(t), ClientID: "larkline-lagexport-test"},
		Groups:   []string{stopped, stuck, absent},
		Clock:    clock.Now,
		Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	p0 := map[string]string{"group": stopped, "topic": topic, "partition": "0"}
	p1 := map[string]string{"group": stopped, "topic": topic, "partition": "1"}

	t.Run("lag k on the partition behind, sane lag seconds, STOP without members", func(t *testing.T) {
		before := time.Now()
		e.poll(ctx)
		after := time.Now()
		if s := e.Snapshot(); s.Err != nil || !s.At.Equal(clock.Now()) {
			t.Fatalf("snapshot err %v at %v", s.Err, s.At)
		}
		wantGauge(t, reg, "larkline_consumergroup_lag", p0, k)
		wantGauge(t, reg, "larkline_consumergroup_lag", p1, 0)
		wantGauge(t, reg, "larkline_consumergroup_lag_seconds", p1, 0)
		// lag_seconds is the age of the record at the committed offset N-k.
		ts := base.Add((n - k) * time.Second)
		got, ok := testenv.MetricValue(t, reg, "larkline_consumergroup_lag_seconds", p0)
		if !ok {
			t.Fatal("lag_seconds of partition 0 not exported")
		}
		if lo, hi := before.Sub(ts).Seconds(), after.Sub(ts).Seconds(); got < lo || got > hi {
			t.Fatalf("lag_seconds = %v, want within [%v, %v]", got, lo, hi)
		}
		wantGauge(t, reg, "larkline_consumergroup_members", map[string]string{"group": stopped}, 0)
		wantStatus(t, reg, stopped, kafka.StatusStop)
		// A group that never committed has no partitions, no members and is OK.
		wantStatus(t, reg, absent, kafka.StatusOK)
		wantGauge(t, reg, "larkline_consumergroup_members", map[string]string{"group": absent}, 0)
		if c := series(t, reg, "larkline_consumergroup_lag", map[string]string{"group": absent}); c != 0 {
			t.Fatalf("group without commits has %d lag series", c)
		}
		if v, _ := testenv.MetricValue(t, reg, "larkline_lag_last_success_timestamp_seconds", map[string]string{}); v != float64(clock.Now().Unix()) {
			t.Fatalf("last success = %v, want %v", v, clock.Now().Unix())
		}
	})

	t.Run("caught up is OK", func(t *testing.T) {
		commit(t, ctx, adm, stopped, topic, map[int32]int64{0: n})
		clock.Advance(time.Minute)
		e.poll(ctx)
		wantGauge(t, reg, "larkline_consumergroup_lag", p0, 0)
		wantGauge(t, reg, "larkline_consumergroup_lag_seconds", p0, 0)
		wantStatus(t, reg, stopped, kafka.StatusOK)
	})

	t.Run("a member that does not commit: WARN by age, then STALL", func(t *testing.T) {
		member, err := kgo.NewClient(append(opts,
			kgo.ConsumerGroup(stuck), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer member.Close()
		go func() { // polling keeps the member in the group; it never commits
			for ctx.Err() == nil && !member.PollFetches(ctx).IsClientClosed() {
			}
		}()
		testenv.Eventually(t, time.Minute, "the member joining group "+stuck, func() bool {
			d, err := adm.DescribeGroups(ctx, stuck)
			if err != nil {
				t.Fatal(err)
			}
			g := d[stuck]
			return g.State == "Stable" && len(g.Members) == 1
		})
		s0 := map[string]string{"group": stuck, "topic": topic, "partition": "0"}
		clock.Advance(time.Minute)
		e.poll(ctx)
		wantGauge(t, reg, "larkline_consumergroup_members", map[string]string{"group": stuck}, 1)
		wantGauge(t, reg, "larkline_consumergroup_lag", s0, k)
		// The oldest unconsumed record is an hour old: WARN (default WarnAfter 2m).
		wantStatus(t, reg, stuck, kafka.StatusWarn)
		// Same committed offset across samples DefaultStallAfter apart: STALL.
		clock.Advance(kafka.DefaultStallAfter)
		e.poll(ctx)
		wantStatus(t, reg, stuck, kafka.StatusStall)
		wantStatus(t, reg, stopped, kafka.StatusOK)
	})
}

// TestExporterPollFailure points the exporter at a port where no broker listens: the
// sample fails, every group is ERR, no lag series remain, and the failure is counted.
func TestExporterPollFailure(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Options{
		Kafka:       kafka.Options{Brokers: []string{"127.0.0.1:1"}},
		Groups:      []string{"larkline-sink", "larkline-synthesis"},
		PollTimeout: 2 * time.Second,
		Registry:    reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.poll(context.Background())
	s := e.Snapshot()
	if s.Err == nil {
		t.Fatal("snapshot has no error")
	}
	for _, g := range []string{"larkline-sink", "larkline-synthesis"} {
		wantStatus(t, reg, g, kafka.StatusErr)
		if c := series(t, reg, "larkline_consumergroup_members", map[string]string{"group": g}); c != 0 {
			t.Fatalf("members of %s exported after a failed sample", g)
		}
	}
	if c := series(t, reg, "larkline_consumergroup_lag", nil); c != 0 {
		t.Fatalf("%d lag series after a failed sample", c)
	}
	wantGauge(t, reg, "larkline_lag_poll_failures_total", map[string]string{}, 1)
	if _, ok := testenv.MetricValue(t, reg, "larkline_lag_last_success_timestamp_seconds", map[string]string{}); !ok {
		t.Fatal("last success gauge not exported")
	}
	if v, _ := testenv.MetricValue(t, reg, "larkline_lag_last_success_timestamp_seconds", map[string]string{}); v != 0 {
		t.Fatalf("last success = %v after only a failure", v)
	}
}

// TestRunAndClose runs the loop on the real broker until a sample lands, then closes.
func TestRunAndClose(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	group := uniqueGroup(t)
	reg := prometheus.NewRegistry()
	e, err := New(Options{
		Kafka:    kafka.Options{Brokers: testenv.KafkaBrokers(t)},
		Groups:   []string{group},
		Interval: time.Second,
		Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	testenv.Eventually(t, time.Minute, "a first sample", func() bool { return !e.Snapshot().At.IsZero() })
	if err := e.Run(ctx); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run: %v", err)
	}
	wantStatus(t, reg, group, kafka.StatusOK)
	e.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after Close", err)
	}
	if err := e.Run(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	if c := series(t, reg, "larkline_consumergroup_status", nil); c != 0 {
		t.Fatalf("%d status series after Close unregistered the exporter", c)
	}
	e.Close() // idempotent
}

func TestOptionsValidation(t *testing.T) {
	valid := func() Options {
		return Options{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9092"}}, Groups: []string{"larkline-sink"}}
	}
	many := make([]string, MaxGroups+1)
	for i := range many {
		many[i] = fmt.Sprintf("g%d", i)
	}
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string // substring of the error; "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"no groups", func(o *Options) { o.Groups = nil }, "at least one group"},
		{"blank group", func(o *Options) { o.Groups = []string{" "} }, "blank"},
		{"duplicate group", func(o *Options) { o.Groups = []string{"a", "a"} }, "listed twice"},
		{"too many groups", func(o *Options) { o.Groups = many }, "at most"},
		{"interval too short", func(o *Options) { o.Interval = time.Millisecond }, "interval"},
		{"interval too long", func(o *Options) { o.Interval = 2 * time.Hour }, "interval"},
		{"negative poll timeout", func(o *Options) { o.PollTimeout = -time.Second }, "poll timeout"},
		{"timestamp timeout beyond poll", func(o *Options) { o.PollTimeout = time.Second; o.Lag.TimestampTimeout = 2 * time.Second }, "timestamp timeout"},
		{"bad timestamp fetches", func(o *Options) { o.Lag.MaxTimestampFetches = new(-2) }, "timestamp fetches"},
		{"negative timestamp fetches", func(o *Options) { o.Lag.MaxTimestampFetches = new(-1) }, "timestamp fetches"},
		{"no timestamp fetches", func(o *Options) { o.Lag.MaxTimestampFetches = new(0) }, ""},
		{"bad evaluator", func(o *Options) { o.Evaluator.Window = 1 }, "evaluator"},
		{"no brokers", func(o *Options) { o.Kafka.Brokers = nil }, "Brokers"},
		{"blank group prefix", func(o *Options) { o.GroupPrefixes = []string{""} }, "prefix is blank"},
		{"too many group prefixes", func(o *Options) { o.GroupPrefixes = many[:MaxGroupPrefixes+1] }, "group prefixes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mutate(&o)
			e, err := New(o)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				e.Close()
				return
			}
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want ErrInvalidOptions mentioning %q", err, tt.want)
			}
		})
	}
}

// TestRegisterTwice: a second exporter on the same registry is refused, not panicking.
func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := Options{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9092"}}, Groups: []string{"larkline-sink"}, Registry: reg}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := New(o); err == nil {
		t.Fatal("second exporter on one registry: no error")
	}
}

// TestGroupPrefixesFollowGroupsThatComeAndGo (issue #31): a processor version started
// while the exporter runs is exported from the next sample on, by its group prefix,
// and one retired (its group deleted) is no longer exported.
func TestGroupPrefixesFollowGroupsThatComeAndGo(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	topic := testenv.NewTopic(t, 1, nil)
	fixed := uniqueGroup(t)
	prefix := uniqueGroup(t) + "-windows-"
	v2, v3 := prefix+"v2", prefix+"v3"
	adm := admin(t, fixed, v2, v3)
	producer, err := kgo.NewClient(kgo.SeedBrokers(testenv.KafkaBrokers(t)...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit(t, ctx, adm, fixed, topic, map[int32]int64{0: 2})
	commit(t, ctx, adm, v2, topic, map[int32]int64{0: 1})

	reg := prometheus.NewRegistry()
	e, err := New(Options{
		Kafka:  kafka.Options{Brokers: testenv.KafkaBrokers(t), ClientID: "larkline-lagexport-test"},
		Groups: []string{fixed}, GroupPrefixes: []string{prefix}, Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	exported := func() []string {
		var out []string
		for _, g := range e.Snapshot().Groups {
			out = append(out, g.Group)
		}
		return out
	}

	e.poll(ctx)
	if got, want := exported(), []string{fixed, v2}; !slices.Equal(got, want) {
		t.Fatalf("first sample exports %v, want %v", got, want)
	}
	wantGauge(t, reg, "larkline_consumergroup_lag", map[string]string{"group": v2, "topic": topic, "partition": "0"}, 1)

	commit(t, ctx, adm, v3, topic, map[int32]int64{0: 2}) // a version started
	if _, err := adm.DeleteGroups(ctx, v2); err != nil {  // a version retired
		t.Fatal(err)
	}
	e.poll(ctx)
	if got, want := exported(), []string{fixed, v3}; !slices.Equal(got, want) {
		t.Fatalf("after v3 started and v2 was retired the sample exports %v, want %v", got, want)
	}
	if _, ok := testenv.MetricValue(t, reg, "larkline_consumergroup_lag", map[string]string{"group": v2, "topic": topic, "partition": "0"}); ok {
		t.Fatal("the retired version's lag is still exported")
	}
}
