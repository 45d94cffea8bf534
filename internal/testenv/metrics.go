package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricValue reads the first series of name in g whose labels include every
// pair of labels (nil or empty: the first series), as a gauge, counter or
// untyped value; found is false when there is none. A failing Gather fails the
// test.
func MetricValue(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (v float64, found bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("testenv: gathering metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n := 0
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want == lp.GetValue() {
					n++
				}
			}
			if n < len(labels) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			default:
				return m.GetUntyped().GetValue(), true
			}
		}
	}
	return 0, false
}
