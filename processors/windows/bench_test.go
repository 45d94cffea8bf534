package windows

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/schemas/ids"
)

// benchCluster is a cluster for benchmarks (testing.B has no *testing.T).
func benchCluster(b *testing.B, chats, perChat int) (*cluster, int) {
	return benchClusterSpaced(b, chats, perChat, time.Second)
}

// benchClusterSpaced is benchCluster with the time between a chat's messages.
func benchClusterSpaced(b *testing.B, chats, perChat int, spacing time.Duration) (*cluster, int) {
	b.Helper()
	c := &cluster{brokers: testenv.KafkaBrokers(b), codecs: mustCodecs(b)}
	compact := "compact"
	c.evidence = testenv.NewTopic(b, 6, map[string]*string{"cleanup.policy": &compact})
	c.checkpoints = testenv.NewTopic(b, 6, map[string]*string{"cleanup.policy": &compact})
	c.closed = testenv.NewTopic(b, 6, specConfigs(b, kafka.DefaultTopicNames().WindowsClosed))
	c.dead = testenv.NewTopic(b, 1, specConfigs(b, kafka.DefaultTopicNames().DeadLetter))
	c.producer = testkafka.Client(b, kafka.Options{Brokers: c.brokers, ClientID: "windows-bench"})
	ctx := context.Background()
	n := 0
	batch := make([]*kgo.Record, 0, 1000)
	flush := func() {
		testkafka.Produce(b, c.producer, batch...)
		batch = batch[:0]
	}
	for i := range perChat {
		for ch := range chats {
			chat := ids.ChatID(fmt.Sprintf("oc_bench%05d", ch))
			r := chatRecord(ws, chat, fmt.Sprintf("om_%05d_%04d", ch, i), t0.Add(time.Duration(i)*spacing), strconv.Itoa(n))
			v, err := c.codecs.Evidence.Encode(ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, &kgo.Record{Topic: c.evidence, Key: []byte(r.Key()), Value: v})
			n++
			if len(batch) == cap(batch) {
				flush()
			}
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return c, n
}

// BenchmarkProcessorThroughput measures evidence records per second through the window
// processor on the real broker, next to a bare franz-go consumer reading the same topic
// in the same run (the practical limit).
//
// A third figure is Goka's own floor: the cheapest processor of the same shape (every
// record looped to its chat key and persisted there as raw bytes, same sarama
// settings, same broker). Every rate counts from the first record taken in, so client
// start-up and group joins are excluded from the processors' rates; the bare consumer
// is timed from its first fetch request, connection included (it often takes the whole
// topic in one fetch).
func BenchmarkProcessorThroughput(b *testing.B) {
	c, n := benchCluster(b, 200, 250) // 50,000 records, 200 chats
	b.ResetTimer()
	var bareRate, floorRate, procRate float64
	for range b.N {
		bareRate = bareConsume(b, c, n)
		floorRate = gokaFloor(b, c, n)
		procRate = processAll(b, c, n, storage.MemoryBuilder(), nil)
	}
	b.ReportMetric(bareRate, "bare-records/s")
	b.ReportMetric(floorRate, "goka-floor-records/s")
	b.ReportMetric(procRate, "processor-records/s")
	b.ReportMetric(procRate/bareRate, "ratio")
	b.ReportMetric(procRate/floorRate, "ratio-to-goka-floor")
}

// gokaFloor is the cheapest Goka processor with the window processor's shape: each
// evidence record is looped to its chat key (<ws>/<chat>) and stored there as raw
// bytes. It measures what Goka itself costs per record here.
func gokaFloor(b *testing.B, c *cluster, n int) float64 {
	g, err := kafka.NewGoka(kafka.GokaOptions{
		Options:          kafka.Options{Brokers: c.brokers, ClientID: "windows-bench-floor"},
		TableReplication: 1, StreamReplication: 1,
	})
	if err != nil {
		b.Fatal(err)
	}
	var count atomic.Int64
	group := goka.Group("floor" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36))
	graph := goka.DefineGroup(group,
		goka.Input(goka.Stream(c.evidence), new(codec.Bytes), func(ctx goka.Context, msg any) {
			k := ctx.Key()
			ctx.Loopback(k[:strings.LastIndexByte(k, '/')], msg)
		}),
		goka.Loop(new(codec.Bytes), func(ctx goka.Context, msg any) {
			ctx.SetValue(msg)
			count.Add(1)
		}),
		goka.Persist(new(codec.Bytes)),
	)
	p, err := goka.NewProcessor(c.brokers, graph, append(g.ProcessorOptions(), goka.WithStorageBuilder(storage.MemoryBuilder()))...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	for count.Load() == 0 {
		time.Sleep(time.Millisecond) // poll until the first record is applied (a benchmark, not a test)
	}
	began := time.Now()
	deadline := time.Now().Add(5 * time.Minute)
	for count.Load() < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("goka floor stalled at %d/%d", count.Load(), n)
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a wait with a deadline (a benchmark)
	}
	rate := float64(n) / time.Since(began).Seconds()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return rate
}

// BenchmarkProcessorBurstOneChat is the throughput figure for one chat taking in
// 50,000 messages at once (within five minutes: one window) (all on one partition: one partition processor does the
// work), next to Goka's floor over the same topic.
func BenchmarkProcessorBurstOneChat(b *testing.B) {
	// a burst: 50,000 messages in 5 minutes, all in one window
	c, n := benchClusterSpaced(b, 1, 50_000, 6*time.Millisecond)
	b.ResetTimer()
	var floorRate, procRate float64
	for range b.N {
		floorRate = gokaFloor(b, c, n)
		procRate = processAll(b, c, n, storage.MemoryBuilder(), nil)
	}
	b.ReportMetric(floorRate, "goka-floor-records/s")
	b.ReportMetric(procRate, "processor-records/s")
	b.ReportMetric(procRate/floorRate, "ratio-to-goka-floor")
}

// BenchmarkProcessorDueWindows10k measures how long 10,000 due windows (10,000
// chats, one window each) take from the scan that finds them due to the last closed
// record on the closed-window topic.
func BenchmarkProcessorDueWindows10k(b *testing.B) {
	c, n := benchCluster(b, 10_000, 1)
	b.ResetTimer()
	for range b.N {
		var now atomic.Int64
		now.Store(t0.UnixMilli())
		var took time.Duration
		processAllWith(b, c, n, storage.MemoryBuilder(), func() time.Time { return time.UnixMilli(now.Load()) }, func(p *Processor) {
			// read the closed topic from its current end: PollFetches blocks until
			// records arrive, so the wait ends on the last record, not on a poll tick
			cl := closedFromEnd(b, c)
			defer cl.Close()
			now.Store(t0.Add(time.Hour).UnixMilli())
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// Scan until the input barrier (D23) passes: it follows the group's
			// commits, which Goka makes every second; the watcher does the same.
			scanned := make(chan struct{})
			go func() {
				defer close(scanned)
				for ctx.Err() == nil {
					if err := p.ScanOnce(ctx); err != nil || testutil.ToFloat64(p.m.inputHeld) == 0 {
						return
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
			got := 0
			for got < n {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					b.Fatalf("only %d of %d windows emitted", got, n)
				}
				got += fs.NumRecords()
			}
			took = time.Since(began)
			cancel()
			<-scanned
		})
		b.ReportMetric(took.Seconds(), "scan-to-last-record-s")
	}
}

// closedFromEnd is a consumer of the closed-window topic from its end offsets now.
func closedFromEnd(b *testing.B, c *cluster) *kgo.Client {
	ends, err := kadm.NewClient(c.producer).ListEndOffsets(context.Background(), c.closed)
	if err != nil {
		b.Fatal(err)
	}
	at := map[string]map[int32]kgo.Offset{c.closed: {}}
	ends.Each(func(o kadm.ListedOffset) { at[c.closed][o.Partition] = kgo.NewOffset().At(o.Offset) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumePartitions(at))
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// BenchmarkProcessorMemory10kChats reports resident memory of a processor holding one
// open window in each of 10,000 active chats, with LevelDB storage as in production.
func BenchmarkProcessorMemory10kChats(b *testing.B) {
	c, n := benchCluster(b, 10000, 3)
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		before := rssBytes()
		dir := b.TempDir()
		processAll(b, c, n, storage.DefaultBuilder(dir), func() {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			rss := rssBytes()
			b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
			b.ReportMetric(float64(rss-before)/(1<<20), "rss-growth-MiB")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-inuse-MiB")
		})
	}
}

func bareConsume(b *testing.B, c *cluster, n int) float64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumeTopics(c.evidence),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	// From the first fetch request (the client connects lazily on it): a bare consumer
	// often takes the whole topic in one fetch, so "from the first record" has no time.
	began := time.Now()
	got := 0
	for got < n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		fs := cl.PollFetches(ctx)
		stalled := ctx.Err() != nil
		cancel()
		if stalled {
			b.Fatalf("bare consumer stalled at %d/%d", got, n)
		}
		got += fs.NumRecords()
	}
	return float64(n) / time.Since(began).Seconds()
}

// processAll runs a new processor version over the topic until it has taken in all n
// records, calls whileRunning (if any) with the processor still running, and returns
// the records per second from the first processed record.
func processAll(b *testing.B, c *cluster, n int, sb storage.Builder, whileRunning func()) float64 {
	return processAllWith(b, c, n, sb, func() time.Time { return t0 }, func(*Processor) {
		if whileRunning != nil {
			whileRunning()
		}
	})
}

// processAllWith is processAll with a clock and a hook that gets the processor.
func processAllWith(b *testing.B, c *cluster, n int, sb storage.Builder, clock func() time.Time, whileRunning func(*Processor)) float64 {
	version := "bench" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	g, err := kafka.NewGoka(kafka.GokaOptions{
		Options:          kafka.Options{Brokers: c.brokers, ClientID: "windows-bench"},
		TableReplication: 1, StreamReplication: 1,
	})
	if err != nil {
		b.Fatal(err)
	}
	copts, err := kafka.NewClientOptions(kafka.Options{Brokers: c.brokers, ClientID: "windows-bench-publisher"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(Options{
		Client: copts, Emitter: g.EmitterOptions(),
		Brokers: c.brokers, ProcessorVersion: version,
		EvidenceTopic: c.evidence, ClosedTopic: c.closed, DeadLetterTopic: c.dead,
		Window: 10 * time.Minute, Grace: 3 * time.Minute, Retention: 72 * time.Hour,
		ScanInterval: time.Hour, Codecs: c.codecs, Clock: clock,
		Goka: append(g.ProcessorOptions(), goka.WithStorageBuilder(sb)),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	// Count from the first processed record: group join and topic set-up are a fixed
	// cost of starting, not throughput. Every applied record counts, whatever it did.
	for applied(p) == 0 {
		select {
		case err := <-done:
			b.Fatalf("processor stopped before its first record: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	began := time.Now()
	deadline := time.Now().Add(5 * time.Minute)
	for applied(p) < float64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("processor stalled at %v/%d", applied(p), n)
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a wait with a deadline (a benchmark)
	}
	rate := float64(n) / time.Since(began).Seconds()
	whileRunning(p)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return rate
}

// applied is the number of evidence records the processor applied, by any outcome.
func applied(p *Processor) float64 {
	total := 0.0
	for _, o := range []string{outOpened, outAdded, outRecalled, outDuplicate, outLateEdit, outLateRecall,
		outRecallUnopened, outAgedOut, outIneligible, outTombstone, outDeadLettered, outOvertaken} {
		total += testutil.ToFloat64(p.m.evidence.WithLabelValues(o))
	}
	return total
}

// rssBytes reads this process's resident set size (Linux).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
