package windows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
)

// TestIntegrationHugeWindowIsFlagged: a window of more messages in one chat than
// OversizedVersions closes as one flagged record under 1 KB on the real broker; the
// processor never fails or restarts. The bound is lowered from its default (50,000)
// to 4,000 so the test takes seconds: what it shows does not depend on the number.
func TestIntegrationHugeWindowIsFlagged(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0)
	const n, bound = 6_000, 4_000
	a := c.start(version, clock, func(o *Options) { o.OversizedVersions = new(bound) })
	batch := make([]*kgo.Record, 0, 1000)
	for i := range n {
		r := evidenceRecord(fmt.Sprintf("om_%06d", i), t0.Add(time.Duration(i)*5*time.Millisecond), fmt.Sprint(i))
		v, err := c.codecs.Evidence.Encode(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, &kgo.Record{Topic: c.evidence, Key: []byte(r.Key()), Value: v})
		if len(batch) == cap(batch) || i == n-1 {
			testkafka.Produce(t, c.producer, batch...)
			batch = batch[:0]
		}
	}
	waitForWithin(t, 5*time.Minute, "the window to take in every version", func() bool {
		return testutil.ToFloat64(a.p.m.evidence.WithLabelValues(outAdded))+testutil.ToFloat64(a.p.m.evidence.WithLabelValues(outOpened)) >= n
	})
	clock.Set(t0.Add(13 * time.Minute))
	got := c.closedRecordsRaw(1, time.Minute)
	if len(got) != 1 {
		t.Fatalf("want one closed record, got %d", len(got))
	}
	w, size := got[0].w, got[0].size
	if !w.Oversized || w.EvidenceCount != n || w.EvidenceEndOffset-w.EvidenceLowOffset != n || size >= 1024 {
		t.Fatalf("record of %d bytes: oversized %v, %d versions over [%d, %d)", size, w.Oversized, w.EvidenceCount,
			w.EvidenceLowOffset, w.EvidenceEndOffset)
	}
	if v := testutil.ToFloat64(a.p.m.oversized); v != 1 {
		t.Fatalf("oversized counted %v times", v)
	}
	if a.exited() {
		t.Fatalf("the processor stopped: %v", a.runErr())
	}
}

// TestIntegrationPublisherFailureStopsTheProcessor: a publisher that cannot start
// stops the processor with its error instead of leaving windows unpublished.
func TestIntegrationPublisherFailureStopsTheProcessor(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0)
	a := c.start(version, clock, func(o *Options) {
		// franz-go refuses idempotent writes without acks=all at NewClient
		o.Client = append(append([]kgo.Opt(nil), o.Client...), kgo.RequiredAcks(kgo.NoAck()))
	})
	a.failureExpected = true
	waitFor(t, "the processor to stop", a.exited)
	if err := a.runErr(); err == nil || !strings.Contains(err.Error(), "publisher") {
		t.Fatalf("Run returned %v, want the publisher's error", err)
	}
}
