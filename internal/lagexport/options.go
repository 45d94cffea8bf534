package lagexport

import (
	"cmp"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/options"
)

// Defaults and bounds of Options.
const (
	// DefaultInterval is how often the groups are sampled.
	DefaultInterval = 15 * time.Second
	// DefaultPollTimeout bounds one sample: describing the groups, listing offsets and
	// reading the record timestamps behind lag_seconds.
	DefaultPollTimeout = 10 * time.Second
	// MinInterval and MaxInterval bound Options.Interval.
	MinInterval = time.Second
	MaxInterval = time.Hour
	// MaxPollTimeout bounds Options.PollTimeout.
	MaxPollTimeout = 5 * time.Minute
	// MaxGroups bounds the exported groups, and with them the label cardinality.
	MaxGroups = 64
	// MaxGroupPrefixes bounds Options.GroupPrefixes.
	MaxGroupPrefixes = 8
)

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("lag exporter: invalid options")

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("lag exporter: closed")

// ErrAlreadyRunning is returned by a second Run on the same Exporter.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// Options configure an Exporter. Kafka.Brokers and Groups are required; every other
// zero field takes the documented default.
type Options struct {
	// Kafka holds the brokers and security settings (package kafka validates them).
	// Only the connection settings matter: the exporter never produces or joins a
	// group.
	Kafka kafka.Options
	// Groups are the consumer groups to export, e.g. larkline-windows-v1,
	// larkline-sink, larkline-synthesis, larkline-workspaces. 1..MaxGroups distinct,
	// non-blank names.
	Groups []string
	// GroupPrefixes add, at every sample, the cluster's groups whose names start with
	// one of them (listed with kadm; Describe on those groups is needed), so groups
	// that come and go while the exporter runs are exported too: every processor
	// version's windows groups, e.g. "larkline-windows-". Together with Groups at most
	// MaxGroups; more are left out with a warning. At most MaxGroupPrefixes, non-blank.
	GroupPrefixes []string
	// Interval between two samples. Default DefaultInterval, within
	// [MinInterval, MaxInterval].
	Interval time.Duration
	// PollTimeout bounds one sample. Default DefaultPollTimeout, at most
	// MaxPollTimeout.
	PollTimeout time.Duration
	// Lag bounds the timestamp look-ups of one sample (kafka.LagOptions). A zero
	// TimestampTimeout becomes half the poll timeout (at most
	// kafka.DefaultTimestampTimeout); it must leave room within PollTimeout.
	Lag kafka.LagOptions
	// Evaluator tunes the Burrow-style status (kafka.EvaluatorOptions: window,
	// WARN and STALL thresholds).
	Evaluator kafka.EvaluatorOptions
	// Clock stamps the samples the evaluator sees. Default time.Now.
	Clock func() time.Time
	// Logger receives group names and errors only. Nil discards.
	Logger *slog.Logger
	// Registry receives the exporter (a prometheus.Collector). Nil registers nothing.
	Registry *prometheus.Registry
	// KafkaLagExporter also exports every sample under kafka-lag-exporter's metric
	// names and labels (see compat.go), for dashboards and alerts written for it.
	KafkaLagExporter KafkaLagExporterOptions
}

// KafkaLagExporterOptions turns on the kafka-lag-exporter compatible series.
type KafkaLagExporterOptions struct {
	Enabled bool
	// ClusterName is the cluster_name label. Required (non-blank) when Enabled.
	ClusterName string
}

func (o Options) withDefaults() Options {
	o.Kafka = o.Kafka.WithDefaults()
	o.Interval = cmp.Or(o.Interval, DefaultInterval)
	o.PollTimeout = cmp.Or(o.PollTimeout, DefaultPollTimeout)
	o.Lag.TimestampTimeout = cmp.Or(o.Lag.TimestampTimeout, min(kafka.DefaultTimestampTimeout, o.PollTimeout/2))
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Check reports every value of o that breaks the exporter's rules (after the
// defaults) as an *options.Error naming the fields, or nil. The Kafka options and
// the Evaluator are package kafka's to check (New runs those too). The
// configuration layer calls it to report a wrong key before anything starts.
func (o Options) Check() error { return o.withDefaults().problems().Err(ErrInvalidOptions) }

// validate checks o (defaults applied) and reports every problem at once.
func (o Options) validate() error { return o.problems().Err(ErrInvalidOptions) }

// problems checks o's values (defaults applied).
func (o Options) problems() *options.Problems {
	p := new(options.Problems)
	switch n := len(o.Groups); {
	case n == 0:
		p.Add("Groups", nil, "at least one group is required")
	case n > MaxGroups:
		p.Add("Groups", n, "must be at most %d groups, larkline's own included: each is a label value", MaxGroups)
	}
	seen := make(map[string]bool, len(o.Groups))
	for _, g := range o.Groups {
		switch {
		case strings.TrimSpace(g) == "":
			p.Add("Groups", g, "must not be blank")
		case seen[g]:
			p.Add("Groups", g, "is listed twice")
		}
		seen[g] = true
	}
	if n := len(o.GroupPrefixes); n > MaxGroupPrefixes {
		p.Add("GroupPrefixes", n, "must be at most %d group prefixes", MaxGroupPrefixes)
	}
	for _, g := range o.GroupPrefixes {
		if strings.TrimSpace(g) == "" {
			p.Add("GroupPrefixes", g, "a group prefix is blank")
		}
	}
	if o.Interval < MinInterval || o.Interval > MaxInterval {
		p.Add("Interval", o.Interval, "the interval between samples must be within [%s, %s]", MinInterval, MaxInterval)
	}
	if o.PollTimeout <= 0 || o.PollTimeout > MaxPollTimeout {
		p.Add("PollTimeout", o.PollTimeout, "the poll timeout must be within (0, %s]", MaxPollTimeout)
	}
	if o.KafkaLagExporter.Enabled && strings.TrimSpace(o.KafkaLagExporter.ClusterName) == "" {
		p.Add("KafkaLagExporter.ClusterName", o.KafkaLagExporter.ClusterName, "must not be blank: kafka-lag-exporter series need a cluster name")
	}
	if err := o.Lag.Check(); err != nil {
		p.Add("Lag", nil, "%v", err)
	}
	if o.Lag.TimestampTimeout >= o.PollTimeout {
		p.Add("Lag.TimestampTimeout", o.Lag.TimestampTimeout, "the lag timestamp timeout must be within [0, PollTimeout %s)", o.PollTimeout)
	}
	return p
}
