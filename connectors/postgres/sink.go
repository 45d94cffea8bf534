package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// leaveTimeout bounds leaving the group when Run returns.
const leaveTimeout = 10 * time.Second

// hooks are seams for tests and benchmarks inside this package; production code
// leaves them nil.
type hooks struct {
	// batchStart runs when a batch has been polled, before anything is written.
	batchStart func(records int)
	// afterWrite runs after a batch is durable in Postgres and its dead letters are
	// acknowledged, before its offsets are committed; an error stops Run there, as a
	// crash would (the failpoint between the database commit and the offset commit).
	afterWrite func(ctx context.Context, records []*kgo.Record) error
	// afterCommit runs after a batch's offsets are committed.
	afterCommit func(records int)
}

// Sink consumes the evidence topic as a member of a consumer group and writes every
// record into workspace_timeline_evidence. Create it with New, run it with Run (once),
// release it with Close.
type Sink struct {
	o        Options
	kopts    []kgo.Opt
	log      *slog.Logger
	m        *metrics
	store    Store
	codec    *schemas.Codec[schemas.EvidenceRecord]
	dlqCodec *schemas.Codec[schemas.DeadLetter]

	// rb is fired when a rebalance waits for this member to release its polls
	// (kgo.OnPartitionsCallbackBlocked), and reset when it does.
	rb *rebalanceSignal

	// Backoff per dependency. boDB is used by the batch being written (one at a
	// time), the others by the goroutine running Run.
	boDB, boKafka, boRegistry *backoff

	hooks hooks

	life *lifecycle.State
	cl   *kgo.Client // created by Run, used by Run's goroutines only
}

// New validates o and prepares a sink. Nothing connects until Run.
func New(o Options) (*Sink, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	copts, err := kafka.NewClientOptions(o.Kafka)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	gopts, err := kafka.GroupConsumerOptions(kafka.GroupConsumer{Group: o.Group, Topics: []string{o.EvidenceTopic}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, fmt.Errorf("%w: registering metrics: %w", ErrInvalidOptions, err)
	}
	s := &Sink{
		life:       lifecycle.New("postgres sink", lifecycle.Once, ErrClosed),
		o:          o,
		log:        logging.OrDiscard(o.Logger).With("component", string(ids.StageSink), "group", o.Group),
		m:          m,
		store:      o.Store,
		codec:      o.Codecs.Evidence,
		dlqCodec:   o.Codecs.DeadLetter,
		rb:         newRebalanceSignal(),
		boDB:       newBackoff(o.RetryBackoffMin, o.RetryBackoffMax),
		boKafka:    newBackoff(o.RetryBackoffMin, o.RetryBackoffMax),
		boRegistry: newBackoff(o.RetryBackoffMin, o.RetryBackoffMax),
	}
	s.kopts = append(append(copts, gopts...),
		// Offsets are committed by the batch loop after the database commit
		// (GroupConsumerOptions disables autocommit), and a rebalance cannot run
		// while a batch is in flight: the loop allows rebalances only when every
		// polled record is committed or rewound (see pipeline.go).
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(s.onBlocked),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
	)
	return s, nil
}

// Run consumes until ctx ends or a fatal error, then finishes (or, after
// DrainTimeout, gives up) the batches in flight, leaves the group and returns. It
// returns nil when ctx ended, and an error wrapping ErrFatal when the sink cannot go
// on. It closes its Kafka client before it returns. Run may be called once.
func (s *Sink) Run(ctx context.Context) error {
	ctx, end, err := s.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	cl, err := kgo.NewClient(s.kopts...)
	if err != nil {
		return fmt.Errorf("%w: creating kafka client: %w", ErrFatal, err)
	}
	defer cl.CloseAllowingRebalance()
	s.cl = cl

	s.log.Info("evidence sink started", "topic", s.o.EvidenceTopic, "dead_letter_topic", s.o.DeadLetterTopic,
		"max_batch_records", s.o.MaxBatchRecords, "writers", s.o.Writers)
	err = s.loop(ctx)
	s.cl.AllowRebalance()
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	if lerr := s.cl.LeaveGroupContext(lctx); lerr != nil {
		s.log.Warn("leaving the consumer group failed; its partitions move on after the session timeout", "error", lerr)
	}
	lcancel()
	if err != nil {
		s.log.Error("evidence sink stopped", "error", err)
		return err
	}
	s.log.Info("evidence sink stopped")
	return nil
}

// Close stops a running Run and waits for it to drain and release its Kafka client.
// It does not close the store. Safe to call more than once and without Run.
func (s *Sink) Close() error {
	s.life.Close()
	return nil
}

// retryError marks a failure that a later attempt may not have.
type retryError struct{ err error }

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// retry runs step, each attempt bounded by AttemptTimeout, until it reports done. A
// step returns (false, nil) when it made progress and has more to do, a *retryError
// after a failure a later attempt may not have (retry then pauses with bo's backoff),
// or any other error to end the batch. A pause ends early, giving the batch up, when
// a rebalance waits for this member or the work context ends.
func (s *Sink) retry(work context.Context, op string, bo *backoff, step func(context.Context) (bool, error)) error {
	for {
		actx, cancel := context.WithTimeout(work, s.o.AttemptTimeout)
		done, err := step(actx)
		cancel()
		if err == nil {
			if done {
				if n := bo.failures(); n > 0 {
					s.m.paused.Set(0)
					s.log.Info("sink resumed", "operation", op, "failed_attempts", n)
				}
				bo.reset()
				return nil
			}
			continue
		}
		if work.Err() != nil {
			s.m.paused.Set(0)
			return &abortError{cause: abortShutdown}
		}
		var re *retryError
		if !errors.As(err, &re) {
			s.m.paused.Set(0)
			return err
		}
		s.m.retries.WithLabelValues(op).Inc()
		s.m.paused.Set(1)
		d := bo.next()
		s.log.Warn("sink paused: retrying after a retryable failure", "operation", op,
			"attempt", bo.failures(), "backoff", d, "error", re.err)
		if err := s.pause(work, d); err != nil {
			s.m.paused.Set(0)
			return err
		}
	}
}

// pause waits d. It returns an *abortError when a rebalance is waiting for this
// member (the batch is given up so that the rebalance is not held for the length of
// an outage) or ctx ends.
func (s *Sink) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.rb.wanted():
		return &abortError{cause: abortRebalance}
	case <-ctx.Done():
		return &abortError{cause: abortShutdown}
	}
}

// decodeStep decodes the records not yet decoded.
func (s *Sink) decodeStep(ctx context.Context, b *batch) (bool, error) {
	for ; b.decoded < len(b.records); b.decoded++ {
		r := b.records[b.decoded]
		v, p, err := decodeRecord(ctx, s.codec, r)
		switch {
		case err != nil && (retryableDecode(err) || ctx.Err() != nil):
			return false, &retryError{fmt.Errorf("decode %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)}
		case err != nil:
			return false, fmt.Errorf("%w: decode %s/%d@%d: %w", ErrFatal, r.Topic, r.Partition, r.Offset, err)
		case p != nil:
			b.park(p)
		default:
			b.add(v)
		}
	}
	return true, nil
}

// writeStep runs one round of the batch's pending store calls.
func (s *Sink) writeStep(ctx context.Context, b *batch) (bool, error) {
	if !b.planned {
		b.plan(s.o.Writers)
	}
	if len(b.pending) == 0 {
		return true, nil
	}
	calls := b.pending
	results := s.runCalls(ctx, calls)
	retry, fatal := b.resolve(calls, results)
	switch {
	case fatal != nil:
		return false, fmt.Errorf("%w: writing evidence: %w", ErrFatal, fatal)
	case retry != nil:
		return false, &retryError{fmt.Errorf("writing evidence: %w", retry)}
	}
	return len(b.pending) == 0, nil
}

// runCalls runs calls concurrently, at most Writers at a time.
func (s *Sink) runCalls(ctx context.Context, calls []*call) []callResult {
	res := make([]callResult, len(calls))
	if len(calls) == 1 {
		res[0] = s.runCall(ctx, calls[0])
		return res
	}
	sem := make(chan struct{}, s.o.Writers)
	var wg sync.WaitGroup
	for i, c := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res[i] = s.runCall(ctx, c)
		})
	}
	wg.Wait()
	return res
}

func (s *Sink) runCall(ctx context.Context, c *call) callResult {
	vs := c.versions()
	if c.tombstones {
		keys := make([]string, len(vs))
		for i, v := range vs {
			keys[i] = v.sourceKey
		}
		n, err := s.store.DeleteEvidence(ctx, c.ws, store.LarkMessageEvidence, keys)
		return callResult{deleted: n, err: err}
	}
	rows := make([]store.Evidence, len(vs))
	for i, v := range vs {
		rows[i] = v.row
	}
	outs, err := s.store.UpsertEvidence(ctx, rows)
	if err == nil && len(outs) != len(rows) {
		err = fmt.Errorf("store reported %d outcomes for %d rows", len(outs), len(rows))
	}
	return callResult{outcomes: outs, err: err}
}

// commitStep commits the offsets of the batch's last record in every partition.
func (s *Sink) commitStep(ctx context.Context, b *batch) (bool, error) {
	err := s.cl.CommitRecords(ctx, b.lastPerPartition()...)
	switch {
	case err == nil:
		return true, nil
	case retryableKafka(err) || ctx.Err() != nil:
		return false, &retryError{fmt.Errorf("committing offsets: %w", err)}
	}
	// A commit the group refuses (the member lost its partitions): the partitions'
	// next owner starts from the last committed offsets.
	s.log.Warn("offset commit refused", "error", err)
	return false, &abortError{cause: abortCommit}
}

func (s *Sink) onBlocked(context.Context, *kgo.Client) { s.rb.fire() }

// onRevoked runs only when the loop allows rebalances (BlockRebalanceOnPoll): every
// polled record is committed or rewound by then, so there is nothing to finish.
func (s *Sink) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	s.log.Info("partitions revoked", "partitions", partitionList(revoked))
}

func (s *Sink) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.log.Warn("partitions lost; their uncommitted records go to their next owner", "partitions", partitionList(lost))
}

// partitionList renders topic partitions as a sorted, log-friendly list.
func partitionList(tps map[string][]int32) []string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(tps)) {
		ps := slices.Clone(tps[t])
		slices.Sort(ps)
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", t, p))
		}
	}
	return out
}
