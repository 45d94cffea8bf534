package testenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readTimeout bounds one read of a topic of the shared broker; it only keeps a
// broken test from hanging.
const readTimeout = 2 * time.Minute

// ReadFirst reads topic of the shared broker from the start until it has at least
// n records (one fetch may bring more) and returns them in the order fetched. It
// fails the test when n have not come within two minutes.
func ReadFirst(t testing.TB, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := consumer(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("testenv: reading %s (have %d of %d records): %v", topic, len(out), n, err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// ReadTopic returns every record of topic of the shared broker up to its end
// offsets at the call, in partition then offset order.
func ReadTopic(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	adm := adminClient(t)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("testenv: start offsets of %s: %v", topic, err)
	}
	ends := endOffsets(t, ctx, topic)
	want := map[int32]int64{} // partition → end offset, for partitions holding records
	ends.Each(func(o kadm.ListedOffset) {
		if start, ok := starts.Lookup(topic, o.Partition); ok && o.Offset > start.Offset {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl := consumer(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	byPart := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("testenv: reading %s (partitions not read to their end: %v): %v", topic, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return // a record written after the call
			}
			byPart[r.Partition] = append(byPart[r.Partition], r)
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	var out []*kgo.Record
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		out = append(out, byPart[p]...)
	}
	return out
}

// EndOffsets sums the end offsets of topic's partitions on the shared broker: how
// many records were ever written to it.
func EndOffsets(t testing.TB, topic string) int64 {
	t.Helper()
	var n int64
	for _, end := range PartitionEnds(t, topic) {
		n += end
	}
	return n
}

// PartitionEnds are the end offsets of topic's partitions on the shared broker, by
// partition.
func PartitionEnds(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ends := map[int32]int64{}
	endOffsets(t, ctx, topic).Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends
}

func endOffsets(t testing.TB, ctx context.Context, topic string) kadm.ListedOffsets {
	t.Helper()
	ends, err := adminClient(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("testenv: end offsets of %s: %v", topic, err)
	}
	return ends
}

// consumer is a client of the shared broker for one read; the caller closes it.
func consumer(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(KafkaBrokers(t)...),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatalf("testenv: creating a kafka consumer: %v", err)
	}
	return cl
}

// WaitCommitted waits until group has committed, on every partition of topic of
// the shared broker that holds records, the end offset the partition has when
// asked: the group has consumed all that was written. Broker errors (a
// coordinator moving in a rebalance) are waited out and reported on timeout.
func WaitCommitted(t testing.TB, within time.Duration, group, topic string) {
	t.Helper()
	adm := adminClient(t)
	EventuallyNil(t, within, "group "+group+" committing the end of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("end offsets: %w", err)
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			return fmt.Errorf("committed offsets: %w", err)
		}
		var behind []string
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := committed.Lookup(topic, o.Partition); o.Offset > 0 && (!ok || c.At < o.Offset) {
				behind = append(behind, fmt.Sprintf("partition %d at %d of %d", o.Partition, c.At, o.Offset))
			}
		})
		if len(behind) > 0 {
			slices.Sort(behind)
			return fmt.Errorf("behind: %s", strings.Join(behind, ", "))
		}
		return nil
	})
}
