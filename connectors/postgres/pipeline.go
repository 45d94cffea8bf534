package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
)

// The batch loop is a two-stage pipeline. The goroutine running Run polls, decodes,
// produces dead letters and commits; the store writes of one batch at a time run on
// their own goroutine (a flight), so that the next batch is fetched and decoded, and
// the previous one's offsets committed, while the database works. Batches are written
// strictly one after another and committed in order, so the versions of a key are
// applied in offset order.
//
// With kgo.BlockRebalanceOnPoll every poll holds rebalances until AllowRebalance. The
// loop allows them whenever nothing is in flight: when a poll brings nothing, and as
// soon as a rebalance is waiting (kgo.OnPartitionsCallbackBlocked), after which it
// writes the batch in hand without starting another flight. A rebalance therefore
// waits at most for the flight and one batch, or, while a dependency is down, for
// one attempt: the paused batches are given up and rewound.

// rebalanceSignal is a channel closed while a rebalance waits for this member.
type rebalanceSignal struct {
	mu    sync.Mutex
	ch    chan struct{}
	fired bool
}

func newRebalanceSignal() *rebalanceSignal { return &rebalanceSignal{ch: make(chan struct{})} }

// fire says that a rebalance is waiting.
func (r *rebalanceSignal) fire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fired {
		close(r.ch)
		r.fired = true
	}
}

// wanted returns a channel that is closed once a rebalance waits.
func (r *rebalanceSignal) wanted() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch
}

func (r *rebalanceSignal) pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fired
}

// reset re-arms the signal once rebalances are allowed again.
func (r *rebalanceSignal) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fired {
		r.ch, r.fired = make(chan struct{}), false
	}
}

// flight is a batch whose store writes run on their own goroutine.
type flight struct {
	b    *batch
	err  error
	done chan struct{}
}

func (s *Sink) launch(work context.Context, b *batch) *flight {
	f := &flight{b: b, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.err = s.write(work, b)
	}()
	return f
}

// allow lets a waiting rebalance run: every polled record is committed or rewound.
func (s *Sink) allow() {
	s.cl.AllowRebalance()
	s.rb.reset()
}

// fatal reports whether err ends Run (anything but a batch given up).
func fatal(err error) bool {
	var ab *abortError
	return err != nil && !errors.As(err, &ab)
}

// loop runs batches until ctx ends (then drains) or one fails fatally. Each turn
// polls the next batch, settles the batch in flight (overlapping the next one's
// writes with its dead letters and offsets where it can), then starts the next.
func (s *Sink) loop(ctx context.Context) error {
	// Batches keep working for DrainTimeout after ctx ends.
	work, stopWork := drainContext(ctx, s.o.DrainTimeout)
	defer stopWork()
	var fl *flight
	for {
		if ctx.Err() != nil && fl == nil {
			return nil
		}
		next, nextErr, err := s.pollNext(ctx, work, fl)
		if err != nil {
			return err
		}
		if fl != nil {
			var took bool
			fl, took, err = s.settle(ctx, work, fl, next, nextErr)
			if err != nil {
				return err
			}
			if took {
				continue
			}
		}
		if fl, err = s.startNext(ctx, work, next, nextErr); err != nil {
			return err
		}
	}
}

// pollNext polls and decodes the next batch (nil: none, or none taken). With a
// rebalance waiting, the batch in flight is finished and no other one is taken
// before rebalances are allowed. A poll error is fatal: the batch in flight is
// waited for and given up with it.
func (s *Sink) pollNext(ctx, work context.Context, fl *flight) (next *batch, nextErr, err error) {
	if ctx.Err() != nil || (fl != nil && s.rb.pending()) {
		return nil, nil, nil
	}
	recs, err := s.poll(ctx, fl)
	if err != nil {
		if fl != nil {
			<-fl.done
			s.giveUp(err, fl.b)
		}
		return nil, nil, err
	}
	if len(recs) > 0 {
		next = s.newBatch(recs)
		nextErr = s.decode(work, next)
	}
	return next, nextErr, nil
}

// settle waits for the batch in flight and completes it. When it wrote and next
// decoded, next's writes start at once (after this one's, so the versions of a
// key stay in order) while this one's dead letters and offsets go out: the
// returned flight is next's. took reports that next was dealt with here
// (launched, or given up with a failed batch in flight); err is a fatal failure.
func (s *Sink) settle(ctx, work context.Context, fl *flight, next *batch, nextErr error) (_ *flight, took bool, _ error) {
	<-fl.done
	written, err := fl.b, fl.err
	var overlap *flight
	if err == nil && next != nil && nextErr == nil && !s.rb.pending() && ctx.Err() == nil {
		overlap = s.launch(work, next)
	}
	if err == nil {
		err = s.complete(work, written)
	}
	if err != nil {
		if overlap != nil {
			<-overlap.done
		}
		if next != nil {
			s.giveUp(err, written, next)
		} else {
			s.giveUp(err, written)
		}
		s.allow()
		if fatal(err) {
			return nil, true, err
		}
		return nil, true, nil
	}
	if overlap != nil {
		return overlap, true, nil
	}
	return nil, false, nil
}

// startNext deals with the polled batch when nothing is in flight: none (allow
// rebalances), undecodable (given up), a rebalance or shutdown waiting (written
// and completed now, then rebalances are allowed), or launched.
func (s *Sink) startNext(ctx, work context.Context, next *batch, nextErr error) (*flight, error) {
	switch {
	case next == nil:
		s.allow()
	case nextErr != nil:
		s.giveUp(nextErr, next)
		s.allow()
		if fatal(nextErr) {
			return nil, nextErr
		}
	case s.rb.pending() || ctx.Err() != nil:
		// Let the rebalance (or the shutdown) through: this batch is written
		// now, and no other is started before rebalances are allowed.
		err := s.write(work, next)
		if err == nil {
			err = s.complete(work, next)
		}
		if err != nil {
			s.giveUp(err, next)
		}
		s.allow()
		if fatal(err) {
			return nil, err
		}
	default:
		return s.launch(work, next), nil
	}
	return nil, nil
}

// poll returns the next records. While a batch is being written it returns as soon
// as that write ends, with or without records, so that the batch's commit never waits
// for new data.
func (s *Sink) poll(ctx context.Context, fl *flight) ([]*kgo.Record, error) {
	pctx := ctx
	if fl != nil {
		var cancel context.CancelFunc
		pctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-fl.done:
				cancel()
			case <-pctx.Done():
			}
		}()
	}
	fetches := s.cl.PollRecords(pctx, s.o.MaxBatchRecords)
	if fetches.IsClientClosed() {
		return nil, fmt.Errorf("%w: kafka client closed while running", ErrFatal)
	}
	failed := false
	fetches.EachError(func(topic string, partition int32, err error) {
		if pctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return
		}
		failed = true
		s.log.Warn("fetch failed", "topic", topic, "partition", partition, "retryable", kafka.IsRetryable(err), "error", err)
	})
	recs := fetches.Records()
	if failed && len(recs) == 0 && fl == nil {
		// Do not spin on a fetch error that repeats at once (franz-go keeps retrying
		// the fetch itself). A pause cut short by a rebalance or ctx is fine.
		_ = s.pause(ctx, s.boKafka.next())
	} else if !failed {
		s.boKafka.reset()
	}
	return recs, nil
}

// drainContext returns a context that ends grace after parent ends, or when stop is
// called.
func drainContext(parent context.Context, grace time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	stopAfter := context.AfterFunc(parent, func() { time.AfterFunc(grace, cancel) })
	return ctx, func() { stopAfter(); cancel() }
}

func (s *Sink) newBatch(recs []*kgo.Record) *batch {
	b := newBatch(recs)
	b.start = time.Now()
	if s.hooks.batchStart != nil {
		s.hooks.batchStart(len(recs))
	}
	return b
}

// decode decodes every record of b: a record that cannot be decoded is parked; a
// schema registry outage is retried.
func (s *Sink) decode(work context.Context, b *batch) error {
	t := time.Now()
	defer func() { b.timing.decode = time.Since(t) }()
	return s.retry(work, opRegistry, s.boRegistry, func(ctx context.Context) (bool, error) { return s.decodeStep(ctx, b) })
}

// write writes b's versions as planned (see plan: upserts across Writers
// connections, tombstones per workspace), retrying while the database is
// unavailable and isolating the rows it rejects.
func (s *Sink) write(work context.Context, b *batch) error {
	t := time.Now()
	defer func() { b.timing.write = time.Since(t) }()
	return s.retry(work, opDatabase, s.boDB, func(ctx context.Context) (bool, error) { return s.writeStep(ctx, b) })
}

// complete finishes a written batch: its parked records are produced to the
// dead-letter topic and acknowledged, then its offsets are committed.
func (s *Sink) complete(work context.Context, b *batch) error {
	t := time.Now()
	if err := s.retry(work, opDeadLetter, s.boKafka, func(ctx context.Context) (bool, error) { return s.deadLetterStep(ctx, b) }); err != nil {
		return err
	}
	if err := s.retry(work, opRepublish, s.boKafka, func(ctx context.Context) (bool, error) { return s.republishStep(ctx, b) }); err != nil {
		return err
	}
	if s.hooks.afterWrite != nil {
		if err := s.hooks.afterWrite(work, b.records); err != nil {
			return fmt.Errorf("%w: after write: %w", ErrFatal, err)
		}
	}
	b.timing.deadLetter = time.Since(t)
	t = time.Now()
	if err := s.retry(work, opCommit, s.boKafka, func(ctx context.Context) (bool, error) { return s.commitStep(ctx, b) }); err != nil {
		return err
	}
	b.timing.commit = time.Since(t)
	s.account(b, nil)
	if s.hooks.afterCommit != nil {
		s.hooks.afterCommit(len(b.records))
	}
	return nil
}

// giveUp leaves batches uncommitted: the consumer is rewound to their first offsets
// (the earliest per partition), so their records are polled again, or read by the
// partitions' next owner from the committed offsets. Every step is idempotent, so
// delivering them again is safe.
func (s *Sink) giveUp(err error, bs ...*batch) {
	rewind := map[string]map[int32]kgo.EpochOffset{}
	n := 0
	for _, b := range bs {
		n += len(b.records)
		for t, ps := range b.firstOffsets() {
			if rewind[t] == nil {
				rewind[t] = map[int32]kgo.EpochOffset{}
			}
			for p, o := range ps {
				if cur, ok := rewind[t][p]; !ok || o.Offset < cur.Offset {
					rewind[t][p] = o
				}
			}
		}
		s.account(b, err)
	}
	s.cl.SetOffsets(rewind)
	var ab *abortError
	if errors.As(err, &ab) {
		s.m.aborted.WithLabelValues(ab.cause).Inc()
		s.log.Info("batch given up uncommitted; its records will be delivered again", "cause", ab.cause, "records", n)
	}
}

// account records a batch's metrics. Outcomes are counted even for a batch given up
// after writing: they are what the database did.
func (s *Sink) account(b *batch, err error) {
	for o, n := range b.outcomes {
		if n > 0 {
			s.m.evidence.WithLabelValues(o).Add(float64(n))
		}
	}
	clear(b.outcomes) // a batch is accounted once
	s.m.batchRecords.Observe(float64(len(b.records)))
	if err != nil {
		return
	}
	d := time.Since(b.start)
	s.m.batchDuration.Observe(d.Seconds())
	s.m.committed.Add(float64(len(b.records)))
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("batch committed", "records", len(b.records), "parked", len(b.parked), "duration", d,
			"decode", b.timing.decode, "write", b.timing.write, "dead_letters", b.timing.deadLetter, "commit", b.timing.commit)
	}
}
