package ingest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Transports (the transport label of larkline_lark_event_ack_seconds).
const (
	transportWebhook  = "webhook"
	transportLongConn = "longconn"
	transportDirect   = "direct"
)

// register adds cs to reg (nil: nothing). A conflict is a wiring error.
func register(reg *prometheus.Registry, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("%w: register metrics: %w", ErrInvalidOptions, err)
		}
	}
	return nil
}

type ingestMetrics struct {
	events     *prometheus.CounterVec
	ack        *prometheus.HistogramVec
	records    *prometheus.CounterVec
	ineligible *prometheus.CounterVec
	recalls    *prometheus.CounterVec
	notify     prometheus.Counter
	// seenEvicted counts webhook event ids dropped from the replay guard before their
	// time because it was full.
	seenEvicted prometheus.Counter
}

func newIngestMetrics(reg *prometheus.Registry) (*ingestMetrics, error) {
	m := &ingestMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_events_total",
			Help: "Lark callbacks by outcome (accepted, ignored, rejected, failed) and bounded reason.",
		}, []string{"outcome", "reason"}),
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "larkline_lark_event_ack_seconds",
			Help:    "Time from receiving a Lark callback to answering it, by transport and outcome (Lark allows 3 s).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 3},
		}, []string{"transport", "outcome"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_evidence_records_total",
			Help: "Evidence records the event path produced, by result (acked, failed, abandoned: no answer from Kafka within the event's time).",
		}, []string{"result"}),
		ineligible: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_evidence_ineligible_total",
			Help: "Evidence produced but flagged ineligible for synthesis, by reason (own_app, interactive_card, deleted, ...).",
		}, []string{"reason"}),
		recalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_recall_lookups_total",
			Help: "How a recalled message was found: source recent (in-process index) or api (Lark's get-message), by result.",
		}, []string{"source", "result"}),
		notify: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_lark_wakeups_sent_total",
			Help: "In-process wakeups sent after evidence was produced (one per workspace and chat).",
		}),
		seenEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_lark_webhook_seen_evictions_total",
			Help: "Event ids dropped from the webhook's replay guard before the end of their timestamp window because it held webhook.MaxSeenEvents ids; a replay of such an event is produced again (idempotently).",
		}),
	}
	if err := register(reg, m.events, m.ack, m.records, m.ineligible, m.recalls, m.notify, m.seenEvicted); err != nil {
		return nil, err
	}
	return m, nil
}
