package postgres

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of larkline_sink_evidence_total: what the sink did with each record.
const (
	outcomeInserted     = "inserted"      // a new row
	outcomeUpdated      = "updated"       // a new version (content_hash changed) replaced the row
	outcomeRedacted     = "redacted"      // a deleted version replaced a live row
	outcomeUnchanged    = "unchanged"     // the row already had this content_hash (redelivery)
	outcomeStale        = "stale"         // the stored version is newer; nothing changed
	outcomeDeleted      = "deleted"       // a tombstone deleted the row
	outcomeDeleteAbsent = "delete_absent" // a tombstone for a row that does not exist
	outcomeSuperseded   = "superseded"    // left out of the batch: before a tombstone of its key, or a redelivery of the version before it
)

// Retry operations of larkline_sink_retries_total.
const (
	opDatabase   = "database"
	opRegistry   = "registry"
	opDeadLetter = "dead_letter"
	opCommit     = "commit"
	opRepublish  = "republish"
)

type metrics struct {
	evidence      *prometheus.CounterVec
	deadLettered  *prometheus.CounterVec
	retries       *prometheus.CounterVec
	aborted       *prometheus.CounterVec
	batchDuration prometheus.Histogram
	batchRecords  prometheus.Histogram
	paused        prometheus.Gauge
	committed     prometheus.Counter
	republished   prometheus.Counter
}

// newMetrics builds the sink's metrics and registers them on reg; with a nil
// registry they count but are not exported. Registering fails when reg already holds
// them (a second sink on the same registry).
func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_sink_evidence_total",
			Help: "Evidence records written by the sink, by outcome (inserted, updated, redacted, unchanged, stale, deleted, delete_absent, superseded).",
		}, []string{"outcome"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_sink_dead_lettered_total",
			Help: "Records the sink parked in the dead-letter topic, by reason.",
		}, []string{"reason"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_sink_retries_total",
			Help: "Retryable failures the sink paused for, by operation (database, registry, dead_letter, commit, republish).",
		}, []string{"operation"}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_sink_batches_aborted_total",
			Help: "Batches given up uncommitted (to be delivered again), by cause (rebalance, shutdown, commit).",
		}, []string{"cause"}),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_sink_batch_duration_seconds",
			Help:    "Time from poll to committed offsets of one batch, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2.5, 12),
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_sink_batch_records",
			Help:    "Records in one batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_sink_paused",
			Help: "1 while the sink waits for a dependency (database, registry, Kafka) to come back, else 0.",
		}),
		committed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_sink_committed_records_total",
			Help: "Records whose offsets the sink committed after writing them.",
		}),
		republished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_sink_republished_total",
			Help: "Stored redactions the sink published again because a lower-ranked version of the key had landed after them in the evidence topic.",
		}),
	}
	// Pre-create every bounded label value, so dashboards see zeros rather than gaps.
	for _, o := range []string{outcomeInserted, outcomeUpdated, outcomeRedacted, outcomeUnchanged,
		outcomeStale, outcomeDeleted, outcomeDeleteAbsent, outcomeSuperseded} {
		m.evidence.WithLabelValues(o)
	}
	for _, o := range []string{opDatabase, opRegistry, opDeadLetter, opCommit, opRepublish} {
		m.retries.WithLabelValues(o)
	}
	for _, c := range []string{abortRebalance, abortShutdown, abortCommit} {
		m.aborted.WithLabelValues(c)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.evidence, m.deadLettered, m.retries, m.aborted,
			m.batchDuration, m.batchRecords, m.paused, m.committed, m.republished} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
