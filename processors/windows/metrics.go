package windows

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	evidence         *prometheus.CounterVec
	late             prometheus.Counter
	closed           *prometheus.CounterVec
	closedEvidence   prometheus.Histogram
	closedBytes      prometheus.Histogram
	tooLarge         prometheus.Counter
	openWindows      prometheus.Gauge
	oldestUncovered  prometheus.Gauge
	wakeups          *prometheus.CounterVec
	deadLettered     *prometheus.CounterVec
	markersDropped   prometheus.Counter
	pagesSealed      prometheus.Counter
	pagesMissing     prometheus.Counter
	scanSeconds      prometheus.Histogram
	visitedKeys      prometheus.Gauge
	barrierHeld      prometheus.Gauge
	committedFetches *prometheus.CounterVec

	tablePartitions   *prometheus.GaugeVec
	recoveryRemaining prometheus.Gauge
}

// newMetrics registers the processor's metrics on reg; a nil registry keeps them
// unregistered (they still count, nobody scrapes them).
func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_evidence_total",
			Help: "Evidence records seen by the window processor, by outcome (added, updated, duplicate, logged, stale, late, ineligible, aged_out, deleted_unseen, tombstone); logged versions went to a paged window and are resolved when it closes, stale ones rank below the version the window holds (evidence version rule) and change nothing.",
		}, []string{"outcome"}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_late_records_total",
			Help: "Evidence that arrived for an already closed window; counted and recorded, never reopening it.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_closed_total",
			Help: "Windows closed and emitted, by reason.",
		}, []string{"reason"}),
		closedEvidence: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_windows_closed_evidence",
			Help:    "Evidence count of each closed window.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		closedBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_windows_closed_record_bytes",
			Help:    "Size of each closed-window record (key and value); the limit is Options.MaxRecordBytes (16 MiB by default).",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 9), // 1 KiB .. 64 MiB
		}),
		tooLarge: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_closed_records_too_large_total",
			Help: "Closed-window records larger than Options.MaxRecordBytes; each failed the processor (the window stays open). Should stay 0.",
		}),
		openWindows: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_open",
			Help: "Non-empty windows open in this instance's partitions at the last scan.",
		}),
		oldestUncovered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_oldest_uncovered_evidence_age_seconds",
			Help: "Age of the oldest evidence in a window not yet closed, at the last scan.",
		}),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_wakeups_total",
			Help: "In-process wakeups of the window watcher, by outcome (sent, coalesced, dropped).",
		}, []string{"outcome"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_dead_lettered_total",
			Help: "Input records the window processor parked in the dead-letter topic, by reason.",
		}, []string{"reason"}),
		markersDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_closed_markers_dropped_total",
			Help: "Closed-window markers dropped after the retention period.",
		}),
		pagesSealed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_pages_sealed_total",
			Help: "Pages of evidence refs that large windows sealed into keys of their own (resends included).",
		}),
		pagesMissing: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_pages_missing_total",
			Help: "Sealed pages a closing window could not find (state lost); should stay 0.",
		}),
		scanSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_windows_scan_duration_seconds",
			Help:    "Duration of one watcher pass over the window state.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		visitedKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_state_keys",
			Help: "Keys (chats and windows) in this instance's window state at the last scan.",
		}),
		barrierHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_barrier_held",
			Help: "Windows due and covered by a collection checkpoint but held at the last scan because this processor has not yet processed the evidence the reconciler produced before that checkpoint (the evidence barrier).",
		}),
		committedFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_committed_offset_fetches_total",
			Help: "Reads of the group's committed evidence offsets for the evidence barrier, by result (ok, error).",
		}, []string{"result"}),
		tablePartitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "larkline_windows_table_partitions",
			Help: "This instance's window state table partitions by state (initializing, connecting, recovering, preparing, running, stopped).",
		}, []string{"state"}),
		recoveryRemaining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_table_recovery_remaining_records",
			Help: "Table records the recovering partitions of this instance still have to read before the processor runs.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.evidence, m.late, m.closed, m.closedEvidence, m.closedBytes, m.tooLarge, m.openWindows,
			m.oldestUncovered, m.wakeups, m.deadLettered, m.markersDropped, m.pagesSealed, m.pagesMissing, m.scanSeconds, m.visitedKeys,
			m.tablePartitions, m.recoveryRemaining, m.barrierHeld, m.committedFetches)
	}
	return m
}
