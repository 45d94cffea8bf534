package synthesis

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPartitionTrackerCommitsOnlyAContiguousPrefix(t *testing.T) {
	tr := newPartitionTracker()
	var ps []*pendingRecord
	for off := int64(10); off < 15; off++ {
		ps = append(ps, tr.add(&kgo.Record{Offset: off}))
	}
	offset := func(r *kgo.Record) int64 {
		if r == nil {
			return -1
		}
		return r.Offset
	}
	for _, step := range []struct {
		finish int
		want   int64 // the record to mark, -1 for none
	}{
		{finish: 1, want: -1}, // 11 done, 10 still running
		{finish: 3, want: -1},
		{finish: 0, want: 11}, // 10 done: 10 and 11 are a prefix
		{finish: 2, want: 13}, // 12 done: 12 and 13
		{finish: 4, want: 14},
	} {
		if got := offset(tr.finish(ps[step.finish])); got != step.want {
			t.Fatalf("finishing offset %d marked %d, want %d", ps[step.finish].rec.Offset, got, step.want)
		}
	}
	if len(tr.pending) != 0 {
		t.Fatalf("%d records still pending", len(tr.pending))
	}
}

func TestLimiter(t *testing.T) {
	l := newLimiter(2)
	ctx := context.Background()
	relA, err := l.acquire(ctx, "ws-a")
	if err != nil {
		t.Fatal(err)
	}
	// A second window of the same workspace waits, holding no global slot.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := l.acquire(short, "ws-a"); err == nil {
		t.Fatal("a second window of one workspace got the lock")
	}
	cancel()
	if l.inUse() != 1 {
		t.Fatalf("slots in use = %d, want 1", l.inUse())
	}
	relB, err := l.acquire(ctx, "ws-b")
	if err != nil {
		t.Fatal(err)
	}
	// Two global slots are taken: a third workspace waits.
	short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := l.acquire(short, "ws-c"); err == nil {
		t.Fatal("a third window got a slot beyond the global bound")
	}
	cancel()
	relA()
	relA() // idempotent
	relC, err := l.acquire(ctx, "ws-c")
	if err != nil {
		t.Fatal(err)
	}
	relB()
	relC()
	if l.inUse() != 0 || len(l.locks) != 0 {
		t.Fatalf("after release: %d slots, %d workspace locks", l.inUse(), len(l.locks))
	}
}

func TestBackoffIsBoundedAndGrows(t *testing.T) {
	b := &retryDelay{min: 100 * time.Millisecond, max: time.Second}
	prevMax := time.Duration(0)
	for i := range 12 {
		d := b.next()
		ceil := min(100*time.Millisecond<<i, time.Second)
		if d < ceil/2 || d > ceil {
			t.Fatalf("delay %d = %s, want within [%s, %s]", i, d, ceil/2, ceil)
		}
		prevMax = max(prevMax, d)
	}
	if prevMax > time.Second {
		t.Fatalf("delay above the cap: %s", prevMax)
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Fatalf("after reset: %s", d)
	}
}
