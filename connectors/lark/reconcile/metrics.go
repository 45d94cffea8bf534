package reconcile

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Message outcomes (the outcome label of larkline_reconcile_messages_total).
const (
	msgProduced   = "produced"     // a new or changed version, acknowledged by Kafka
	msgUnchanged  = "unchanged"    // the stored version has the same content hash
	msgStale      = "stale"        // the stored version is newer or deleted: kept
	msgDuplicate  = "duplicate"    // seen earlier in the same run (thread root)
	msgInvalid    = "invalid"      // rejected by the normalizer
	msgOutOfRange = "out_of_range" // a thread item outside the run's range
)

// Refused-thread results (the result label of larkline_reconcile_refused_threads_total).
const (
	threadRefused   = "refused"   // Lark refused the thread; kept in the checkpoint for a later run
	threadRecovered = "recovered" // a later run read a refused thread
	threadAbandoned = "abandoned" // refused maxThreadAttempts times (or over the bound): not tried again
)

type metrics struct {
	duration  *prometheus.HistogramVec
	runs      *prometheus.CounterVec
	pages     *prometheus.CounterVec
	messages  *prometheus.CounterVec
	failures  *prometheus.CounterVec
	lag       prometheus.Gauge
	apiCalls  *prometheus.CounterVec
	retries   *prometheus.CounterVec
	backoffS  prometheus.Counter
	published *prometheus.CounterVec
	// overlapSkips counts runs that cut their overlap re-read short (see chat.go).
	overlapSkips prometheus.Counter
	// refusedThreads counts refused threads by what became of them (see threads.go).
	refusedThreads *prometheus.CounterVec
	// passes and lastPass: automatic passes done, and when the last one started.
	passes   prometheus.Counter
	lastPass prometheus.Gauge
	// coverage passes (schedule.go): passes, chats of the last one, and the time from
	// a window's end to its coverage of a chat with evidence in it.
	coveragePasses prometheus.Counter
	coverageChats  prometheus.Gauge
	windowCoverage prometheus.Histogram
	// continuations: runs that continued a truncated run at once.
	continuations prometheus.Counter
}

// newMetrics declares the reconciler's metrics and registers them on reg (nil:
// unregistered). Long on purpose: one declaration per metric of
// docs/operations.md; split up, the list would only be harder to check against
// the document.
func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "larkline_reconcile_duration_seconds",
			Help:    "Duration of one chat reconciliation run, by kind (backfill, incremental, refresh, manual).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_reconcile_runs_total",
			Help: "Chat reconciliation runs by kind and result (complete, truncated, stopped, refused, failed, skipped); refused: the chat is not a group chat (p2p or unsupported) and was not read.",
		}, []string{"kind", "result"}),
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_reconcile_pages_total",
			Help: "Message history pages read, by container (chat, thread).",
		}, []string{"container"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_reconcile_messages_total",
			Help: "History messages by outcome (produced, unchanged, stale, duplicate, invalid, out_of_range).",
		}, []string{"outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_reconcile_failures_total",
			Help: "Reconciliation failures by bounded reason; a failed chat run keeps its checkpoint.",
		}, []string{"reason"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_reconcile_lag_seconds",
			Help: "Seconds between now and the oldest collection checkpoint of the eligible chats, after the last pass.",
		}),
		apiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_api_calls_total",
			Help: "Lark Open API calls made by reconciliation, by endpoint and outcome (ok, rate_limited, server_error, transport_error, refused, malformed, invalid_query, canceled).",
		}, []string{"endpoint", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_reconcile_api_retries_total",
			Help: "Retries of Lark history calls after a retryable answer, by the answer's outcome.",
		}, []string{"outcome"}),
		backoffS: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_reconcile_api_backoff_seconds_total",
			Help: "Seconds spent backing off before retrying Lark history calls.",
		}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_reconcile_checkpoints_published_total",
			Help: "Collection checkpoints published to the checkpoint topic, by result (acked, failed).",
		}, []string{"result"}),
		overlapSkips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_reconcile_overlap_skips_total",
			Help: "Runs that cut their overlap re-read short after half their page budget and continued from the checkpoint.",
		}),
		refusedThreads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_reconcile_refused_threads_total",
			Help: "Threads whose replies Lark refused to list, by result: refused (kept in the chat's checkpoint and read again by a later run, with backoff), recovered (a later run read it), abandoned (refused too often, or too many refused threads in the chat: not tried again).",
		}, []string{"result"}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_reconcile_passes_total",
			Help: "Reconciliation passes over every eligible chat that finished (whatever their chats' results).",
		}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_reconcile_last_pass_started_timestamp_seconds",
			Help: "Unix time at which the last finished reconciliation pass started: history created before it (minus the settle delay) was read by that pass.",
		}),
		coveragePasses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_reconcile_coverage_passes_total",
			Help: "Coverage passes started after a window end (the chats with evidence in the window that just ended, read ahead of the interval pass).",
		}),
		coverageChats: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_reconcile_coverage_chats",
			Help: "Chats the last coverage pass read: the eligible chats with evidence in the window that had just ended.",
		}),
		windowCoverage: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "larkline_reconcile_window_coverage_seconds",
			Help:    "Seconds from a window's end until a coverage run's checkpoint of a chat with evidence in it reached that end (the window may close from then on, once its grace has passed).",
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 120, 300, 600},
		}),
		continuations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_reconcile_continuations_total",
			Help: "Runs started at once, from the checkpoint, to continue a run that used its page budget before the end of its range (a burst, a backfill), instead of at the next interval pass.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.runs, m.pages, m.messages, m.failures, m.lag, m.apiCalls, m.retries, m.backoffS, m.published, m.overlapSkips, m.refusedThreads, m.passes, m.lastPass, m.coveragePasses, m.coverageChats, m.windowCoverage, m.continuations} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("%w: register metrics: %w", ErrInvalidOptions, err)
		}
	}
	return m, nil
}
