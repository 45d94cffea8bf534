package kafka

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
)

// TestLagOnRealBroker produces N records, commits N-k for a group, and checks the lag
// in offsets and the age of the oldest unconsumed record.
func TestLagOnRealBroker(t *testing.T) {
	const n, k = 20, 7
	ctx := testenv.Context(t, 2*time.Minute)
	topic := newTestTopic(t, 2, nil)
	group := uniqueName(t, "larkline-lag")
	_, adm := adminForTest(t)
	t.Cleanup(func() { _, _ = adm.DeleteGroups(ctx, group) })

	opts, err := NewClientOptions(Options{Brokers: brokersForTest(t), ClientID: "larkline-lag-test"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Records on partition 0 with CreateTime base+i seconds, two on partition 1.
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Partition: 0, Key: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	recs = append(recs, &kgo.Record{Partition: 1, Timestamp: base}, &kgo.Record{Partition: 1, Timestamp: base})
	manual, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer manual.Close()
	if err := manual.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: n - k, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: topic, Partition: 1, At: 2, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, offsets); err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	got, err := Lag(ctx, cl, []string{group}, LagOptions{})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d groups, want 1", len(got))
	}
	g := got[0]
	if g.Err != nil || g.Group != group || g.Members != 0 {
		t.Fatalf("group = %+v", g)
	}
	if len(g.Partitions) != 2 {
		t.Fatalf("partitions = %+v, want 2", g.Partitions)
	}
	p0, p1 := g.Partitions[0], g.Partitions[1]
	if p0.Topic != topic || p0.Partition != 0 || p0.Committed != n-k || p0.End != n || p0.Lag != k || p0.Err != nil {
		t.Fatalf("partition 0 = %+v, want committed %d, end %d, lag %d", p0, n-k, n, k)
	}
	ts := base.Add((n - k) * time.Second) // the record at the committed offset
	if lo, hi := before.Sub(ts), after.Sub(ts); p0.LagTime < lo || p0.LagTime > hi {
		t.Fatalf("partition 0 lag time = %s, want within [%s, %s]", p0.LagTime, lo, hi)
	}
	if p1.Partition != 1 || p1.Lag != 0 || p1.LagTime != 0 || p1.Committed != 2 {
		t.Fatalf("partition 1 = %+v, want caught up", p1)
	}
	if g.TotalLag() != k {
		t.Fatalf("total lag = %d, want %d", g.TotalLag(), k)
	}

	t.Run("timestamps can be skipped", func(t *testing.T) {
		got, err := Lag(ctx, cl, []string{group}, LagOptions{MaxTimestampFetches: new(0)})
		if err != nil {
			t.Fatal(err)
		}
		if p := got[0].Partitions[0]; p.Lag != k || p.LagTime != LagTimeUnknown {
			t.Fatalf("partition 0 = %+v, want lag %d and unknown lag time", p, k)
		}
	})

	t.Run("stopped group is STOP", func(t *testing.T) {
		e, err := NewEvaluator(EvaluatorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := e.Observe(time.Now(), got)
		if st[0].Status != StatusStop || st[0].Partitions[0] != StatusStop || st[0].Partitions[1] != StatusOK {
			t.Fatalf("status = %+v, want STOP (no members, lag on partition 0)", st[0])
		}
	})

	t.Run("invalid arguments", func(t *testing.T) {
		for _, groups := range [][]string{nil, {""}} {
			if _, err := Lag(ctx, cl, groups, LagOptions{}); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Lag(%q) err = %v", groups, err)
			}
		}
		if _, err := Lag(ctx, nil, []string{group}, LagOptions{}); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("nil client: err = %v", err)
		}
	})
}

func TestConnectionOptsDropsProducerConsumerAndGroupOptions(t *testing.T) {
	in := []kgo.Opt{
		kgo.SeedBrokers("127.0.0.1:1"),
		kgo.ClientID("x"),
		kgo.ProducerLinger(time.Second),
		kgo.ConsumeTopics("t"),
		kgo.ConsumerGroup("g"),
	}
	out := connectionOpts(in)
	if len(out) != 2 {
		t.Fatalf("kept %d options, want 2 (seed brokers, client id)", len(out))
	}
	cl, err := kgo.NewClient(append(out, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset()}}))...)
	if err != nil {
		t.Fatalf("direct consumer from kept options: %v", err)
	}
	cl.Close()
}

func TestEvaluator(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		after     time.Duration // since t0
		members   int
		committed int64
		lag       int64
		lagTime   time.Duration
		pErr      error
		gErr      error
	}
	tests := []struct {
		name  string
		steps []step
		want  Status
	}{
		{"caught up", []step{{0, 1, 10, 0, 0, nil, nil}}, StatusOK},
		{"small recent lag", []step{{0, 1, 10, 3, time.Second, nil, nil}}, StatusOK},
		{"old unconsumed record", []step{{0, 1, 10, 3, 3 * time.Minute, nil, nil}}, StatusWarn},
		{"no members with lag", []step{{0, 0, 10, 3, time.Second, nil, nil}}, StatusStop},
		{"no members caught up", []step{{0, 0, 10, 0, 0, nil, nil}}, StatusOK},
		{"partition error", []step{{0, 1, 10, -1, LagTimeUnknown, errors.New("x"), nil}}, StatusErr},
		{"group error", []step{{0, 1, 10, 0, 0, nil, errors.New("x")}}, StatusErr},
		{"offset not moving for StallAfter", []step{
			{0, 1, 10, 3, time.Second, nil, nil},
			{3 * time.Minute, 1, 10, 3, time.Second, nil, nil},
			{6 * time.Minute, 1, 10, 5, time.Second, nil, nil},
		}, StatusStall},
		{"offset not moving, not yet StallAfter", []step{
			{0, 1, 10, 3, time.Second, nil, nil},
			{time.Minute, 1, 10, 3, time.Second, nil, nil},
		}, StatusOK},
		{"lag growing every sample", []step{
			{0, 1, 10, 3, time.Second, nil, nil},
			{time.Minute, 1, 12, 4, time.Second, nil, nil},
			{2 * time.Minute, 1, 14, 6, time.Second, nil, nil},
		}, StatusWarn},
		{"lag shrinking", []step{
			{0, 1, 10, 9, time.Second, nil, nil},
			{time.Minute, 1, 15, 6, time.Second, nil, nil},
			{2 * time.Minute, 1, 20, 3, time.Second, nil, nil},
		}, StatusOK},
		{"recovered after an error", []step{
			{0, 1, 10, -1, LagTimeUnknown, errors.New("x"), nil},
			{time.Minute, 1, 12, 0, 0, nil, nil},
		}, StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewEvaluator(EvaluatorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var st []GroupStatus
			for _, s := range tt.steps {
				g := GroupLag{Group: "g", Members: s.members, Err: s.gErr, Partitions: []PartitionLag{
					{Group: "g", Topic: "t", Partition: 0, Committed: s.committed, Lag: s.lag, LagTime: s.lagTime, Err: s.pErr},
				}}
				st = e.Observe(t0.Add(s.after), []GroupLag{g})
			}
			if st[0].Status != tt.want {
				t.Fatalf("status = %s, want %s", st[0].Status, tt.want)
			}
		})
	}
}

func TestEvaluatorForgetsPartitionsAndWorstWins(t *testing.T) {
	e, err := NewEvaluator(EvaluatorOptions{Window: 2, StallAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	mk := func(parts ...PartitionLag) []GroupLag {
		return []GroupLag{{Group: "g", Members: 1, Partitions: parts}}
	}
	p := func(part int32, committed, lag int64, lagTime time.Duration) PartitionLag {
		return PartitionLag{Group: "g", Topic: "t", Partition: part, Committed: committed, Lag: lag, LagTime: lagTime}
	}
	e.Observe(t0, mk(p(0, 5, 1, 0), p(1, 5, 0, 0)))
	st := e.Observe(t0.Add(2*time.Minute), mk(p(0, 5, 1, 0), p(1, 9, 2, 5*time.Minute)))
	if st[0].Status != StatusStall || st[0].Partitions[0] != StatusStall || st[0].Partitions[1] != StatusWarn {
		t.Fatalf("status = %+v, want STALL overall (partition 0 STALL, partition 1 WARN)", st[0])
	}
	if st[0].TotalLag != 3 || st[0].MaxLagTime != 5*time.Minute {
		t.Fatalf("total lag %d, max lag time %s", st[0].TotalLag, st[0].MaxLagTime)
	}
	// Partition 0 disappears (reassigned away) and comes back: its history restarts.
	e.Observe(t0.Add(3*time.Minute), mk(p(1, 11, 0, 0)))
	st = e.Observe(t0.Add(4*time.Minute), mk(p(0, 5, 1, 0), p(1, 11, 0, 0)))
	if st[0].Status != StatusOK {
		t.Fatalf("status after partition 0 returned = %s, want OK (history forgotten)", st[0].Status)
	}
	if _, err := NewEvaluator(EvaluatorOptions{Window: 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("window 1: err = %v", err)
	}
	for s, want := range map[Status]string{StatusOK: "OK", StatusWarn: "WARN", StatusStall: "STALL", StatusStop: "STOP", StatusErr: "ERR", Status(9): "Status(9)"} {
		if s.String() != want {
			t.Fatalf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}
