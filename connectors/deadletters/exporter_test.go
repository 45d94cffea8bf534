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

	"github.com/larkline/larkline/internal/conformance"
	"github.com/larkline/larkline/internal/testenv/testkafka"
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
	testkafka.Produce(t, cl, &kgo.Record{Topic: "dlq", Value: v})

	reg := prometheus.NewRegistry()
	e, err := NewExporter(ExporterOptions{Client: cl, Codec: codecs.DeadLetter, Topic: "dlq", Interval: time.Hour, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	// The first scan runs in Run; Close stops it (the component contract, D29).
	conformance.CloseStopsRun(t, e, func() bool {
		return testutil.ToFloat64(e.parked.WithLabelValues(string(ids.StageSink), dl.Reason)) == 1 && e.life.Running()
	}, ErrExporterClosed)
}
