package deadletters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/schemas"
)

// ExporterOptions configure an Exporter.
type ExporterOptions struct {
	// Client reads the dead-letter topic; it must consume nothing else. Required.
	Client *kgo.Client
	// Codec decodes dead letters. Required.
	Codec *schemas.Codec[schemas.DeadLetter]
	// Topic is the dead-letter topic. Required.
	Topic string
	// Interval between scans; default one minute.
	Interval time.Duration
	// Registry receives the metrics. Required.
	Registry *prometheus.Registry
	// Logger receives scan failures. Nil discards.
	Logger *slog.Logger
}

// Exporter scans the dead-letter topic periodically and exports what is parked and
// what was re-driven (the topic is small: records are parked rarely and kept 30 days).
type Exporter struct {
	o        ExporterOptions
	log      *slog.Logger
	parked   *prometheus.GaugeVec
	redriven *prometheus.GaugeVec
	failures prometheus.Counter
	life     *lifecycle.State
}

// ErrExporterClosed is returned by Run after Close.
var ErrExporterClosed = errors.New("deadletters: exporter closed")

// NewExporter validates o and registers the metrics.
func NewExporter(o ExporterOptions) (*Exporter, error) {
	switch {
	case o.Client == nil || o.Codec == nil || o.Topic == "" || o.Registry == nil:
		return nil, fmt.Errorf("%w: the exporter needs a client, a codec, a topic and a registry", ErrInvalid)
	case o.Interval < 0:
		return nil, fmt.Errorf("%w: Interval %s is negative", ErrInvalid, o.Interval)
	case o.Interval == 0:
		o.Interval = time.Minute
	}
	e := &Exporter{o: o, log: logging.OrDiscard(o.Logger),
		life: lifecycle.New("dead-letter exporter", lifecycle.Once, ErrExporterClosed),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "larkline_deadletters_parked",
			Help: "Dead letters in the dead-letter topic not re-driven yet, by the stage that parked them and reason, at the last scan.",
		}, []string{"stage", "reason"}),
		redriven: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "larkline_deadletters_redriven",
			Help: "Dead letters in the dead-letter topic that larkline deadletters redrive finished, by stage and outcome (applied, unchanged, superseded, reproduced), at the last scan.",
		}, []string{"stage", "outcome"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_deadletters_scan_failures_total",
			Help: "Scans of the dead-letter topic that failed (the gauges keep their last values).",
		}),
	}
	for _, c := range []prometheus.Collector{e.parked, e.redriven, e.failures} {
		if err := o.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("%w: registering metrics: %w", ErrInvalid, err)
		}
	}
	return e, nil
}

// Run scans at once and then every interval until ctx ends or Close is called. It
// may be called once.
func (e *Exporter) Run(ctx context.Context) error {
	ctx, end, err := e.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		e.scan(ctx)
		t.Reset(e.o.Interval)
	}
}

func (e *Exporter) scan(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, e.o.Interval)
	defer cancel()
	es, err := Scan(sctx, e.o.Client, e.o.Codec, e.o.Topic)
	if err != nil {
		if ctx.Err() == nil {
			e.failures.Inc()
			e.log.Warn("scanning the dead-letter topic failed", "topic", e.o.Topic, "err", err)
		}
		return
	}
	e.parked.Reset()
	e.redriven.Reset()
	for _, x := range es {
		if x.Redriven == "" {
			e.parked.WithLabelValues(string(x.Stage), x.Reason).Inc()
		} else {
			e.redriven.WithLabelValues(string(x.Stage), x.Redriven).Inc()
		}
	}
}

// Close stops a running Run and waits for it. It closes nothing else: the client
// belongs to the caller.
func (e *Exporter) Close() error {
	e.life.Close()
	return nil
}
