package httpapi

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Server's request metrics. Labels are the route pattern (a fixed set
// written in this package, or "unmatched"), the status code (a fixed set of codes the
// handlers write) and the refusal reason: no workspace, token or path text.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	refusals *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_api_requests_total",
			Help: "Timeline API and web page requests, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "larkline_api_request_duration_seconds",
			Help:    "Time to answer timeline API and web page requests, by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_api_auth_refusals_total",
			Help: "Timeline API requests refused by the access rules, by reason (api_disabled, missing_token, invalid_token, forbidden_workspace, forbidden_scope).",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.refusals} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("%w: registering timeline API metrics: %w", ErrInvalidOptions, err)
		}
	}
	return m, nil
}

func (m *metrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

func (m *metrics) refused(reason string) {
	m.refusals.WithLabelValues(reason).Inc()
}
