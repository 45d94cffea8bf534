package kafka

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
)

// TestGokaVisitAbandonedByStopIsRaceFree: a visit that a partition abandons because
// it stops (here a rebalance: a second member joins; in production also an outage)
// returns from VisitAllWithStats while the partition is still finishing the key it
// was visiting. Goka v1.1.14 then reads
// its visit counter plainly while that key's commit adds to it atomically: a data
// race (-race reports it), which the window processor met when an outage stopped Goka
// during a scan (issue #30). larkline carries the one-line fix (decisions D32); this
// test goes red under -race without it.
func TestGokaVisitAbandonedByStopIsRaceFree(t *testing.T) {
	topic := newTestTopic(t, 1, nil)
	_, adm := adminForTest(t)
	group := goka.Group(uniqueName(t, "visit-race"))
	deleteTopicsAtCleanup(t, adm, string(group)+"-table")
	g := gokaForTest(t)

	var proc atomic.Pointer[goka.Processor] // the first member, which the visit runs on
	applied := make(chan struct{}, 1)
	entered := make(chan struct{})
	graph := goka.DefineGroup(group,
		goka.Input(goka.Stream(topic), new(codec.String), func(ctx goka.Context, msg any) {
			ctx.SetValue(msg)
			select {
			case applied <- struct{}{}:
			default:
			}
		}),
		goka.Visitor("hold", func(ctx goka.Context, _ any) {
			close(entered)
			// Hold the key until the rebalance stops the processor (Cleanup sets it
			// stopping, then stops each partition), then a little longer, so that the
			// visit is abandoned (its partition stopping) before this key's commit. The
			// pause orders the two in time without synchronizing them: that is what a
			// data race is, and the race detector is the verdict.
			<-ctx.Context().Done()
			select {
			case <-proc.Load().StateReader().WaitForStateMin(goka.ProcStateStopping):
			case <-time.After(time.Minute): // a bound for a hang; the test's assertions follow
			}
			time.Sleep(500 * time.Millisecond) // lets the partition's stop abandon the visit first (above)
		}),
		goka.Persist(new(codec.String)),
	)
	newProc := func() *goka.Processor {
		p, err := goka.NewProcessor(brokersForTest(t), graph, append(g.ProcessorOptions(), goka.WithStorageBuilder(storage.MemoryBuilder()))...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := newProc()
	proc.Store(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	readyCtx, readyCancel := context.WithTimeout(ctx, time.Minute)
	defer readyCancel()
	if err := p.WaitForReadyContext(readyCtx); err != nil {
		t.Fatalf("processor not ready: %v", err)
	}
	em, err := goka.NewEmitter(brokersForTest(t), goka.Stream(topic), new(codec.String), g.EmitterOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := em.EmitSync("k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := em.Finish(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-applied:
	case <-time.After(time.Minute): // a deadline for a hang, not a wait
		t.Fatal("the record was not applied")
	}

	visited := make(chan error, 1)
	go func() {
		_, err := p.VisitAllWithStats(context.Background(), "hold", nil)
		visited <- err
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the visit did not reach the key")
	}
	// A second member joins: the group rebalances and the first member's partition
	// stops while the visit holds its key.
	second, stopSecond := context.WithCancel(context.Background())
	defer stopSecond()
	ran2 := make(chan error, 1)
	go func() { ran2 <- newProc().Run(second) }()
	if err := <-visited; !errors.Is(err, goka.ErrVisitAborted) {
		t.Fatalf("VisitAllWithStats = %v, want it abandoned (goka.ErrVisitAborted)", err)
	}
	stopSecond()
	if err := <-ran2; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("second member's Run = %v", err)
	}
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}
