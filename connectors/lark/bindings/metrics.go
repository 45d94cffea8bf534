package bindings

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Lookup results and invalidation kinds (metric label values).
const (
	lookupHit       = "hit"
	lookupMiss      = "miss"
	lookupCoalesced = "coalesced"

	invalidateChat    = "chat"
	invalidateReset   = "reset"
	invalidateEvicted = "evicted"
	invalidateExpired = "expired"
)

type metrics struct {
	lookups       *prometheus.CounterVec
	invalidations *prometheus.CounterVec
	queries       *prometheus.CounterVec
	entries       prometheus.Gauge
	listenUp      prometheus.Gauge
	listenDrops   prometheus.Counter
}

// newMetrics builds the resolver's metrics and registers them on reg (nil: not
// registered). A registration conflict is a wiring error and is returned.
func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_binding_cache_lookups_total",
			Help: "Binding lookups by result: hit (cached), miss (queried Postgres), coalesced (waited for another caller's query).",
		}, []string{"result"}),
		invalidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_binding_cache_invalidations_total",
			Help: "Cached chats dropped, by kind: chat (NOTIFY for one chat), reset (LISTEN (re)started), evicted (LRU bound), expired (TTL).",
		}, []string{"kind"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_binding_queries_total",
			Help: "Binding queries made to Postgres, by outcome (ok, error).",
		}, []string{"outcome"}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_lark_binding_cache_entries",
			Help: "Chats currently cached (bound or not).",
		}),
		listenUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_lark_binding_listen_up",
			Help: "1 while the LISTEN session for binding changes is established; 0 while the cache runs on the short fallback TTL.",
		}),
		listenDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_lark_binding_listen_failures_total",
			Help: "LISTEN sessions for binding changes that failed or dropped and were restarted.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.lookups, m.invalidations, m.queries, m.entries, m.listenUp, m.listenDrops} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("%w: register metrics: %w", ErrInvalidOptions, err)
		}
	}
	return m, nil
}
