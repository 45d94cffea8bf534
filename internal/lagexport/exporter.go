package lagexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/schemas/ids"
)

// Snapshot is the result of the latest sample.
type Snapshot struct {
	// At is when the sample was taken (Options.Clock); zero before the first poll.
	At time.Time
	// Err is why the whole sample failed; every group is then StatusErr and carries
	// no partitions.
	Err error
	// Groups are in the order of Options.Groups, then the groups found by
	// Options.GroupPrefixes in name order.
	Groups []GroupSnapshot
}

// GroupSnapshot is one group in a Snapshot.
type GroupSnapshot struct {
	Group  string
	Status kafka.Status
	// Lag is the group's lag as kafka.Lag reported it (Err set when the group could
	// not be described). Its Partitions are sorted by topic and partition.
	Lag kafka.GroupLag
}

// Exporter samples consumer lag and serves the latest sample as Prometheus metrics.
// It is a prometheus.Collector; Collect never talks to Kafka.
type Exporter struct {
	o    Options
	cl   *kgo.Client
	eval *kafka.Evaluator // owned by the poll loop (Run) only
	// found are the groups GroupPrefixes found at the last listing (poll loop only).
	found []string
	log   *slog.Logger

	life *lifecycle.State
	mu   sync.Mutex // guards snap
	snap Snapshot

	failures    prometheus.Counter
	lastSuccess prometheus.Gauge
}

var (
	descLag = prometheus.NewDesc("larkline_consumergroup_lag",
		"Records of the partition that the group has not consumed yet: end offset minus committed offset.",
		[]string{"group", "topic", "partition"}, nil)
	descLagSeconds = prometheus.NewDesc("larkline_consumergroup_lag_seconds",
		"How long the oldest record the group has not consumed has been waiting; absent when not measured.",
		[]string{"group", "topic", "partition"}, nil)
	descStatus = prometheus.NewDesc("larkline_consumergroup_status",
		"Burrow-style status of the group: 1 for the current status (OK, WARN, STALL, STOP, ERR), 0 for the others.",
		[]string{"group", "status"}, nil)
	descMembers = prometheus.NewDesc("larkline_consumergroup_members",
		"Members of the consumer group.",
		[]string{"group"}, nil)
)

// statuses are every value of the status label, in the order they are exported.
var statuses = []kafka.Status{kafka.StatusOK, kafka.StatusWarn, kafka.StatusStall, kafka.StatusStop, kafka.StatusErr}

// New validates o, creates the exporter's Kafka client (it connects on first use) and
// registers the exporter on o.Registry.
func New(o Options) (*Exporter, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	eval, err := kafka.NewEvaluator(o.Evaluator)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	kopts, err := kafka.NewClientOptions(o.Kafka)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("lag exporter: creating kafka client: %w", err)
	}
	e := &Exporter{
		life: lifecycle.New("lag exporter", lifecycle.Once, ErrClosed),
		o:    o,
		cl:   cl,
		eval: eval,
		log:  o.Logger.With("component", string(ids.StageLag)),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_lag_poll_failures_total",
			Help: "Lag samples that failed as a whole (every group then reports status ERR).",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_lag_last_success_timestamp_seconds",
			Help: "Unix time of the last lag sample that succeeded.",
		}),
	}
	e.snap = Snapshot{Groups: make([]GroupSnapshot, 0, len(o.Groups))}
	if o.Registry != nil {
		if err := o.Registry.Register(e); err != nil {
			cl.Close()
			return nil, fmt.Errorf("lag exporter: registering metrics: %w", err)
		}
	}
	return e, nil
}

// Run samples the groups at once and then every Options.Interval until ctx ends or
// Close is called; it returns nil then. A failed sample is logged and counted, and
// the next one is tried at the next tick. Run may be called once.
func (e *Exporter) Run(ctx context.Context) error {
	ctx, end, err := e.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()

	e.log.Info("lag exporter started", "groups", e.o.Groups, "interval", e.o.Interval)
	t := time.NewTicker(e.o.Interval)
	defer t.Stop()
	for {
		e.poll(ctx)
		select {
		case <-ctx.Done():
			e.log.Info("lag exporter stopped")
			return nil
		case <-t.C:
		}
	}
}

// Close stops Run (waiting for it to return), unregisters the metrics and closes the
// Kafka client. It is idempotent.
func (e *Exporter) Close() error {
	if !e.life.Close() {
		return nil
	}
	if e.o.Registry != nil {
		e.o.Registry.Unregister(e)
	}
	e.cl.Close()
	return nil
}

// Snapshot returns the latest sample. Its slices are shared with later scrapes and
// must not be modified.
func (e *Exporter) Snapshot() Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snap
}

// poll takes one sample and replaces the snapshot. Only Run (and tests, which own the
// exporter) call it: the evaluator is not safe for concurrent use.
func (e *Exporter) poll(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, e.o.PollTimeout)
	defer cancel()
	groups := e.groups(pctx)
	lags, err := kafka.Lag(pctx, e.cl, groups, e.o.Lag)
	at := e.o.Clock()
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: keep the last sample rather than report ERR
		}
		e.failures.Inc()
		e.log.Warn("lag sample failed; every group reports ERR", "groups", groups,
			"retryable", kafka.IsRetryable(err), "error", err)
		snap := Snapshot{At: at, Err: err, Groups: make([]GroupSnapshot, len(groups))}
		for i, g := range groups {
			snap.Groups[i] = GroupSnapshot{Group: g, Status: kafka.StatusErr, Lag: kafka.GroupLag{Group: g, Err: err}}
		}
		e.swap(snap)
		return
	}
	// kafka.Lag answers in sorted group order; export in the configured order.
	byGroup := make(map[string]kafka.GroupLag, len(lags))
	for _, g := range lags {
		byGroup[g.Group] = g
	}
	ordered := make([]kafka.GroupLag, len(groups))
	for i, name := range groups {
		g, ok := byGroup[name]
		switch {
		case !ok:
			g = kafka.GroupLag{Group: name, Err: fmt.Errorf("group %s missing from the lag sample", name)}
		case errors.Is(g.Err, kerr.GroupIDNotFound):
			// Kafka 4 answers a describe of a group that does not exist (never
			// committed, or deleted) with GROUP_ID_NOT_FOUND where older brokers
			// answered state Dead: either way nothing is committed, so nothing lags.
			g.Err, g.State, g.Members, g.Partitions = nil, "Dead", 0, nil
		}
		ordered[i] = g
	}
	verdicts := e.eval.Observe(at, ordered)
	e.eval.Retain(groups) // a group gone since the last sample leaves no history behind
	snap := Snapshot{At: at, Groups: make([]GroupSnapshot, len(ordered))}
	for i, g := range ordered {
		snap.Groups[i] = GroupSnapshot{Group: g.Group, Status: verdicts[i].Status, Lag: g}
		if g.Err != nil {
			e.log.Warn("consumer group lag unknown", "group", g.Group, "error", g.Err)
		}
	}
	e.lastSuccess.Set(float64(at.UnixNano()) / 1e9)
	e.swap(snap)
}

// groups are the groups of one sample: Options.Groups, then those of the cluster
// whose names start with one of Options.GroupPrefixes, in name order, up to
// MaxGroups. When the cluster's groups cannot be listed, the groups found last time
// stand in (and the failure is logged): a sample is never lost to the listing.
func (e *Exporter) groups(ctx context.Context) []string {
	if len(e.o.GroupPrefixes) == 0 {
		return e.o.Groups
	}
	listed, err := kadm.NewClient(e.cl).ListGroups(ctx)
	if err != nil {
		e.log.Warn("listing consumer groups failed; the groups found last time are sampled", "error", err)
		return append(slices.Clip(e.o.Groups), e.found...)
	}
	var found []string
	for _, g := range listed.Groups() {
		if slices.Contains(e.o.Groups, g) || !slices.ContainsFunc(e.o.GroupPrefixes, func(p string) bool { return strings.HasPrefix(g, p) }) {
			continue
		}
		found = append(found, g)
	}
	slices.Sort(found)
	if room := MaxGroups - len(e.o.Groups); len(found) > room {
		e.log.Warn("more groups match the prefixes than can be exported; the rest are left out",
			"found", len(found), "exported", room, "max_groups", MaxGroups)
		found = found[:room]
	}
	e.found = found
	return append(slices.Clip(e.o.Groups), found...)
}

// swap installs snap and logs status changes.
func (e *Exporter) swap(snap Snapshot) {
	e.mu.Lock()
	prev := e.snap
	e.snap = snap
	e.mu.Unlock()
	for _, g := range snap.Groups {
		i := slices.IndexFunc(prev.Groups, func(p GroupSnapshot) bool { return p.Group == g.Group })
		if i >= 0 && prev.Groups[i].Status == g.Status {
			continue
		}
		level := slog.LevelInfo
		if g.Status != kafka.StatusOK {
			level = slog.LevelWarn
		}
		e.log.Log(context.Background(), level, "consumer group status", "group", g.Group,
			"status", g.Status.String(), "members", g.Lag.Members, "total_lag", g.Lag.TotalLag())
	}
}

// Describe implements prometheus.Collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLag
	ch <- descLagSeconds
	ch <- descStatus
	ch <- descMembers
	if e.o.KafkaLagExporter.Enabled {
		describeCompat(ch)
	}
	e.failures.Describe(ch)
	e.lastSuccess.Describe(ch)
}

// Collect implements prometheus.Collector: it writes the latest snapshot and never
// calls Kafka.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.failures.Collect(ch)
	e.lastSuccess.Collect(ch)
	snap := e.Snapshot()
	if e.o.KafkaLagExporter.Enabled {
		collectCompat(ch, e.o.KafkaLagExporter.ClusterName, snap)
	}
	for _, g := range snap.Groups {
		for _, s := range statuses {
			v := 0.0
			if s == g.Status {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descStatus, prometheus.GaugeValue, v, g.Group, s.String())
		}
		if g.Lag.Err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(g.Lag.Members), g.Group)
		for _, p := range g.Lag.Partitions {
			if p.Err != nil {
				continue
			}
			part := fmt.Sprint(p.Partition)
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(p.Lag), g.Group, p.Topic, part)
			if p.LagTime != kafka.LagTimeUnknown {
				ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, p.LagTime.Seconds(), g.Group, p.Topic, part)
			}
		}
	}
}

var _ prometheus.Collector = (*Exporter)(nil)
