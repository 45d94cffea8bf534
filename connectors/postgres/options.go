package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Defaults applied by New for zero Options fields.
const (
	// DefaultGroup is the consumer group of the evidence sink, the one the binary
	// names under the default kafka.groupPrefix.
	DefaultGroup = "larkline-sink"
	// DefaultMaxBatchRecords bounds the records of one batch (one database round).
	DefaultMaxBatchRecords = 5000
	// DefaultAttemptTimeout bounds one database, dead-letter or commit attempt.
	DefaultAttemptTimeout = 15 * time.Second
	// DefaultRetryBackoffMin is the first pause after a retryable failure.
	DefaultRetryBackoffMin = 100 * time.Millisecond
	// DefaultRetryBackoffMax caps the pause between two attempts during an outage.
	DefaultRetryBackoffMax = 30 * time.Second
	// DefaultDrainTimeout bounds how long Run keeps finishing its in-flight batch
	// after its context ends.
	DefaultDrainTimeout = 30 * time.Second
	// DefaultWriters is how many store calls a batch runs at once.
	DefaultWriters = 4

	// MaxBatchRecords is the largest MaxBatchRecords accepted: a batch never
	// exceeds what one DeleteEvidence call takes.
	MaxBatchRecords = store.MaxKeysPerCall
	// MaxWriters is the largest Writers accepted.
	MaxWriters = 16
)

// Options configure a Sink. Store and Codecs are required, and Kafka.Brokers; every
// other zero field takes the documented default.
type Options struct {
	// Kafka holds the brokers, security, dead-letter producer settings and the group
	// timeouts (package kafka validates it). Consumer.RebalanceTimeout bounds how long
	// the sink may hold a rebalance; see AttemptTimeout.
	Kafka kafka.Options
	// Group is the consumer group id. Default DefaultGroup.
	Group string
	// EvidenceTopic is consumed. Default kafka.DefaultTopicNames().Evidence.
	EvidenceTopic string
	// DeadLetterTopic receives the records the sink cannot write. Default
	// kafka.DefaultTopicNames().DeadLetter.
	DeadLetterTopic string

	// Store writes evidence rows, and reads the stored winner of a key whose latest
	// record is outranked (see Republish in the package documentation). Required;
	// the caller owns its pool.
	Store Store
	// Codecs decode evidence values and encode dead letters. Required.
	Codecs *schemas.Codecs

	// MaxBatchRecords bounds one batch: the records polled, decoded and written in
	// one database round before their offsets are committed. Default
	// DefaultMaxBatchRecords, at most MaxBatchRecords.
	MaxBatchRecords int
	// Writers is how many store calls (database connections) a batch uses at once.
	// A batch's upserts are split into near-equal calls of at most 1000 rows (one
	// UpsertEvidence statement), at least Writers of them; each key goes to exactly
	// one. Default DefaultWriters, at most MaxWriters; the store's pool must allow as
	// many connections.
	Writers int
	// AttemptTimeout bounds one attempt of a database write, dead-letter produce or
	// offset commit. It must be at most half of Kafka.Consumer.RebalanceTimeout: a
	// rebalance waits for at most one attempt (see the package documentation).
	// Default DefaultAttemptTimeout (or half the rebalance timeout when smaller).
	AttemptTimeout time.Duration
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff (with full
	// jitter) between attempts while a dependency is down. Defaults
	// DefaultRetryBackoffMin and DefaultRetryBackoffMax.
	RetryBackoffMin time.Duration
	RetryBackoffMax time.Duration
	// DrainTimeout bounds how long Run keeps finishing the in-flight batch after its
	// context is done; a batch not finished by then is left uncommitted and is
	// delivered again. Default DefaultDrainTimeout.
	DrainTimeout time.Duration

	// Clock stamps dead letters (failed_at). Default time.Now.
	Clock func() time.Time
	// Logger receives ids, offsets and hashes only. Nil discards.
	Logger *slog.Logger
	// Registry receives the larkline_sink_* metrics. Nil registers nothing.
	Registry *prometheus.Registry
}

// Writer writes evidence: the sink, and a re-drive of its dead letters (Redrive).
// *store.Store satisfies it.
type Writer interface {
	UpsertEvidence(ctx context.Context, batch []store.Evidence) ([]store.UpsertOutcome, error)
	DeleteEvidence(ctx context.Context, ws ids.WorkspaceID, kind store.EvidenceKind, sourceKeys []string) (int64, error)
}

// Store is what the sink needs of the evidence table; *store.Store satisfies it.
type Store interface {
	Writer
	EvidenceByKeys(ctx context.Context, ws ids.WorkspaceID, kind store.EvidenceKind, sourceKeys []string) ([]store.Evidence, error)
}

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("postgres sink: invalid options")

// withDefaults fills zero fields; it does not validate.
func (o Options) withDefaults() Options {
	names := kafka.DefaultTopicNames()
	o.Kafka = o.Kafka.WithDefaults()
	o.Group = cmp.Or(o.Group, DefaultGroup)
	o.EvidenceTopic = cmp.Or(o.EvidenceTopic, names.Evidence)
	o.DeadLetterTopic = cmp.Or(o.DeadLetterTopic, names.DeadLetter)
	o.MaxBatchRecords = cmp.Or(o.MaxBatchRecords, DefaultMaxBatchRecords)
	o.Writers = cmp.Or(o.Writers, DefaultWriters)
	o.AttemptTimeout = cmp.Or(o.AttemptTimeout, min(DefaultAttemptTimeout, o.Kafka.Consumer.RebalanceTimeout/2))
	o.RetryBackoffMin = cmp.Or(o.RetryBackoffMin, DefaultRetryBackoffMin)
	o.RetryBackoffMax = cmp.Or(o.RetryBackoffMax, max(DefaultRetryBackoffMax, o.RetryBackoffMin))
	o.DrainTimeout = cmp.Or(o.DrainTimeout, DefaultDrainTimeout)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// validate checks o (with defaults applied) and reports every problem at once.
func (o Options) validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if o.Store == nil {
		bad("store is required")
	}
	if o.Codecs == nil || o.Codecs.Evidence == nil || o.Codecs.DeadLetter == nil {
		bad("codecs (evidence and dead letter) are required")
	}
	if strings.TrimSpace(o.Group) == "" {
		bad("group is blank")
	}
	if o.EvidenceTopic == o.DeadLetterTopic {
		bad("evidence topic and dead-letter topic are both %q", o.EvidenceTopic)
	}
	if o.MaxBatchRecords < 1 || o.MaxBatchRecords > MaxBatchRecords {
		bad("max batch records %d: want 1..%d", o.MaxBatchRecords, MaxBatchRecords)
	}
	if o.Writers < 1 || o.Writers > MaxWriters {
		bad("writers %d: want 1..%d", o.Writers, MaxWriters)
	}
	if rt := o.Kafka.Consumer.RebalanceTimeout; o.AttemptTimeout <= 0 || o.AttemptTimeout > rt/2 {
		bad("attempt timeout %s: want within (0, %s] (half the rebalance timeout %s)", o.AttemptTimeout, rt/2, rt)
	}
	if o.RetryBackoffMin <= 0 || o.RetryBackoffMax < o.RetryBackoffMin || o.RetryBackoffMax > time.Hour {
		bad("retry backoff [%s, %s]: want 0 < min <= max <= 1h", o.RetryBackoffMin, o.RetryBackoffMax)
	}
	if o.DrainTimeout < 0 || o.DrainTimeout > time.Hour {
		bad("drain timeout %s: want within [0, 1h]", o.DrainTimeout)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return nil
}
