package windows

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	evidence        *prometheus.CounterVec
	late            *prometheus.CounterVec
	oversized       prometheus.Counter
	oversizedOpen   prometheus.Gauge
	closingWindows  prometheus.Gauge
	reemits         prometheus.Counter
	readBack        *prometheus.CounterVec
	publishFailures prometheus.Counter
	closed          *prometheus.CounterVec
	closedEvidence  prometheus.Histogram
	closedBytes     prometheus.Histogram
	openWindows     prometheus.Gauge
	oldestUncovered prometheus.Gauge
	wakeups         *prometheus.CounterVec
	deadLettered    *prometheus.CounterVec
	scanSeconds     prometheus.Histogram
	visitedKeys     prometheus.Gauge
	barrierHeld     prometheus.Gauge
	inputHeld       prometheus.Gauge
	closeInputLag   prometheus.Histogram
	lateEdits       *prometheus.CounterVec

	tablePartitions   *prometheus.GaugeVec
	recoveryRemaining prometheus.Gauge
	restarts          *prometheus.CounterVec
}

// newMetrics registers the processor's metrics on reg; a nil registry keeps them
// unregistered (they still count, nobody scrapes them).
// Long on purpose: one declaration per metric of docs/operations.md, in that order;
// split up, the list would only be harder to check against the document.
func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_evidence_total",
			Help: "Evidence records applied by the window processor, by outcome (opened, added, recalled, duplicate, late_edit, late_recall, recall_unopened, aged_out, ineligible, tombstone, dead_lettered). Every record of the evidence topic is counted once, plus once per redelivery (duplicate).",
		}, []string{"outcome"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_late_records_total",
			Help: "Evidence for a window already closing or closed, by kind (late_edit, late_recall); counted, never reopening or re-emitting the window.",
		}, []string{"kind"}),
		oversized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_oversized_total",
			Help: "Windows that passed the oversized bound (windows.oversizedVersions evidence versions); each closes as usual with its record flagged.",
		}),
		oversizedOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_oversized_open",
			Help: "Open or closing windows flagged oversized in this instance's partitions at the last scan.",
		}),
		closingWindows: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_closing",
			Help: "Windows whose closed record was emitted but not yet read back from the closed-window topic, at the last scan.",
		}),
		reemits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_reemits_total",
			Help: "Closed records emitted again because they were not read back within the re-emit interval (a crash between the close and its commit); copies are byte-identical.",
		}),
		readBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_closed_read_back_total",
			Help: "Closed-window records read back by the window processor, by result (closed: a closing window is closed for good; duplicate: a copy of one already closed; foreign: another processor version's; undecodable).",
		}, []string{"result"}),
		publishFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_windows_publish_failures_total",
			Help: "Rounds of the closed-record publisher (which emits closed records from the window state changelog) that failed to produce or commit and were retried, and records it could not build.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_closed_total",
			Help: "Closed-window records emitted (every copy, re-announcements included), by reason.",
		}, []string{"reason"}),
		closedEvidence: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_windows_closed_evidence",
			Help:    "Evidence count of each closed window.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		closedBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_windows_closed_record_bytes",
			Help:    "Size of each closed-window record emitted (key and value); version 3 records do not grow with the window.",
			Buckets: prometheus.ExponentialBuckets(64, 2, 10), // 64 B .. 32 KiB
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
		scanSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_windows_scan_duration_seconds",
			Help:    "Duration of one watcher pass over the window state.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		visitedKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_state_keys",
			Help: "Keys (chats) in this instance's window state at the last scan.",
		}),
		barrierHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_barrier_held",
			Help: "Windows due and covered by a collection checkpoint but held at the last scan because the chat has not yet applied the evidence the reconciler produced before that checkpoint (the evidence barrier).",
		}),
		inputHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_input_held",
			Help: "Windows due on the wall clock (and covered) but held at the last scan because their evidence partition has not yet applied every record that was in it when the window's end + grace passed (the input barrier, D23): the processor is behind its input.",
		}),
		closeInputLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_windows_close_input_lag_seconds",
			Help:    "For each window the scan decided to close: how far behind its input the window's evidence partition was at that moment (the scan's clock minus the latest instant at which every record in the partition had been applied). 0 to a scan interval when caught up; downtime, replay and bursts show here, and delay the close instead of cutting the window short.",
			Buckets: []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600},
		}),
		lateEdits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_late_edits_total",
			Help: "Eligible evidence versions for a window already closed, by reason (window_closing: its record emitted, not yet read back; window_closed: closed for good). Under the input barrier (D23) only records appended after the window's end + grace are late.",
		}, []string{"reason"}),
		tablePartitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "larkline_windows_table_partitions",
			Help: "This instance's window state table partitions by state (initializing, connecting, recovering, preparing, running, stopped, standby).",
		}, []string{"state"}),
		recoveryRemaining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_windows_table_recovery_remaining_records",
			Help: "Table records the recovering partitions of this instance still have to read before the processor runs.",
		}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_windows_processor_restarts_total",
			Help: "Times the window processor's Goka processor stopped on an outage and is restarted in the process after a backoff, by reason (broker, coordinator, registry). The role is not ready meanwhile; any other failure stops the process instead.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.evidence, m.late, m.publishFailures, m.oversized, m.oversizedOpen, m.closingWindows, m.reemits, m.readBack,
			m.closed, m.closedEvidence, m.closedBytes, m.openWindows,
			m.oldestUncovered, m.wakeups, m.deadLettered, m.scanSeconds, m.visitedKeys,
			m.tablePartitions, m.recoveryRemaining, m.barrierHeld, m.inputHeld, m.closeInputLag, m.lateEdits, m.restarts)
	}
	return m
}
