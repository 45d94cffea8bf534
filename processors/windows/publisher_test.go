package windows

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeRoundClient fails produces and commits as told and counts them.
type fakeRoundClient struct {
	produceErrs []error // by attempt; past the end: nil
	commitErrs  []error
	produces    int
	produced    int // records produced
	commits     int
	// onAllow runs at each AllowRebalance (a rebalance that happens then)
	onAllow func()
}

func (f *fakeRoundClient) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	f.produces++
	var err error
	if f.produces <= len(f.produceErrs) {
		err = f.produceErrs[f.produces-1]
	}
	if err == nil {
		f.produced += len(rs)
	}
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i] = kgo.ProduceResult{Record: r, Err: err}
	}
	return out
}

func (f *fakeRoundClient) CommitRecords(context.Context, ...*kgo.Record) error {
	f.commits++
	if f.commits <= len(f.commitErrs) {
		return f.commitErrs[f.commits-1]
	}
	return nil
}

func (f *fakeRoundClient) AllowRebalance() {
	if f.onAllow != nil {
		f.onAllow()
	}
}

func TestPublisherEvictionIsBounded(t *testing.T) {
	t.Parallel()
	down := errors.New("broker unreachable")
	always := func(err error, n int) []error {
		out := make([]error, n)
		for i := range out {
			out[i] = err
		}
		return out
	}
	for _, tc := range []struct {
		name string
		cl   func(own *ownership) *fakeRoundClient
		// want: produce attempts, records produced, commit attempts
		produces, produced, commits int
	}{
		{"acked and committed", func(*ownership) *fakeRoundClient { return &fakeRoundClient{} }, 1, 2, 1},
		{"commit refused after the member lost the group: no produce again, no loop",
			func(*ownership) *fakeRoundClient {
				return &fakeRoundClient{commitErrs: always(kerr.IllegalGeneration, 100)}
			}, 1, 2, 1},
		{"commit failing otherwise: retried a bounded number of times, never produced again",
			func(*ownership) *fakeRoundClient { return &fakeRoundClient{commitErrs: always(down, 100)} },
			1, 2, publisherCommitAttempts},
		{"produce failing, then the partition is revoked in the rebalance it allowed: dropped, no stall",
			func(own *ownership) *fakeRoundClient {
				f := &fakeRoundClient{produceErrs: always(down, 1000)}
				f.onAllow = func() { own.revoked([]int32{0}) }
				return f
			}, 1, 0, 0},
		{"produce failing twice, then acked: produced once, committed once",
			func(*ownership) *fakeRoundClient { return &fakeRoundClient{produceErrs: []error{down, down}} }, 3, 2, 1},
		{"partition revoked and assigned back while retrying: still produced and committed",
			func(own *ownership) *fakeRoundClient {
				f := &fakeRoundClient{produceErrs: []error{down}}
				f.onAllow = func() { own.revoked([]int32{0}); own.assigned([]int32{0}) }
				return f
			}, 2, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := newOwnership()
			cl := tc.cl(own)
			pb := &publishing{cl: cl, own: own, m: newMetrics(nil), log: slog.New(slog.DiscardHandler)}
			var r round
			hdr := []kgo.RecordHeader{{Key: HeaderProcessorVersion, Value: []byte("v1")}, {Key: "larkline-close-reason", Value: []byte("grace_elapsed")}}
			r.add(&kgo.Record{Partition: 0, Offset: 7}, []*kgo.Record{{Headers: hdr}, {Headers: hdr}})
			pb.publish(context.Background(), &r, 0)
			if cl.produces != tc.produces || cl.produced != tc.produced || cl.commits != tc.commits {
				t.Fatalf("%d produce attempts (%d records), %d commit attempts; want %d (%d), %d",
					cl.produces, cl.produced, cl.commits, tc.produces, tc.produced, tc.commits)
			}
		})
	}
}
