package windows

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestIntegrationBrokerOutage stops the (private) broker under a running processor
// whose windows hold all their evidence, moves the clock past their end + grace
// while the broker is away, and starts it again: the processor reports not ready and
// does not return meanwhile, restarts by itself, and closes every window once with
// all of its evidence.
func TestIntegrationBrokerOutage(t *testing.T) {
	t.Parallel()
	b := testenv.NewKafkaBroker(t)
	c := newClusterOn(t, b.Brokers, b.NewTopic)
	const chats, n = 4, 5
	clock := testenv.NewClock(t0.Add(time.Minute))
	inst := c.start(uniqueVersion(t), clock, func(o *Options) {
		o.restartMin, o.restartMax = 200*time.Millisecond, 2*time.Second
		// LevelDB, as in production: every restart reopens the same storage
		o.Goka = append(o.Goka, goka.WithStorageBuilder(storage.DefaultBuilder(t.TempDir())))
	})
	offsets := map[ids.ChatID][]int64{}
	for k := range chats {
		ch := ids.ChatID(fmt.Sprintf("oc_outage%02d", k))
		var recs []schemas.EvidenceRecord
		for i := range n {
			recs = append(recs, chatRecord(ws, ch, fmt.Sprintf("om_o%02d_%02d", k, i), t0.Add(time.Duration(i+1)*time.Minute), "o"))
		}
		offsets[ch] = c.produceOffsets(recs...)
	}
	for ch := range offsets {
		waitFor(t, "the window of "+string(ch), windowHolds(inst.p, ids.ChatKey(ws, ch), t0, n))
	}
	if err := inst.p.Ready(); err != nil {
		t.Fatalf("not ready before the outage: %v", err)
	}

	b.Stop(t)
	down := time.Now()
	clock.Set(t0.Add(14 * time.Minute)) // end + grace (13m) passes while the broker is away
	waitForWithin(t, 3*time.Minute, "readiness to turn false while the broker is away", func() bool {
		return inst.p.Ready() != nil || inst.exited()
	})
	if inst.exited() {
		t.Fatalf("Run returned while the broker was away: %v", inst.runErr())
	}
	t.Logf("not ready %s into the outage: %v", time.Since(down).Round(time.Second), inst.p.Ready())
	// a few restarts fail while the broker stays away; Run must not give up
	restarts := func() float64 { return testutil.ToFloat64(inst.p.m.restarts.WithLabelValues(RestartBroker)) }
	waitForWithin(t, 3*time.Minute, "two restarts while the broker is away", func() bool {
		return restarts() >= 2 || inst.exited()
	})
	if inst.exited() {
		t.Fatalf("Run returned while the broker was away: %v", inst.runErr())
	}
	if err := inst.p.Ready(); err == nil {
		t.Fatalf("ready while the broker is away")
	}

	b.Start(t)
	t.Logf("broker back after %s; %v broker restarts so far", time.Since(down).Round(time.Second), restarts())
	waitForWithin(t, 3*time.Minute, "readiness after the broker came back", func() bool {
		return inst.p.Ready() == nil || inst.exited()
	})
	if inst.exited() {
		t.Fatalf("Run returned after the broker came back: %v", inst.runErr())
	}
	backlog{chats: chats, n: n, start: t0, window: 10 * time.Minute}.check(c, inst, offsets)
}

// produceOffsets produces recs and returns their offsets.
func (c *cluster) produceOffsets(recs ...schemas.EvidenceRecord) []int64 {
	c.t.Helper()
	var out []int64
	for _, r := range recs {
		v, err := c.codecs.Evidence.Encode(context.Background(), r)
		if err != nil {
			c.t.Fatal(err)
		}
		res := testkafka.Produce(c.t, c.producer, &kgo.Record{Topic: c.evidence, Key: []byte(r.Key()), Value: v})
		out = append(out, res[0].Record.Offset)
	}
	return out
}

// TestIntegrationRegistryOutage stops the (private) schema registry before the
// processor has met the writer schema of its evidence (Confluent wire format): every
// run fails on the first record it cannot decode, the processor reports not ready
// and restarts without returning, and once the registry is back it closes every
// window once with all of its evidence.
func TestIntegrationRegistryOutage(t *testing.T) {
	t.Parallel()
	reg := testenv.NewSchemaRegistry(t)
	c := newCluster(t)
	registryCodecs := func() *schemas.Codecs {
		r, err := schemas.NewRegistry(schemas.RegistryOptions{URL: reg.URL, AutoRegister: true})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := schemas.NewCodecs(schemas.Topics{Evidence: c.evidence, ClosedWindow: c.closed,
			Checkpoint: c.checkpoints, DeadLetter: c.dead}, schemas.WithRegistry(r))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	c.codecs = registryCodecs() // the writers', which registers the schemas
	const chats, n = 3, 4
	clock := testenv.NewClock(t0.Add(time.Minute))
	inst := c.start(uniqueVersion(t), clock, func(o *Options) {
		o.Codecs = registryCodecs() // the processor's, with empty caches
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
		o.restartMin, o.restartMax = 200*time.Millisecond, 2*time.Second
	})
	var recs [][]schemas.EvidenceRecord
	for k := range chats {
		ch := ids.ChatID(fmt.Sprintf("oc_registry%02d", k))
		var rs []schemas.EvidenceRecord
		for i := range n {
			rs = append(rs, chatRecord(ws, ch, fmt.Sprintf("om_r%02d_%02d", k, i), t0.Add(time.Duration(i+1)*time.Minute), "r"))
		}
		recs = append(recs, rs)
	}
	// encode once while the registry answers: the writers' codec registers the
	// evidence schema, then the registry goes away
	if _, err := c.codecs.Evidence.Encode(context.Background(), recs[0][0]); err != nil {
		t.Fatal(err)
	}
	reg.Stop(t)
	down := time.Now()
	offsets := map[ids.ChatID][]int64{}
	for _, rs := range recs {
		offsets[rs[0].ChatID] = c.produceOffsets(rs...)
	}
	restarts := func() float64 { return testutil.ToFloat64(inst.p.m.restarts.WithLabelValues(RestartRegistry)) }
	waitForWithin(t, 3*time.Minute, "two registry restarts while the registry is away", func() bool {
		return restarts() >= 2 || inst.exited()
	})
	if inst.exited() {
		t.Fatalf("Run returned while the registry was away: %v", inst.runErr())
	}
	waitForWithin(t, time.Minute, "readiness to turn false while the registry is away", func() bool {
		return inst.p.Ready() != nil || inst.exited()
	})
	t.Logf("%s into the outage, %v registry restarts; not ready: %v", time.Since(down).Round(time.Second), restarts(), inst.p.Ready())

	reg.Start(t)
	clock.Set(t0.Add(14 * time.Minute)) // end + grace (13m) passed
	waitForWithin(t, 3*time.Minute, "readiness after the registry came back", func() bool {
		return inst.p.Ready() == nil || inst.exited()
	})
	if inst.exited() {
		t.Fatalf("Run returned after the registry came back: %v", inst.runErr())
	}
	if dead := sumCounters(inst.p.m.deadLettered); dead != 0 {
		t.Fatalf("%v records parked in the dead-letter topic: an outage is not bad input", dead)
	}
	backlog{chats: chats, n: n, start: t0, window: 10 * time.Minute}.check(c, inst, offsets)
}

// sumCounters is the sum of every series of v.
func sumCounters(v *prometheus.CounterVec) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { v.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			sum += d.GetCounter().GetValue()
		}
	}
	return sum
}
