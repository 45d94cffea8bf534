package retention

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// Mode says what happens to evidence past retention.
type Mode string

// Modes.
const (
	// ModeRedact replaces the row with its redacted version and publishes it.
	ModeRedact Mode = "redact"
	// ModeDelete deletes the row and publishes a tombstone.
	ModeDelete Mode = "delete"
)

// Defaults and bounds of Options.
const (
	// DefaultInterval is Run's period.
	DefaultInterval = time.Hour
	// DefaultBatchSize is the rows of one batch: one produce round and one statement.
	DefaultBatchSize = 500
	// MaxBatchSize bounds Options.BatchSize.
	MaxBatchSize = 5000
	// DefaultMaxRunTime bounds one run; it stops between batches and the next run
	// carries on.
	DefaultMaxRunTime = 30 * time.Minute
	// DefaultProduceTimeout bounds the acknowledgement of one batch of records.
	DefaultProduceTimeout = 30 * time.Second
	// DefaultDBTimeout bounds one database statement.
	DefaultDBTimeout = 30 * time.Second
	// MinInterval bounds Options.Interval from below.
	MinInterval = time.Second
)

// Sentinel errors.
var (
	// ErrInvalidOptions is wrapped by every error New returns for bad Options.
	ErrInvalidOptions = errors.New("retention: invalid options")
	// ErrClosed is returned by Run and RunOnce after Close.
	ErrClosed = errors.New("retention: closed")
	// ErrAlreadyRunning is returned by a second Run on the same Job.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
	// ErrBusy is returned by a (non-dry) RunOnce while another run, in this process or
	// another, holds the retention lock. Nothing was done; try again later.
	ErrBusy = errors.New("retention: another run is in progress")
)

// IsRetryable reports whether a run that failed with err may succeed later unchanged:
// ErrBusy, and the retryable failures of Kafka (kafka.IsRetryable) and Postgres
// (store.IsRetryable).
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		return false
	}
	return errors.Is(err, ErrBusy) || kafka.IsRetryable(err) || store.IsRetryable(err)
}

// Options configure a Job. Kafka.Brokers, Pool, Codecs and Retention are required;
// every other zero field takes the documented default.
type Options struct {
	// Kafka holds the brokers, security and producer settings (package kafka
	// validates them). The producer must use acks=all (the default).
	Kafka kafka.Options
	// EvidenceTopic receives redacted versions and tombstones. Default
	// kafka.DefaultTopicNames().Evidence.
	EvidenceTopic string
	// CheckpointTopic receives the tombstones of removed checkpoints. Default
	// kafka.DefaultTopicNames().Checkpoints.
	CheckpointTopic string
	// Pool is the database (schema migrated by store.Migrate). Required; the caller
	// owns it. The job uses at most two connections.
	Pool *pgxpool.Pool
	// Codecs encode redacted evidence versions (Codecs.Evidence). Required.
	Codecs *schemas.Codecs
	// Retention is how long evidence is kept, by occurred_at
	// (services.workspace.timeline.lark.retention.evidenceRetention). Required, > 0.
	Retention time.Duration
	// Mode is ModeRedact (default) or ModeDelete.
	Mode Mode
	// Interval is Run's period. Default DefaultInterval, at least MinInterval.
	Interval time.Duration
	// BatchSize is the rows per batch. Default DefaultBatchSize, at most MaxBatchSize.
	BatchSize int
	// MaxRunTime bounds one run (checked between batches). Default DefaultMaxRunTime.
	MaxRunTime time.Duration
	// ProduceTimeout bounds the acknowledgement of one batch. Default
	// DefaultProduceTimeout.
	ProduceTimeout time.Duration
	// DBTimeout bounds one database statement. Default DefaultDBTimeout.
	DBTimeout time.Duration
	// Clock decides the cutoff and stamps redacted versions. Default time.Now.
	Clock func() time.Time
	// Logger receives ids, hashes and counts only. Nil discards.
	Logger *slog.Logger
	// Registry receives the larkline_retention_* metrics. Nil registers nothing.
	Registry *prometheus.Registry
}

func (o Options) withDefaults() Options {
	names := kafka.DefaultTopicNames()
	o.Kafka = o.Kafka.WithDefaults()
	o.EvidenceTopic = cmp.Or(o.EvidenceTopic, names.Evidence)
	o.CheckpointTopic = cmp.Or(o.CheckpointTopic, names.Checkpoints)
	o.Mode = cmp.Or(o.Mode, ModeRedact)
	o.Interval = cmp.Or(o.Interval, DefaultInterval)
	o.BatchSize = cmp.Or(o.BatchSize, DefaultBatchSize)
	o.MaxRunTime = cmp.Or(o.MaxRunTime, DefaultMaxRunTime)
	o.ProduceTimeout = cmp.Or(o.ProduceTimeout, DefaultProduceTimeout)
	o.DBTimeout = cmp.Or(o.DBTimeout, DefaultDBTimeout)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Check reports every value of o that breaks the job's rules (after the
// defaults), as an *options.Error naming the fields, or nil. It ignores the
// dependencies (Pool, Codecs), which New checks too. The configuration layer calls
// it to report a wrong key before anything starts.
func (o Options) Check() error {
	p := o.withDefaults().problems()
	return p.Err(ErrInvalidOptions)
}

// validate checks o (defaults applied) and reports every problem at once.
func (o Options) validate() error {
	p := o.problems()
	if o.Pool == nil {
		p.Add("Pool", nil, "is required")
	}
	if o.Codecs == nil || o.Codecs.Evidence == nil {
		p.Add("Codecs", nil, "(evidence) are required")
	}
	return p.Err(ErrInvalidOptions)
}

// problems checks o's values (defaults applied).
func (o Options) problems() *options.Problems {
	p := new(options.Problems)
	if o.Retention <= 0 {
		p.Add("Retention", o.Retention, "must be positive")
	}
	if o.Mode != ModeRedact && o.Mode != ModeDelete {
		p.Add("Mode", o.Mode, "must be one of %s, %s", ModeRedact, ModeDelete)
	}
	if o.Kafka.Producer.Acks != kafka.AcksAll {
		p.Add("Kafka.Producer.Acks", o.Kafka.Producer.Acks, "must be %s: retention publishes before it changes the database", kafka.AcksAll)
	}
	if strings.TrimSpace(o.EvidenceTopic) == "" || strings.TrimSpace(o.CheckpointTopic) == "" {
		p.Add("EvidenceTopic", o.EvidenceTopic, "evidence and checkpoint topics must not be blank")
	} else if o.EvidenceTopic == o.CheckpointTopic {
		p.Add("CheckpointTopic", o.CheckpointTopic, "must differ from the evidence topic")
	}
	if o.Interval < MinInterval {
		p.Add("Interval", o.Interval, "must be at least %s", MinInterval)
	}
	if o.BatchSize < 1 || o.BatchSize > MaxBatchSize {
		p.Add("BatchSize", o.BatchSize, "must be between 1 and %d", MaxBatchSize)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MaxRunTime", o.MaxRunTime}, {"ProduceTimeout", o.ProduceTimeout}, {"DBTimeout", o.DBTimeout}} {
		if d.v <= 0 || d.v > 24*time.Hour {
			p.Add(d.name, d.v, "must be positive and at most 24h")
		}
	}
	return p
}
