package workspaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	larkchats "github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Feed defaults.
const (
	// DefaultGroup is the consumer group of the workspace feed.
	DefaultGroup = "larkline-workspaces"
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait between retries of a
	// record after a retryable failure (doubling, with jitter).
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultMaxPollRecords bounds the records applied between two offset commits.
	DefaultMaxPollRecords = 500
	// ReasonRejectedByStore is DeadLetter.Reason of a valid-looking record that the
	// database refused (a constraint or data error), which retrying cannot fix.
	ReasonRejectedByStore = "rejected_by_store"

	commitTimeout = 10 * time.Second
)

// ConsumerOptions configure a Consumer. Zero values take the documented defaults.
type ConsumerOptions struct {
	// Kafka configures the client. Producer.Acks must be all (the default): dead
	// letters are written with acks=all before the offset of their record is committed.
	Kafka kafka.Options
	// Group is the consumer group. Default DefaultGroup. A new group reads the topic
	// from the start.
	Group string
	// Topic is the compacted workspace topic. Default schemas.DefaultWorkspaceTopic.
	Topic string
	// DeadLetterTopic receives records that cannot be applied. Default
	// schemas.DefaultDeadLetterTopic.
	DeadLetterTopic string
	// Codecs decode workspace records and encode dead letters. Required.
	Codecs *schemas.Codecs
	// Applier writes records to Postgres. Required (NewApplier).
	Applier Applier
	// ClockSkew is how far in the future a record's created_at may be. Default
	// DefaultClockSkew; negative is an error.
	ClockSkew time.Duration
	// MinBackoff and MaxBackoff bound retries. Defaults DefaultMinBackoff and
	// DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxPollRecords bounds a batch. Default DefaultMaxPollRecords.
	MaxPollRecords int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives ids, versions, offsets and reason codes only. Nil discards.
	Logger *slog.Logger
	// Registry receives the feed metrics. Nil registers nothing.
	Registry *prometheus.Registry
	// Chats checks each record's chats against the Lark chat info API: a single
	// (p2p) or unsupported chat is left out of the record's bindings and reported
	// (a warning; larkline_lark_chat_refusals_total{path="feed"}), while the rest of
	// the record applies. A chat Lark cannot answer for is kept: reconciliation
	// checks it again before reading it. *chats.Guard satisfies it; larkline's
	// workspaces role always sets it. Nil: no check.
	Chats ChatChecker
}

// Consumer applies the workspace feed to Postgres. See the package documentation for
// its guarantees. Run it once; Close stops it.
type Consumer struct {
	opts ConsumerOptions
	cl   *kgo.Client
	log  *slog.Logger
	m    *feedMetrics
	life *lifecycle.State
}

// NewConsumer validates opts and creates the Kafka client; nothing is fetched until Run.
func NewConsumer(opts ConsumerOptions) (*Consumer, error) {
	var problems []error
	bad := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	opts.Group = cmp.Or(opts.Group, DefaultGroup)
	opts.Topic = cmp.Or(opts.Topic, schemas.DefaultWorkspaceTopic)
	opts.DeadLetterTopic = cmp.Or(opts.DeadLetterTopic, schemas.DefaultDeadLetterTopic)
	if opts.Topic == opts.DeadLetterTopic {
		bad("topic and dead-letter topic are both %q", opts.Topic)
	}
	if opts.Codecs == nil || opts.Codecs.Workspace == nil || opts.Codecs.DeadLetter == nil {
		bad("codecs with the workspace and dead-letter codecs are required")
	}
	if opts.Applier == nil {
		bad("applier is required")
	}
	opts.ClockSkew = cmp.Or(opts.ClockSkew, DefaultClockSkew)
	if opts.ClockSkew < 0 {
		bad("clock skew %s is negative", opts.ClockSkew)
	}
	opts.MinBackoff = cmp.Or(opts.MinBackoff, DefaultMinBackoff)
	opts.MaxBackoff = cmp.Or(opts.MaxBackoff, DefaultMaxBackoff)
	if opts.MinBackoff < 0 || opts.MaxBackoff < opts.MinBackoff {
		bad("backoff must satisfy 0 < min (%s) <= max (%s)", opts.MinBackoff, opts.MaxBackoff)
	}
	opts.MaxPollRecords = cmp.Or(opts.MaxPollRecords, DefaultMaxPollRecords)
	if opts.MaxPollRecords < 0 {
		bad("max poll records %d is negative", opts.MaxPollRecords)
	}
	if acks := opts.Kafka.WithDefaults().Producer.Acks; acks != kafka.AcksAll {
		bad("kafka producer acks %q: dead letters need acks=all", acks)
	}
	kopts, err := kafka.NewClientOptions(opts.Kafka)
	if err != nil {
		problems = append(problems, err)
	}
	gopts, err := kafka.GroupConsumerOptions(kafka.GroupConsumer{Group: opts.Group, Topics: []string{opts.Topic}})
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: workspace feed consumer: %w", ErrInvalidOptions, errors.Join(problems...))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newFeedMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(append(kopts, gopts...), kgo.BlockRebalanceOnPoll())...)
	if err != nil {
		return nil, fmt.Errorf("workspace feed consumer: create kafka client: %w", err)
	}
	return &Consumer{
		life: lifecycle.New("workspace feed consumer", lifecycle.Once, ErrClosed),
		opts: opts,
		cl:   cl,
		log:  opts.Logger.With("component", string(ids.StageWorkspaces), "topic", opts.Topic, "group", opts.Group),
		m:    m,
	}, nil
}

// Run consumes the feed until ctx is cancelled or Close is called (then it returns
// nil after committing the offsets of every record it applied), or until a failure
// that retrying cannot fix and that would lose a record if skipped (then it returns
// the error without committing that record). Run may be called once.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end, err := c.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	idle := c.opts.MinBackoff
	for {
		if ctx.Err() != nil {
			return nil
		}
		fetches := c.cl.PollRecords(ctx, c.opts.MaxPollRecords)
		if fetches.IsClientClosed() {
			return nil
		}
		fetchErrs := 0
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			fetchErrs++
			c.m.fetchErrors.Inc()
			c.log.Warn("workspace feed: fetch failed", "fetch_topic", topic, "partition", partition, "error", err)
		})
		recs := fetches.Records()
		err := c.process(ctx, recs)
		c.cl.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(recs) == 0 && fetchErrs > 0 {
			if backoff.Sleep(ctx, backoff.Jitter(idle)) != nil {
				return nil
			}
			idle = min(2*idle, c.opts.MaxBackoff)
		} else {
			idle = c.opts.MinBackoff
		}
	}
}

// Close ends a running Run and waits for it, then leaves the group and closes the
// client. Offsets of records a Run applied while it was being stopped may not be
// committed; those records are applied again, to the same effect, by the next owner.
func (c *Consumer) Close() error {
	if c.life.Close() {
		c.cl.CloseAllowingRebalance()
	}
	return nil
}

// process applies recs in order and commits the offsets of those applied.
func (c *Consumer) process(ctx context.Context, recs []*kgo.Record) error {
	done := 0
	var err error
	for _, r := range recs {
		if err = c.handle(ctx, r); err != nil {
			break
		}
		done++
	}
	if done > 0 {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		defer cancel()
		if cerr := c.cl.CommitRecords(cctx, recs[:done]...); cerr != nil {
			c.m.commitErrors.Inc()
			c.log.Warn("workspace feed: offset commit failed; the records will be applied again", "records", done, "error", cerr)
		}
	}
	return err
}

// handle applies one record or parks it. It returns an error only when the record was
// neither applied nor parked: ctx was cancelled, or a failure that cannot be retried.
func (c *Consumer) handle(ctx context.Context, r *kgo.Record) error {
	if len(r.Value) == 0 {
		return c.handleTombstone(ctx, r)
	}
	rec, err := retry(ctx, c, opDecode, schemas.IsRetryable, func() (schemas.WorkspaceRecord, error) {
		return c.opts.Codecs.Workspace.Decode(ctx, r.Value)
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.deadLetter(ctx, r, err, "")
	}
	if string(r.Key) != string(rec.ID) {
		return c.deadLetter(ctx, r, fmt.Errorf("%w: record key %.140q is not the record's workspace id %s",
			schemas.ErrInvalidRecord, r.Key, rec.ID), "")
	}
	if err := ValidateRecord(&rec, c.opts.Now(), c.opts.ClockSkew); err != nil {
		return c.deadLetter(ctx, r, fmt.Errorf("%w: %w", schemas.ErrInvalidRecord, err), "")
	}
	chats := c.groupChats(ctx, &rec)
	res, err := retry(ctx, c, opApply, store.IsRetryable, func() (ApplyResult, error) {
		return c.opts.Applier.ApplyRecord(ctx, workspaceOf(&rec), rec.Version, chats)
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rejectedByStore(err) {
			return c.deadLetter(ctx, r, err, ReasonRejectedByStore)
		}
		return fmt.Errorf("workspace feed: apply workspace %s version %d (partition %d offset %d): %w",
			rec.ID, rec.Version, r.Partition, r.Offset, err)
	}
	log := c.log.With("workspace_id", string(rec.ID), "version", rec.Version, "partition", r.Partition, "offset", r.Offset)
	if res.Outcome == store.WorkspaceIgnored {
		c.m.records.WithLabelValues(outcomeIgnoredOlder).Inc()
		log.Debug("workspace feed: record not newer than the stored version; ignored")
		return nil
	}
	c.m.records.WithLabelValues(outcomeApplied).Inc()
	log.Info("workspace feed: applied", "outcome", res.Outcome.String(), "status", rec.Status,
		"chats", len(chats), "chats_refused", len(rec.Chats)-len(chats), "bindings_added", res.Added, "bindings_removed", res.Removed)
	return nil
}

// groupChats returns the record's chats without those the chat info API says are
// not group chats, each of which is reported.
func (c *Consumer) groupChats(ctx context.Context, rec *schemas.WorkspaceRecord) []ids.ChatID {
	if c.opts.Chats == nil {
		return rec.Chats
	}
	out := make([]ids.ChatID, 0, len(rec.Chats))
	for _, chat := range rec.Chats {
		err := c.opts.Chats.Check(ctx, chat, larkchats.PathFeed)
		switch {
		case err == nil:
		case errors.Is(err, larkchats.ErrRefused):
			c.log.Warn("workspace feed: chat is not a group chat; its binding is ignored",
				"workspace_id", string(rec.ID), "chat_id", string(chat), "reason", larkchats.Reason(err), "version", rec.Version)
			continue
		default:
			c.log.Warn("workspace feed: could not check the chat type with Lark; bound, and checked again before it is read",
				"workspace_id", string(rec.ID), "chat_id", string(chat), "err", err)
		}
		out = append(out, chat)
	}
	return out
}

func (c *Consumer) handleTombstone(ctx context.Context, r *kgo.Record) error {
	ws, err := ids.ParseWorkspaceID(string(r.Key))
	if err != nil {
		return c.deadLetter(ctx, r, fmt.Errorf("%w: tombstone key: %w", schemas.ErrInvalidRecord, err), "")
	}
	res, err := retry(ctx, c, opApply, store.IsRetryable, func() (TombstoneResult, error) {
		return c.opts.Applier.ApplyTombstone(ctx, ws)
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rejectedByStore(err) {
			return c.deadLetter(ctx, r, err, ReasonRejectedByStore)
		}
		return fmt.Errorf("workspace feed: apply tombstone of workspace %s (partition %d offset %d): %w",
			ws, r.Partition, r.Offset, err)
	}
	c.m.records.WithLabelValues(outcomeTombstone).Inc()
	c.log.Info("workspace feed: tombstone applied", "workspace_id", string(ws), "partition", r.Partition, "offset", r.Offset,
		"found", res.Found, "archived", res.Archived, "bindings_removed", res.Removed)
	return nil
}

// deadLetter parks r in the dead-letter topic with the reason of cause (or reason,
// when set) and returns nil once Kafka acknowledged it.
func (c *Consumer) deadLetter(ctx context.Context, r *kgo.Record, cause error, reason string) error {
	dl := schemas.NewDeadLetter(ids.StageWorkspaces, cause, r.Topic, r.Partition, r.Offset, r.Key, r.Value, c.opts.Now())
	if reason != "" {
		dl.Reason = reason
	}
	b, err := retry(ctx, c, opDeadLetter, schemas.IsRetryable, func() ([]byte, error) {
		return c.opts.Codecs.DeadLetter.Encode(ctx, dl)
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("workspace feed: encode dead letter of partition %d offset %d: %w", r.Partition, r.Offset, err)
	}
	_, err = retry(ctx, c, opDeadLetter, kafka.IsRetryable, func() (struct{}, error) {
		return struct{}{}, c.cl.ProduceSync(ctx, &kgo.Record{Topic: c.opts.DeadLetterTopic, Key: r.Key, Value: b}).FirstErr()
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("workspace feed: produce dead letter of partition %d offset %d to %s: %w",
			r.Partition, r.Offset, c.opts.DeadLetterTopic, err)
	}
	c.m.records.WithLabelValues(outcomeDeadLettered).Inc()
	c.m.deadLettered.WithLabelValues(dl.Reason).Inc()
	c.log.Warn("workspace feed: record parked in the dead-letter topic", "key", keyForLog(r.Key),
		"partition", r.Partition, "offset", r.Offset, "reason", dl.Reason, "error", dl.Error)
	return nil
}

// rejectedByStore reports whether the database refused the record's data itself (the
// applier's or the store's validation, a data exception or an integrity constraint): retrying cannot succeed,
// and skipping the record silently would lose it, so it is parked.
func rejectedByStore(err error) bool {
	if errors.Is(err, store.ErrInvalid) || errors.Is(err, ErrInvalid) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
	}
	return false
}

// keyForLog returns the record key when it is a valid workspace id and a marker
// otherwise: keys are ids, but an invalid one may be arbitrary bytes.
func keyForLog(key []byte) string {
	if _, err := ids.ParseWorkspaceID(string(key)); err == nil {
		return string(key)
	}
	return fmt.Sprintf("<invalid key, %d bytes>", len(key))
}

// retry calls f until it succeeds, fails with an error retryable rejects, or ctx is
// done, waiting between attempts from MinBackoff doubling up to MaxBackoff, with
// jitter. Each retry is counted and logged.
func retry[T any](ctx context.Context, c *Consumer, op string, retryable func(error) bool, f func() (T, error)) (T, error) {
	delay := c.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		v, err := f()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return v, err
		}
		c.m.retries.WithLabelValues(op).Inc()
		wait := backoff.Jitter(delay)
		c.log.Warn("workspace feed: retryable failure; retrying", "operation", op, "attempt", attempt, "wait", wait, "error", err)
		if err := backoff.Sleep(ctx, wait); err != nil {
			return v, err
		}
		delay = min(2*delay, c.opts.MaxBackoff)
	}
}
