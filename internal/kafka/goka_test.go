package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

func gokaForTest(t *testing.T) *Goka {
	t.Helper()
	g, err := NewGoka(GokaOptions{
		Options:           Options{Brokers: brokersForTest(t), ClientID: "larkline-kafka-test"},
		TableReplication:  1,
		StreamReplication: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// franzClient returns a franz-go client built from NewClientOptions plus extra.
func franzClient(t *testing.T, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts, err := NewClientOptions(Options{Brokers: brokersForTest(t), ClientID: "larkline-kafka-test"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeN reads n records of topic from the start with a group-less franz-go client.
func consumeN(ctx context.Context, t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := franzClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records from %s: %v", len(out), n, topic, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

type testChat struct {
	w ids.WorkspaceID
	c ids.ChatID
}

func testKeys(chats, perChat int) (keys []string, chatOf map[string]string) {
	chatOf = map[string]string{}
	for i := 0; i < chats; i++ {
		tc := testChat{ids.WorkspaceID(fmt.Sprintf("ws-%d", i%3)), ids.ChatID(fmt.Sprintf("oc_chat%d", i))}
		for j := 0; j < perChat; j++ {
			k := ids.EvidenceKey(tc.w, tc.c, ids.MessageID(fmt.Sprintf("om_%d_%d", i, j)))
			keys = append(keys, k)
			chatOf[k] = ids.ChatKey(tc.w, tc.c)
		}
	}
	return keys, chatOf
}

// TestGokaEmitterAndFranzProducerAgreeOnPartitions writes the same keys through a Goka
// emitter and a franz-go producer into one multi-partition topic of the real broker
// and compares the partitions the broker stored them in.
func TestGokaEmitterAndFranzProducerAgreeOnPartitions(t *testing.T) {
	const partitions = 6
	ctx := testenv.Context(t, 2*time.Minute)
	topic := newTestTopic(t, partitions, nil)
	keys, chatOf := testKeys(24, 5)

	em, err := goka.NewEmitter(brokersForTest(t), goka.Stream(topic), new(codec.String), gokaForTest(t).EmitterOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		// A brand-new topic's leaders can still be moving when sarama first asks
		// (NOT_LEADER_OR_FOLLOWER): that is retryable, and retried here with a bound.
		err := em.EmitSync(k, "goka")
		for attempt := 0; err != nil && IsRetryable(err) && attempt < 20; attempt++ {
			time.Sleep(100 * time.Millisecond) // backoff between bounded retries of a retryable error
			err = em.EmitSync(k, "goka")
		}
		if err != nil {
			t.Fatalf("goka emit %s: %v", k, err)
		}
	}
	if err := em.Finish(); err != nil {
		t.Fatal(err)
	}

	prod := franzClient(t, kgo.DefaultProduceTopic(topic))
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Key: []byte(k), Value: []byte("franz")}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	got := map[string]map[string]int32{"goka": {}, "franz": {}}
	for _, r := range consumeN(ctx, t, topic, 2*len(keys)) {
		got[string(r.Value)][string(r.Key)] = r.Partition
	}
	used := map[int32]bool{}
	chatPartition := map[string]int32{}
	for _, k := range keys {
		g, gok := got["goka"][k]
		f, fok := got["franz"][k]
		if !gok || !fok {
			t.Fatalf("key %s: goka record %v, franz record %v", k, gok, fok)
		}
		if g != f {
			t.Fatalf("key %s: goka wrote partition %d, franz-go partition %d", k, g, f)
		}
		if want := Partition([]byte(k), partitions); g != want {
			t.Fatalf("key %s: stored in partition %d, Partition says %d", k, g, want)
		}
		chat := chatOf[k]
		if p, ok := chatPartition[chat]; ok && p != g {
			t.Fatalf("chat %s split across partitions %d and %d", chat, p, g)
		}
		chatPartition[chat] = g
		used[g] = true
	}
	if len(used) < 3 {
		t.Fatalf("only %d partitions used by %d chats: the test would not notice a constant partitioner", len(used), len(chatPartition))
	}
}

// TestGokaProcessorWithFranzClients runs a Goka processor with a group table between
// franz-go producers and consumers on the real broker: franz-go produces evidence-like
// records (one duplicated), the processor deduplicates per message in its table and
// emits one record per new message keyed by chat, and franz-go consumes the output.
func TestGokaProcessorWithFranzClients(t *testing.T) {
	const partitions = 4
	ctx := testenv.Context(t, 3*time.Minute)
	in := newTestTopic(t, partitions, nil)
	out := newTestTopic(t, partitions, nil)
	group := uniqueName(t, "larkline-goka")
	table := string(goka.GroupTable(goka.Group(group)))
	_, adm := adminForTest(t)
	deleteTopicsAtCleanup(t, adm, table)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteGroups(c, group)
	})

	keys, chatOf := testKeys(12, 4)
	duplicated := keys[5]

	// franz-go produces the evidence, the duplicate last.
	prod := franzClient(t, kgo.DefaultProduceTopic(in))
	var recs []*kgo.Record
	inPartition := map[string]int32{}
	for _, k := range append(slices.Clone(keys), duplicated) {
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte("evidence of " + k)})
	}
	res := prod.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		inPartition[string(r.Record.Key)] = r.Record.Partition
	}

	graph := goka.DefineGroup(goka.Group(group),
		goka.Input(goka.Stream(in), new(codec.Bytes), func(gctx goka.Context, msg any) {
			var seen int64
			if v := gctx.Value(); v != nil {
				seen = v.(int64)
			}
			gctx.SetValue(seen + 1)
			if seen == 0 {
				gctx.Emit(goka.Stream(out), string(ids.PartitionKey([]byte(gctx.Key()))), []byte(gctx.Key()))
			}
		}),
		goka.Output(goka.Stream(out), new(codec.Bytes)),
		goka.Persist(new(codec.Int64)),
	)
	popts := append(gokaForTest(t).ProcessorOptions(),
		goka.WithStorageBuilder(storage.MemoryBuilder()),
		goka.WithLogger(log.New(io.Discard, "", 0)),
	)
	proc, err := goka.NewProcessor(brokersForTest(t), graph, popts...)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- proc.Run(runCtx) }()
	stopped := false
	stopProc := func() {
		if !stopped {
			stopped = true
			stop()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("processor Run: %v", err)
			}
		}
	}
	defer stopProc()

	// franz-go consumes the output: one record per distinct message, keyed by chat,
	// in the partition of the chat's evidence.
	emitted := map[string]bool{}
	for _, r := range consumeN(ctx, t, out, len(keys)) {
		msg := string(r.Value)
		if emitted[msg] {
			t.Fatalf("message %s emitted twice: the group table did not deduplicate", msg)
		}
		emitted[msg] = true
		if string(r.Key) != chatOf[msg] {
			t.Fatalf("output key %s for message %s, want chat key %s", r.Key, msg, chatOf[msg])
		}
		if r.Partition != inPartition[msg] {
			t.Fatalf("chat %s: output partition %d, evidence partition %d", r.Key, r.Partition, inPartition[msg])
		}
	}
	for _, k := range keys {
		if !emitted[k] {
			t.Fatalf("message %s not emitted", k)
		}
	}

	// The processor's own lookups (Goka's hash arithmetic over our hasher) find every
	// key, and the duplicate was counted twice.
	for _, k := range keys {
		want := int64(1)
		if k == duplicated {
			want = 2
		}
		testenv.EventuallyNil(t, time.Minute, "the count of message "+k, func() error {
			v, err := proc.Get(k)
			if err != nil {
				t.Fatalf("processor Get %s: %v", k, err)
			}
			if v != nil && v.(int64) > want {
				t.Fatalf("message %s counted %d times, want %d", k, v, want)
			}
			if v == nil || v.(int64) != want {
				return fmt.Errorf("state %v, want %d", v, want)
			}
			return nil
		})
	}
	stopProc()

	// The group table Goka wrote with sarama places every key where Partition says.
	for _, r := range consumeN(ctx, t, table, len(keys)+1) {
		if want := Partition(r.Key, partitions); r.Partition != want {
			t.Fatalf("table key %s in partition %d, Partition says %d", r.Key, r.Partition, want)
		}
		if want := inPartition[string(r.Key)]; r.Partition != want {
			t.Fatalf("table key %s in partition %d, its evidence in %d", r.Key, r.Partition, want)
		}
	}
}
