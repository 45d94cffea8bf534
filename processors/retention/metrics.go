package retention

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Actions of larkline_retention_rows_total.
const (
	actionRedacted           = "redacted"
	actionDeleted            = "deleted"
	actionCheckpointsRemoved = "checkpoints_removed"
	actionWindowsRemoved     = "windows_removed"
)

// Reasons of larkline_retention_failures_total.
const (
	// reasonKafka: publishing a batch failed; its database change was not made.
	reasonKafka = "kafka"
	// reasonPostgres: a database statement failed.
	reasonPostgres = "postgres"
	// reasonEncode: a redacted version could not be encoded (schema registry).
	reasonEncode = "encode"
	// reasonInvalidRow: a due row had no valid evidence key, so nothing could be
	// published for it; it was changed in Postgres only. Counted per row.
	reasonInvalidRow = "invalid_row"
)

type metrics struct {
	rows        *prometheus.CounterVec
	failures    *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	reg         *prometheus.Registry
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_retention_rows_total",
			Help: "Rows the retention job changed, by action (redacted, deleted, checkpoints_removed, windows_removed). Dry runs count nothing.",
		}, []string{"action"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_retention_failures_total",
			Help: "Retention failures, by reason (kafka, postgres, encode: a run failed; invalid_row: a row changed in Postgres only, without a topic key).",
		}, []string{"reason"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_retention_last_success_timestamp_seconds",
			Help: "Unix time at which the last complete, non-dry retention run ended.",
		}),
		reg: reg,
	}
	for _, a := range []string{actionRedacted, actionDeleted, actionCheckpointsRemoved, actionWindowsRemoved} {
		m.rows.WithLabelValues(a)
	}
	for _, r := range []string{reasonKafka, reasonPostgres, reasonEncode, reasonInvalidRow} {
		m.failures.WithLabelValues(r)
	}
	if reg != nil {
		// Unregistering identifies collectors by their descriptors: undo only what
		// this call registered, never another job's metrics of the same names.
		var done []prometheus.Collector
		for _, c := range []prometheus.Collector{m.rows, m.failures, m.lastSuccess} {
			if err := reg.Register(c); err != nil {
				for _, d := range done {
					reg.Unregister(d)
				}
				return nil, fmt.Errorf("retention: registering metrics: %w", err)
			}
			done = append(done, c)
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	m.reg.Unregister(m.rows)
	m.reg.Unregister(m.failures)
	m.reg.Unregister(m.lastSuccess)
}

// stepError marks which dependency failed, for the failure metric.
type stepError struct {
	reason string
	err    error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func failed(reason string, err error) error { return &stepError{reason: reason, err: err} }

func failureReason(err error) (string, bool) {
	var se *stepError
	if errors.As(err, &se) {
		return se.reason, true
	}
	return "", false
}
