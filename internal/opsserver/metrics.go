package opsserver

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// requestMetrics instruments mounted handlers. Labels are the mounted pattern (fixed
// by code), the status code and the method, so cardinality is bounded.
type requestMetrics struct {
	requests          *prometheus.CounterVec
	duration          *prometheus.HistogramVec
	inFlight          prometheus.Gauge
	readinessFailures *prometheus.CounterVec
}

func newRequestMetrics(reg prometheus.Registerer) (*requestMetrics, error) {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_http_requests_total",
			Help: "HTTP requests served, by mounted handler pattern, method and status code.",
		}, []string{"handler", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "larkline_http_request_duration_seconds",
			Help:    "Time to serve HTTP requests, by mounted handler pattern.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"handler"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_http_requests_in_flight",
			Help: "HTTP requests being served now.",
		}),
		readinessFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_readiness_check_failures_total",
			Help: "Failed readiness checks, by check name and failure class (error, timeout, panic).",
		}, []string{"check", "failure"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inFlight, m.readinessFailures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("%w: registering ops server metrics: %w", ErrInvalidOptions, err)
		}
	}
	return m, nil
}

func (m *requestMetrics) instrument(pattern string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"handler": pattern}
	return promhttp.InstrumentHandlerInFlight(m.inFlight,
		promhttp.InstrumentHandlerDuration(m.duration.MustCurryWith(labels),
			promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), h)))
}
