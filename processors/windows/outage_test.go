package windows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestIntegrationBrokerOutage stops the (private) broker under a running processor
// whose windows hold all their evidence, moves the clock past their end + grace
// while the broker is away, and starts it again: the processor reports not ready and
// does not return meanwhile, restarts by itself, and closes every window once with
// all of its evidence.
func TestIntegrationBrokerOutage(t *testing.T) {
	b := testenv.NewKafkaBroker(t)
	c := newClusterOn(t, b.Brokers, b.NewTopic)
	const chats, n = 4, 5
	clock := &fakeClock{now: t0.Add(time.Minute)}
	inst := c.start(uniqueVersion(t), clock, func(o *Options) {
		o.restartMin, o.restartMax = 200*time.Millisecond, 2*time.Second
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
		res, err := c.producer.ProduceSync(context.Background(), &kgo.Record{Topic: c.evidence, Key: []byte(r.Key()), Value: v}).First()
		if err != nil {
			c.t.Fatalf("produce: %v", err)
		}
		out = append(out, res.Offset)
	}
	return out
}
