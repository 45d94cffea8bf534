package testenv_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/testenv"
)

func TestMetricValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rows_total"}, []string{"action", "stage"})
	last := prometheus.NewGauge(prometheus.GaugeOpts{Name: "last_seconds"})
	reg.MustRegister(rows, last)
	rows.WithLabelValues("deleted", "sink").Add(3)
	rows.WithLabelValues("redacted", "sink").Add(5)
	last.Set(42)
	for _, tt := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
		found  bool
	}{
		{"every label", "rows_total", map[string]string{"action": "redacted", "stage": "sink"}, 5, true},
		{"some labels", "rows_total", map[string]string{"action": "deleted"}, 3, true},
		{"a gauge without labels", "last_seconds", nil, 42, true},
		{"no such value", "rows_total", map[string]string{"action": "kept"}, 0, false},
		{"no such label", "rows_total", map[string]string{"action": "deleted", "chat": "oc_1"}, 0, false},
		{"no such metric", "gone_total", nil, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, found := testenv.MetricValue(t, reg, tt.metric, tt.labels)
			if got != tt.want || found != tt.found {
				t.Fatalf("MetricValue = %v, %v; want %v, %v", got, found, tt.want, tt.found)
			}
		})
	}
}
