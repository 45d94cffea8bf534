package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
)

// WaitLimit bounds every wait of the suite and of its helpers, so that a broken
// stage fails instead of hanging. It is not a speed assertion.
const WaitLimit = 90 * time.Second

// pollInterval is the pause between two looks at offsets or group state.
const pollInterval = 50 * time.Millisecond

// clientID names the suite's clients in the broker's request logs.
const clientID = "larkline-conformance"

// metadataMinAge bounds how long the suite's admin calls may answer from cached
// metadata (franz-go's default is 5 s): topics the stage creates itself (a Goka
// loop topic) and leaders must be seen soon after they appear.
const metadataMinAge = 100 * time.Millisecond

// client is the suite's Kafka client: a producer with larkline's settings and
// partitioner (package kafka), and an admin client on the same connections.
type client struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newClient(t *testing.T) *client {
	t.Helper()
	opts, err := kafka.NewClientOptions(kafka.Options{
		Brokers:  testenv.KafkaBrokers(t),
		ClientID: clientID,
		// Every produce is synchronous: nothing to gain from lingering.
		Producer: kafka.ProducerOptions{Linger: new(time.Duration(0))},
	})
	if err != nil {
		t.Fatalf("conformance: kafka client options: %v", err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.MetadataMinAge(metadataMinAge))...)
	if err != nil {
		t.Fatalf("conformance: creating the kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return &client{cl: cl, adm: kadm.NewClient(cl)}
}

// produce writes msgs to topic in order, synchronously, and returns the records
// as the broker acknowledged them (with their partitions and offsets).
func (c *client) produce(t *testing.T, topic string, msgs []Message) []*kgo.Record {
	t.Helper()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(m.Key), Value: m.Value}
	}
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	if err := c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("conformance: producing %d records to %s: %v", len(recs), topic, err)
	}
	return recs
}

// caughtUp waits until group committed every record of topics.
func (c *client) caughtUp(t *testing.T, group string, topics []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	for {
		behind, err := c.behind(ctx, group, topics)
		if err == nil && len(behind) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			if err != nil {
				t.Fatalf("conformance: group %s did not commit every record of %v within %s (last error: %v)", group, topics, WaitLimit, err)
			}
			t.Fatalf("conformance: group %s did not commit every record of %v within %s; behind: %s",
				group, topics, WaitLimit, strings.Join(behind, ", "))
		case <-time.After(pollInterval):
		}
	}
}

// behind lists the partitions of topics holding records beyond group's committed
// offset, as "topic/partition committed N of M".
func (c *client) behind(ctx context.Context, group string, topics []string) ([]string, error) {
	ends, err := c.adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	committed, err := c.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
	}
	var behind []string
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			return // never held a record
		}
		var at int64
		if r, ok := committed.Lookup(o.Topic, o.Partition); ok && r.At > 0 {
			at = r.At
		}
		if at < o.Offset {
			behind = append(behind, fmt.Sprintf("%s/%d committed %d of %d", o.Topic, o.Partition, at, o.Offset))
		}
	})
	slices.Sort(behind)
	return behind, nil
}

// committed sums group's committed offsets on topic.
func (c *client) committed(ctx context.Context, group, topic string) (int64, error) {
	resp, err := c.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
	}
	var n int64
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At > 0 {
			n += o.At
		}
	})
	return n, nil
}

// progressed waits until group's committed offsets on topic sum to more than from.
func (c *client) progressed(t *testing.T, group, topic string, from int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	for {
		n, err := c.committed(ctx, group, topic)
		if err == nil && n > from {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("conformance: group %s committed nothing new on %s within %s (last error: %v)", group, topic, WaitLimit, err)
		case <-time.After(pollInterval):
		}
	}
}

// rewind sets group's committed offsets on topic back to the start of every
// partition. The group must have no members: it waits until the stopped
// instances have left.
func (c *client) rewind(t *testing.T, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	var last error
	for {
		last = c.tryRewind(ctx, group, topic)
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("conformance: rewinding group %s on %s: %v", group, topic, last)
		case <-time.After(pollInterval):
		}
	}
}

// errGroupBusy: the group still has members, so its offsets cannot be set.
var errGroupBusy = errors.New("the group still has members (a stopped instance did not leave it)")

func (c *client) tryRewind(ctx context.Context, group, topic string) error {
	described, err := c.adm.DescribeGroups(ctx, group)
	if err == nil {
		err = described.Error()
	}
	if err != nil {
		return fmt.Errorf("describing the group: %w", err)
	}
	if g := described[group]; g.State != "Empty" && g.State != "Dead" {
		return fmt.Errorf("%w: state %s, %d members", errGroupBusy, g.State, len(g.Members))
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("listing start offsets: %w", err)
	}
	offsets := kadm.Offsets{}
	starts.Each(func(o kadm.ListedOffset) {
		offsets.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	resp, err := c.adm.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing the start offsets: %w", err)
	}
	return nil
}

// partitions returns how many partitions topic has.
func (c *client) partitions(t *testing.T, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	topics, err := c.adm.ListTopics(ctx, topic)
	if err == nil {
		err = topics.Error()
	}
	if err != nil {
		t.Fatalf("conformance: describing topic %s: %v", topic, err)
	}
	return len(topics[topic].Partitions)
}

// CaughtUp waits until group has committed the end offset of every partition of
// topics; partitions that never held a record need no commit. It fails t, naming
// the partitions behind, if that does not happen within WaitLimit. Adapters use it
// to wait for effects that flow through topics the suite does not know of.
func CaughtUp(t *testing.T, group string, topics ...string) {
	t.Helper()
	newClient(t).caughtUp(t, group, topics)
}

// ReadAll returns every record of topic from the start of each partition up to its
// end offset at the time of the call, ordered by partition and offset. Adapters of
// stages that write a topic observe it with ReadAll.
func ReadAll(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	ends, err2 := c.adm.ListEndOffsets(ctx, topic)
	if err2 == nil {
		err2 = ends.Error()
	}
	if err = errors.Join(err, err2); err != nil {
		t.Fatalf("conformance: listing the offsets of %s: %v", topic, err)
	}
	want := map[int32]kgo.Offset{}
	next := map[int32]int64{} // the next offset still to be read
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		if o.Offset > s.Offset {
			want[o.Partition] = kgo.NewOffset().At(s.Offset)
			next[o.Partition] = s.Offset
			end[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	opts, err := kafka.NewClientOptions(kafka.Options{Brokers: testenv.KafkaBrokers(t), ClientID: clientID})
	if err != nil {
		t.Fatalf("conformance: kafka client options: %v", err)
	}
	reader, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}))...)
	if err != nil {
		t.Fatalf("conformance: creating a reader of %s: %v", topic, err)
	}
	defer reader.Close()
	var out []*kgo.Record
	for len(next) > 0 {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("conformance: reading %s: partitions %v not read to their end within %s", topic, next, WaitLimit)
		}
		fs.EachError(func(_ string, p int32, err error) {
			t.Fatalf("conformance: reading %s partition %d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			n, open := next[r.Partition]
			if !open || r.Offset < n {
				return
			}
			if r.Offset < end[r.Partition] {
				out = append(out, r)
			}
			next[r.Partition] = r.Offset + 1
			if r.Offset+1 >= end[r.Partition] {
				delete(next, r.Partition)
			}
		})
	}
	slices.SortStableFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}
