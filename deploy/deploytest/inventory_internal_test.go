package deploytest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// scanSources scans in-memory files (path → source) as the module scan would.
func scanSources(t *testing.T, files map[string]string) *inventory {
	t.Helper()
	s := newScanner()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if err := s.file(p, []byte(files[p])); err != nil {
			t.Fatal(err)
		}
	}
	return s.finish()
}

const promImport = `import "github.com/prometheus/client_golang/prometheus"
`

func TestScanner(t *testing.T) {
	type want struct {
		typ    string
		labels []string // nil: labels unknown
		help   string
		pkgs   []string
	}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     map[string]want
		problems []string // substrings, one per expected problem
	}{
		{
			name: "vec constructor with opts literal",
			files: map[string]string{"a/m.go": "package a\n" + promImport + `
var c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "larkline_a_events_total", Help: "Events " + "by outcome."}, []string{"reason", "outcome"})
var g = prometheus.NewGauge(prometheus.GaugeOpts{Name: "larkline_a_open", Help: "Open."})
var h = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "larkline_a_seconds", Help: "S."}, nil)
`},
			want: map[string]want{
				"larkline_a_events_total": {"counter", []string{"outcome", "reason"}, "Events by outcome.", []string{"a"}},
				"larkline_a_open":         {"gauge", []string{}, "Open.", []string{"a"}},
				"larkline_a_seconds":      {"histogram", []string{}, "S.", []string{"a"}},
			},
		},
		{
			name: "namespace and subsystem",
			files: map[string]string{"b/m.go": "package b\n" + promImport + `
var c = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "larkline", Subsystem: "retention", Name: "runs_total", Help: "Runs."})
`},
			want: map[string]want{"larkline_retention_runs_total": {"counter", []string{}, "Runs.", []string{"b"}}},
		},
		{
			name: "aliased import and a local helper closure",
			files: map[string]string{"c/d/m.go": `package d
import prom "github.com/prometheus/client_golang/prometheus"
func newMetrics() {
	counter := func(name, help string, labels ...string) *prom.CounterVec {
		return prom.NewCounterVec(prom.CounterOpts{Name: name, Help: help}, labels)
	}
	hist := func(name, help string, buckets []float64) prom.Histogram {
		return prom.NewHistogram(prom.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	_ = counter("larkline_c_windows_total", "Windows.", "outcome")
	_ = counter("larkline_c_plain_total", "Plain.")
	_ = hist("larkline_c_wait_seconds", "Wait.", nil)
}
`},
			want: map[string]want{
				"larkline_c_windows_total": {"counter", []string{"outcome"}, "Windows.", []string{"c/d"}},
				"larkline_c_plain_total":   {"counter", []string{}, "Plain.", []string{"c/d"}},
				"larkline_c_wait_seconds":  {"histogram", []string{}, "Wait.", []string{"c/d"}},
			},
		},
		{
			name: "top-level helper with a label slice",
			files: map[string]string{"e/m.go": "package e\n" + promImport + `
func gaugeVec(name, help string, labels []string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}
var g = gaugeVec("larkline_e_members", "Members.", []string{"group"})
`},
			want: map[string]want{"larkline_e_members": {"gauge", []string{"group"}, "Members.", []string{"e"}}},
		},
		{
			name: "NewDesc of a custom collector: labels known, type not",
			files: map[string]string{"f/m.go": "package f\n" + promImport + `
var d = prometheus.NewDesc("larkline_f_lag", "Lag.", []string{"group", "topic", "partition"}, nil)
`},
			want: map[string]want{"larkline_f_lag": {"", []string{"group", "partition", "topic"}, "Lag.", []string{"f"}}},
		},
		{
			name: "NewDesc with constant metrics: the value type decides",
			files: map[string]string{"f/m.go": "package f\n" + promImport + `
var descLag = prometheus.NewDesc("larkline_f_lag", "Lag.", []string{"group"}, nil)
type c struct{ polls *prometheus.Desc }
func newC() *c { return &c{polls: prometheus.NewDesc("larkline_f_polls_total", "Polls.", nil, nil)} }
func (x *c) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, 1, "g")
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, 2, "h")
	ch <- prometheus.MustNewConstMetric(x.polls, prometheus.CounterValue, 3)
}
`},
			want: map[string]want{
				"larkline_f_lag":         {"gauge", []string{"group"}, "Lag.", []string{"f"}},
				"larkline_f_polls_total": {"counter", []string{}, "Polls.", []string{"f"}},
			},
		},
		{
			name: "constant name: found, type unknown",
			files: map[string]string{"g/m.go": "package g\n" + promImport + `
const name = "larkline_g_total"
var _ prometheus.Counter
`},
			want: map[string]want{"larkline_g_total": {"", nil, "", []string{"g"}}},
		},
		{
			name: "same metric in two packages merges",
			files: map[string]string{
				"h/m.go": "package h\n" + promImport + `var c = prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_h_total", Help: "H."})`,
				"i/m.go": "package i\n" + promImport + `var c = prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_h_total", Help: "H."})`,
			},
			want: map[string]want{"larkline_h_total": {"counter", []string{}, "H.", []string{"h", "i"}}},
		},
		{
			name: "conflicting definitions",
			files: map[string]string{
				"h/m.go": "package h\n" + promImport + `var c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "larkline_h_total", Help: "H."}, []string{"a"})`,
				"i/m.go": "package i\n" + promImport + `var c = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "larkline_h_total", Help: "H."}, []string{"b"})`,
			},
			problems: []string{"defined as gauge here and as counter", "has labels [b] here and [a]"},
		},
		{
			name: "name built at run time",
			files: map[string]string{"j/m.go": "package j\n" + promImport + `import "fmt"
var c = prometheus.NewCounter(prometheus.CounterOpts{Name: fmt.Sprintf("larkline_%s_total", "x"), Help: "X."})
var d = prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_j_" + suffix, Help: "X."})
var suffix = "y"
`},
			problems: []string{`"larkline_%s_total" is not a complete metric name`, `"larkline_j_" is not a complete metric name`},
		},
		{
			name: "namespace with a variable part",
			files: map[string]string{"k/m.go": "package k\n" + promImport + `var sub = "x"
var c = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "larkline", Subsystem: sub, Name: "total", Help: "X."})
`},
			problems: []string{"Subsystem of a prometheus.CounterOpts is not a string constant"},
		},
		{
			name:     "a metric outside the prefix",
			files:    map[string]string{"l/m.go": "package l\n" + promImport + `var c = prometheus.NewCounter(prometheus.CounterOpts{Name: "requests_total", Help: "X."})`},
			problems: []string{`metric "requests_total" does not match`},
		},
		{
			name:     "unkeyed opts",
			files:    map[string]string{"m/m.go": "package m\n" + promImport + `var o = prometheus.GaugeOpts{"larkline", "m", "x", "help", nil}`},
			problems: []string{"unkeyed prometheus.GaugeOpts literal"},
		},
		{
			name: "metric-shaped literal outside a prometheus file",
			files: map[string]string{
				"n/a.go": "package n\nconst channel = \"larkline_bindings\"\n",
				"n/b.go": "package n\nconst other = \"larkline_orders_total\"\nconst prefix = \"larkline_t_\"\n",
			},
			problems: []string{`"larkline_orders_total" looks like a metric name but its file does not import`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := scanSources(t, tc.files)
			if len(inv.Problems) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d matching %q", inv.Problems, len(tc.problems), tc.problems)
			}
			for _, sub := range tc.problems {
				if !slices.ContainsFunc(inv.Problems, func(p string) bool { return strings.Contains(p, sub) }) {
					t.Errorf("no problem mentions %q: %q", sub, inv.Problems)
				}
			}
			if tc.problems != nil {
				return
			}
			if len(inv.Metrics) != len(tc.want) {
				t.Errorf("metrics = %v, want %d", inv.sortedNames(), len(tc.want))
			}
			for name, w := range tc.want {
				d, ok := inv.Metrics[name]
				if !ok {
					t.Errorf("%s not found; have %v", name, inv.sortedNames())
					continue
				}
				if d.Type != w.typ || d.Help != w.help || !slices.Equal(d.Packages, w.pkgs) {
					t.Errorf("%s = type %q help %q packages %v, want %q %q %v", name, d.Type, d.Help, d.Packages, w.typ, w.help, w.pkgs)
				}
				if (w.labels != nil) != d.LabelsKnown || (w.labels != nil && !slices.Equal(d.Labels, w.labels)) {
					t.Errorf("%s labels = %v (known %v), want %v", name, d.Labels, d.LabelsKnown, w.labels)
				}
			}
		})
	}
}

func TestResolveSeries(t *testing.T) {
	inv := &inventory{Metrics: map[string]*metricDef{
		"larkline_h_seconds": {Name: "larkline_h_seconds", Type: "histogram"},
		"larkline_s_seconds": {Name: "larkline_s_seconds", Type: "summary"},
		"larkline_c_total":   {Name: "larkline_c_total", Type: "counter"},
		"larkline_u":         {Name: "larkline_u"},
	}}
	for _, tc := range []struct {
		series string
		want   string // "" when undefined
	}{
		{"larkline_h_seconds", "larkline_h_seconds"},
		{"larkline_h_seconds_bucket", "larkline_h_seconds"},
		{"larkline_h_seconds_sum", "larkline_h_seconds"},
		{"larkline_h_seconds_count", "larkline_h_seconds"},
		{"larkline_s_seconds_count", "larkline_s_seconds"},
		{"larkline_s_seconds_bucket", ""},
		{"larkline_c_total_count", ""},
		{"larkline_u_bucket", "larkline_u"},
		{"larkline_missing_total", ""},
	} {
		t.Run(tc.series, func(t *testing.T) {
			d, ok := inv.resolve(tc.series)
			got := ""
			if ok {
				got = d.Name
			}
			if got != tc.want {
				t.Errorf("resolve(%q) = %q, want %q", tc.series, got, tc.want)
			}
		})
	}
}

func TestSeriesIn(t *testing.T) {
	text := "rate(larkline_a_total[5m]) / larkline_b_seconds_bucket{le=\"1\"} LARKLINE_KAFKA__BROKERS larkline-windows-v1 x_larkline_c larkline_a_total larkline_"
	got := fmt.Sprint(seriesIn(text))
	if want := "[larkline_a_total larkline_b_seconds_bucket]"; got != want {
		t.Errorf("seriesIn = %s, want %s", got, want)
	}
}
