package openai

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values; all fixed by code, so cardinality is bounded.
const (
	opSynthesize = "synthesize"
	opSummarize  = "summarize"

	outcomeOK          = "ok"
	outcomeInvalid     = "invalid_output"
	outcomeUnavailable = "unavailable"
	outcomeRejected    = "rejected"
	outcomeCanceled    = "canceled"

	reasonInvalidOutput  = "invalid_output"
	reasonUnavailable    = "unavailable"
	reasonSchemaFallback = "schema_fallback"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	retries  *prometheus.CounterVec
	drafts   prometheus.Counter
}

// newMetrics registers the client's metrics on reg; a nil registry keeps them
// unregistered (they still count, nobody scrapes them).
func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_synthesis_model_requests_total",
			Help: "HTTP attempts to the chat-completions endpoint, by operation (synthesize, summarize) and outcome (ok, invalid_output, unavailable, rejected, canceled).",
		}, []string{"op", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "larkline_synthesis_model_request_duration_seconds",
			Help:    "Duration of one HTTP attempt to the chat-completions endpoint, by operation.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 40, 80, 160},
		}, []string{"op"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_synthesis_model_tokens_total",
			Help: "Tokens reported by the endpoint, by operation and type (prompt, completion).",
		}, []string{"op", "type"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_synthesis_model_retries_total",
			Help: "Attempts repeated within one call, by operation and reason (invalid_output, unavailable, schema_fallback).",
		}, []string{"op", "reason"}),
		drafts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_synthesis_model_drafts_total",
			Help: "Validated drafts returned by the model.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.tokens, m.retries, m.drafts} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("%w: registering metrics: %w", ErrInvalidOptions, err)
			}
		}
	}
	return m, nil
}
