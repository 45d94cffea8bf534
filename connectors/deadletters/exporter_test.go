package deadletters

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestExporterRunAndClose: the exporter counts what is parked at its first scan, Close
// ends a running Run and returns only after it did (the component contract, D29), and
// Run after Close is refused. kfake stands in for the broker: the scan's reading of
// the topic is tested against the real one by cmd/larkline's dead-letter tests.
func TestExporterRunAndClose(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	codecs, err := schemas.NewCodecs(schemas.Topics{Evidence: "ev", DeadLetter: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := context.Background()
	dl := schemas.NewDeadLetter(ids.StageSink, errors.New("bad"), "ev", 0, 7, []byte("ws-1/oc_1/om_1"), []byte("x"), time.Now())
	v, err := codecs.DeadLetter.Encode(ctx, dl)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dlq", Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	e, err := NewExporter(ExporterOptions{Client: cl, Codec: codecs.DeadLetter, Topic: "dlq", Interval: time.Hour, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(e.parked.WithLabelValues(string(ids.StageSink), dl.Reason)) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("parked = %v, want 1", testutil.ToFloat64(e.parked.WithLabelValues(string(ids.StageSink), dl.Reason)))
		}
		time.Sleep(10 * time.Millisecond) // polling a gauge the Run goroutine sets
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e.life.Running() {
		t.Fatal("Close returned while Run was still running")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after Close", err)
		}
	case <-time.After(10 * time.Second): // a deadline for a hang, not a wait
		t.Fatal("Run did not return after Close")
	}
	if err := e.Run(ctx); !errors.Is(err, ErrExporterClosed) {
		t.Fatalf("Run after Close = %v, want ErrExporterClosed", err)
	}
}
