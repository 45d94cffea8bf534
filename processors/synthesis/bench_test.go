package synthesis

import (
	"context"
	"fmt"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// heapPeak samples the bytes of live heap objects every millisecond until stop is
// called, and returns the peak above the level when it started (after a GC).
func heapPeak() (stop func() uint64) {
	runtime.GC()
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { rtmetrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var (
		peak = base // written by the sampler only, read after it stopped
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			peak = max(peak, read())
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		if peak < base {
			return 0
		}
		return peak - base
	}
}

// BenchmarkLargeWindow synthesizes one window of LARKLINE_BENCH_WINDOW_MESSAGES
// messages (default 100,000), named by a version 3 closed record, with the rule
// synthesizer on the real broker and Postgres, and reports the peak live heap above
// the idle level while the window runs, as peak-heap-MiB and as a ratio to the same
// peak of the floor: one bare keyset read of the window's rows through the store in
// pages of the same size (what any reader of the window must hold). Memory per window
// is one chunk, its context and a bounded memory of recent messages, whatever the
// window's size.
func BenchmarkLargeWindow(b *testing.B) {
	n := 100_000
	if v := os.Getenv("LARKLINE_BENCH_WINDOW_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("LARKLINE_BENCH_WINDOW_MESSAGES=%q: want a positive count", v)
		}
	}
	e := newEnv(b)
	ctx := context.Background()
	// n messages spread over the window, in batches the store accepts
	step := winLen / time.Duration(n+1)
	const batch = 5000
	for from := 0; from < n; from += batch {
		rows := make([]store.Evidence, 0, batch)
		for i := from; i < min(from+batch, n); i++ {
			rows = append(rows, e.evidence(win, line{id: fmt.Sprintf("big%06d", i), at: time.Duration(i+1) * step,
				sender: fmt.Sprintf("User%d", i%20), text: fmt.Sprintf("routine status %d: shard %d is fine", i, i%97)}))
		}
		if _, err := e.st.UpsertEvidence(ctx, rows); err != nil {
			b.Fatalf("seeding: %v", err)
		}
	}
	o := e.options()
	o.EvidenceWait = time.Minute

	// the floor: a bare keyset read of the window
	floorStop := heapPeak()
	floorStart := time.Now()
	var after *store.Cursor
	read := 0
	for {
		page, err := e.st.EvidenceInRange(ctx, store.RangeQuery{Workspace: e.ws, Chat: e.chat, From: win, To: win.Add(winLen),
			After: after, Limit: DefaultEvidenceBatchLimit, EligibleOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		read += len(page.Items)
		if page.Next == nil {
			break
		}
		after = page.Next
	}
	floorTime, floorPeak := time.Since(floorStart), floorStop()
	if read != n {
		b.Fatalf("the floor read %d rows, want %d", read, n)
	}

	r := e.start(o)
	b.ResetTimer()
	var peak uint64
	for i := range b.N {
		version := fmt.Sprintf("v%d", i+2) // a fresh window state per iteration
		cw := schemas.ClosedWindow{WorkspaceID: e.ws, ChatID: e.chat, WindowStart: win, WindowEnd: win.Add(winLen),
			ProcessorVersion: version, ClosedAt: win.Add(winLen + time.Minute), Reason: schemas.CloseReasonGraceElapsed,
			EvidenceCount: n, EvidencePartition: 0, EvidenceLowOffset: 0, EvidenceEndOffset: int64(n),
			FirstOccurredAt: win.Add(step), LastOccurredAt: win.Add(time.Duration(n) * step)}
		stop := heapPeak()
		e.produce(cw)
		key := e.key(win)
		key.ProcessorVersion = version
		eventually(b, "the large window to finish", func() bool {
			st, err := e.st.GetWindow(ctx, key)
			return err == nil && terminal(st)
		})
		peak = max(peak, stop())
		st, err := e.st.GetWindow(ctx, key)
		if err != nil || st.Meta.EvidenceCount != n || st.Attempts != 1 {
			b.Fatalf("window %s at attempt %d with %d evidence (%v), want %d at attempt 1", st.Status, st.Attempts, st.Meta.EvidenceCount, err, n)
		}
	}
	b.StopTimer()
	elapsed := b.Elapsed() / time.Duration(b.N)
	chunks := r.counter("larkline_synthesis_chunks_total") / float64(b.N)
	b.ReportMetric(float64(n), "messages")
	b.ReportMetric(chunks, "chunks")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(floorPeak)/(1<<20), "floor-peak-heap-MiB")
	b.ReportMetric(float64(peak)/float64(max(floorPeak, 1)), "peak-heap-vs-floor")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "messages/s")
	b.ReportMetric(float64(n)/floorTime.Seconds(), "floor-messages/s")
}
