package synthesis

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values. All are fixed by code, so label cardinality is bounded; no metric
// carries a workspace or chat id.
const (
	// Window outcomes (larkline_synthesis_windows_total{outcome}).
	outcomeCompleted        = "completed"
	outcomeIgnored          = "ignored"
	outcomeFailed           = "failed"
	outcomeSkippedDone      = "skipped_done"
	outcomeSkippedExhausted = "skipped_exhausted"
	outcomeNeedsAttention   = "needs_attention"
	outcomeBusy             = "busy" // sweep only: another worker holds the window
	outcomeDeadLettered     = "dead_lettered"

	// Attempt failure reasons (larkline_synthesis_attempt_failures_total{reason}).
	reasonModelUnavailable = "model_unavailable"
	reasonModelRejected    = "model_rejected"
	reasonInvalidOutput    = "invalid_output"
	reasonStore            = "store"
	reasonInterrupted      = "interrupted"

	// Draft outcomes (larkline_synthesis_drafts_total{outcome}).
	draftCreated   = "created"
	draftUpdated   = "updated"
	draftAttached  = "evidence_attached"
	draftUnchanged = "unchanged"
	draftProtected = "protected"

	// Summary attempt outcomes and skip reasons.
	summaryWritten       = "written"
	summaryFailed        = "failed"
	summaryInvalid       = "invalid_output"
	summaryHumanKept     = "human_kept"
	skipDisabled         = "disabled"
	skipNoChange         = "no_material_change"
	skipHumanSummary     = "human_summary"
	skipAlreadyAttempted = "already_attempted"
	skipNoEntries        = "no_visible_entries"
	skipStoreError       = "store_error"
)

type metrics struct {
	windows         *prometheus.CounterVec
	claims          *prometheus.CounterVec
	attemptFailures *prometheus.CounterVec
	windowRetries   prometheus.Counter
	staleFound      prometheus.Gauge
	inFlight        prometheus.Gauge
	windowDuration  prometheus.Histogram
	evidenceWait    prometheus.Histogram
	// sinkWaitTimeouts: EvidenceWait periods a window waited for the sink.
	sinkWaitTimeouts   prometheus.Counter
	sinkProgressErrors prometheus.Counter

	chunks          prometheus.Counter
	chunkEvidence   prometheus.Histogram
	chunkContext    prometheus.Histogram
	chunkTokens     prometheus.Histogram
	modelTokens     *prometheus.CounterVec
	modelLatency    *prometheus.HistogramVec
	chunkRetries    *prometheus.CounterVec
	validationError prometheus.Counter

	drafts        *prometheus.CounterVec
	draftBindings prometheus.Counter
	// firstDraft: window end → the first draft entry a window's attempt created.
	firstDraft prometheus.Histogram

	records      *prometheus.CounterVec
	commits      *prometheus.CounterVec
	storeRetries *prometheus.CounterVec

	modelAvailable prometheus.Gauge
	modelOutage    prometheus.CounterFunc
	modelGateOpens *prometheus.CounterVec
	modelProbes    *prometheus.CounterVec
	modelWaiting   prometheus.Gauge
	refunds        prometheus.Counter
	heartbeats     *prometheus.CounterVec

	summaryAttempts *prometheus.CounterVec
	summarySkipped  *prometheus.CounterVec
	summaryLag      prometheus.Histogram
}

// newMetrics builds the worker's metrics; outageSeconds feeds
// larkline_synthesis_model_outage_seconds_total.
// Long on purpose: one declaration per metric of docs/operations.md, in that order;
// split up, the list would only be harder to check against the document.
func newMetrics(reg *prometheus.Registry, outageSeconds func() float64) (*metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	seconds := []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	m := &metrics{
		windows: counter("larkline_synthesis_windows_total",
			"Windows this worker finished with, by outcome: completed, ignored, failed (attempts exhausted), skipped_done (already terminal: a duplicate record), skipped_exhausted, needs_attention (its evidence never reached the table within the bound; no attempt spent), busy (sweep found another worker on it), dead_lettered (undecodable record).", "outcome"),
		claims: counter("larkline_synthesis_claims_total",
			"Window claims by outcome: created, retried, taken_over (a stale processing window), busy, done, exhausted; a duplicate record found terminal before any claim counts as done or exhausted.", "outcome"),
		attemptFailures: counter("larkline_synthesis_attempt_failures_total",
			"Whole-window attempts that failed, by reason: model_unavailable, model_rejected, invalid_output, store, interrupted (shutdown; refunded).", "reason"),
		windowRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_synthesis_window_retries_total",
			Help: "Whole-window attempts started after an earlier attempt of the same window failed or went stale."}),
		staleFound: prometheus.NewGauge(prometheus.GaugeOpts{Name: "larkline_synthesis_stale_processing",
			Help: "Processing windows found stale (no write for the stale timeout) by the last sweep."}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "larkline_synthesis_windows_in_flight",
			Help: "Windows being synthesized now (global slots in use)."}),
		windowDuration: hist("larkline_synthesis_window_duration_seconds",
			"Time from claiming a window to its terminal state or failed attempt.", seconds),
		evidenceWait: hist("larkline_synthesis_evidence_wait_seconds",
			"Time spent waiting for a closed window's evidence to reach the evidence table (the sink's commit of its offset range).", seconds),
		sinkWaitTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_synthesis_sink_wait_timeouts_total",
			Help: "Periods of synthesis.evidenceWait a closed window waited for the evidence sink to commit its evidence range; the wait goes on and spends no attempt."}),
		sinkProgressErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_synthesis_sink_progress_errors_total",
			Help: "Failed reads of the evidence sink group's committed offsets (retried)."}),

		chunks: prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_synthesis_chunks_total",
			Help: "Chunks synthesized and committed (window cursor advanced)."}),
		chunkEvidence: hist("larkline_synthesis_chunk_evidence",
			"Primary evidence rows per chunk.", []float64{1, 2, 5, 10, 20, 40, 80, 160, 500, 1000}),
		chunkContext: hist("larkline_synthesis_chunk_context_messages",
			"Read-only context messages per chunk.", []float64{0, 1, 2, 5, 10, 20, 40, 100}),
		chunkTokens: hist("larkline_synthesis_chunk_estimated_tokens",
			"Estimated prompt tokens per chunk (messages, context and existing entries).",
			[]float64{250, 500, 1000, 2000, 4000, 6000, 8000, 16000, 32000, 64000}),
		modelTokens: counter("larkline_synthesis_chunk_model_tokens_total",
			"Tokens the synthesizer reported for chunks, by type (prompt, completion).", "type"),
		modelLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "larkline_synthesis_chunk_synthesize_seconds",
			Help:    "Duration of one Synthesize call for a chunk, by outcome (ok, error).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320}}, []string{"outcome"}),
		chunkRetries: counter("larkline_synthesis_chunk_retries_total",
			"Chunks retried within an attempt after a retryable model failure, by reason (unavailable, timeout).", "reason"),
		validationError: prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_synthesis_validation_errors_total",
			Help: "Synthesizer results rejected as invalid output (by the model client after its retries, or by the worker's validation)."}),

		drafts: counter("larkline_synthesis_drafts_total",
			"Validated drafts written, by outcome: created, updated, evidence_attached, unchanged, protected (a confirmed, hidden or human entry kept its text).", "outcome"),
		draftBindings: prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_synthesis_draft_evidence_bound_total",
			Help: "Evidence rows bound to entries by drafts (idempotent: a repeated binding is counted again)."}),

		firstDraft: hist("larkline_synthesis_window_end_to_first_draft_seconds",
			"Time from a window's end to the first draft entry its attempt created (observed once per closed-window record whose processing created an entry; it includes the close grace and the wait for history coverage).",
			[]float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1800, 3600}),

		records: counter("larkline_synthesis_records_total",
			"Closed-window records consumed, by result (processed, dead_lettered, dropped_revoked).", "result"),
		commits: counter("larkline_synthesis_offset_commits_total",
			"Offset commits of finished windows, by result (ok, error).", "result"),
		storeRetries: counter("larkline_synthesis_store_retries_total",
			"Store calls retried after a retryable failure, by operation.", "operation"),

		modelAvailable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "larkline_synthesis_model_available",
			Help: "1 while the model gate is closed (the synthesizer answers), 0 during a model outage (gate open or probing)."}),
		modelOutage: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "larkline_synthesis_model_outage_seconds_total",
			Help: "Time the model gate has been open or probing since the worker started, the current outage included."}, outageSeconds),
		modelGateOpens: counter("larkline_synthesis_model_gate_opens_total",
			"Times the model gate opened, by cause: retries_exhausted (a chunk used up its retries on outage errors), probe_failed (the single probe call failed).", "cause"),
		modelProbes: counter("larkline_synthesis_model_probes_total",
			"Probes of an open model gate, by outcome: ok (the model answered; the gate closed), failed (it opened again), abandoned (the probing window made no model call).", "outcome"),
		modelWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "larkline_synthesis_model_gate_waiting",
			Help: "Windows waiting for the model gate, holding no claim."}),
		refunds: prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_synthesis_attempts_refunded_total",
			Help: "Whole-window attempts given back (not counted against the attempt bound) because they ended for a reason not the window's own: a model outage or the worker's shutdown."}),
		heartbeats: counter("larkline_synthesis_heartbeats_total",
			"Heartbeats refreshing the claim of a window in progress (every staleTimeout/3), by outcome: ok, error (retried at the next beat), lost (another worker had taken the window over; the attempt stops).", "outcome"),

		summaryAttempts: counter("larkline_synthesis_summary_attempts_total",
			"Summary attempts (at most one per completed window), by outcome: written, failed, invalid_output, human_kept.", "outcome"),
		summarySkipped: counter("larkline_synthesis_summary_skipped_total",
			"Completed windows without a summary attempt, by reason: disabled, no_material_change, human_summary, already_attempted, no_visible_entries, store_error.", "reason"),
		summaryLag: hist("larkline_synthesis_summary_lag_seconds",
			"Time from a window's close (closed_at) to its summary being written.", seconds),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{
			m.windows, m.claims, m.attemptFailures, m.windowRetries, m.staleFound, m.inFlight, m.windowDuration, m.evidenceWait,
			m.sinkWaitTimeouts, m.sinkProgressErrors,
			m.chunks, m.chunkEvidence, m.chunkContext, m.chunkTokens, m.modelTokens, m.modelLatency, m.chunkRetries, m.validationError,
			m.drafts, m.draftBindings, m.firstDraft, m.records, m.commits, m.storeRetries,
			m.modelAvailable, m.modelOutage, m.modelGateOpens, m.modelProbes, m.modelWaiting, m.refunds, m.heartbeats,
			m.summaryAttempts, m.summarySkipped, m.summaryLag,
		} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("%w: registering metrics: %w", ErrInvalidOptions, err)
			}
		}
	}
	m.modelAvailable.Set(1)
	return m, nil
}
