package synthesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

const (
	// autoCommitInterval is franz-go's background commit of marked offsets, a backstop
	// to the commit the worker requests after every finished window.
	autoCommitInterval = 5 * time.Second
	// commitTimeout bounds one offset commit and the group leave at shutdown.
	commitTimeout = 10 * time.Second
)

// Worker is the synthesis worker. Build it with New, run it with Run, stop it
// with Close (or by ending Run's context).
type Worker struct {
	o      Options
	log    *slog.Logger
	m      *metrics
	limits *limiter
	gate   *modelGate
	kopts  []kgo.Opt

	life     *lifecycle.State
	mu       sync.Mutex
	cl       *kgo.Client
	parts    map[topicPartition]*partitionTracker
	inflight int
	sweeping map[string]bool

	freed     chan struct{} // a record left the in-flight set
	commitReq chan struct{} // a commit mark moved
	jobs      sync.WaitGroup
}

// New validates o and returns a worker; nothing connects until Run.
func New(o Options) (*Worker, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	kopts, err := kafka.NewClientOptions(o.Kafka)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	gopts, err := kafka.GroupConsumerOptions(kafka.GroupConsumer{Group: o.Group, Topics: []string{o.Topic}, AutoCommit: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", string(ids.StageSynthesis), "group", o.Group)
	gate := newModelGate(&o, log)
	m, err := newMetrics(o.Registry, gate.outageSeconds)
	if err != nil {
		return nil, err
	}
	gate.m = m
	w := &Worker{
		life:      lifecycle.New("synthesis worker", lifecycle.Once, ErrClosed),
		o:         o,
		log:       log,
		m:         m,
		gate:      gate,
		limits:    newLimiter(o.MaxConcurrentSynthesis),
		parts:     make(map[topicPartition]*partitionTracker),
		sweeping:  make(map[string]bool),
		freed:     make(chan struct{}, 1),
		commitReq: make(chan struct{}, 1),
	}
	w.kopts = append(append(kopts, gopts...),
		// Only records marked after their window reached a terminal state are committed.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(autoCommitInterval),
		// A poll and the dispatch of its records happen between rebalances, so a record
		// is never dispatched for a partition already revoked.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(w.onRevoked),
		kgo.OnPartitionsLost(w.onLost),
	)
	return w, nil
}

// Run consumes closed windows and synthesizes them until ctx ends or Close is called,
// then drains: windows in progress keep running for DrainTimeout (and are released
// for retry if still unfinished), finished ones are committed, and the worker leaves
// its group. It returns nil after a clean stop, or an error wrapping ErrFatal.
func (w *Worker) Run(ctx context.Context) error {
	stop, end, err := w.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	cl, err := kgo.NewClient(w.kopts...)
	if err != nil {
		return fmt.Errorf("%w: creating kafka client: %w", ErrFatal, err)
	}
	w.mu.Lock()
	w.cl = cl
	w.mu.Unlock()

	w.log.Info("synthesis worker started", "topic", w.o.Topic, "max_concurrent", w.o.MaxConcurrentSynthesis,
		"evidence_batch_limit", w.o.EvidenceBatchLimit, "max_tokens_per_chunk", w.o.MaxEstimatedTokensPerChunk)
	work, stopWork := drainContext(stop, w.o.DrainTimeout)
	defer stopWork()

	sweeper := make(chan struct{})
	go func() { defer close(sweeper); w.sweepLoop(stop, work) }()
	committer := make(chan struct{})
	commitStop := make(chan struct{})
	go func() { defer close(committer); w.commitLoop(commitStop) }()

	err = w.pollLoop(stop, work)
	cl.AllowRebalance()
	<-sweeper
	w.jobs.Wait()
	close(commitStop)
	<-committer
	w.commit()
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	if lerr := cl.LeaveGroupContext(lctx); lerr != nil {
		w.log.Warn("leaving the consumer group failed; its partitions move on after the session timeout", "error", lerr)
	}
	lcancel()
	cl.Close()
	w.log.Info("synthesis worker stopped")
	return err
}

// Close stops a running Run and waits for it to return. It is safe to call more than
// once and without Run.
func (w *Worker) Close() error {
	w.life.Close()
	return nil
}

// drainContext returns a context that ends grace after parent ends (or at stop).
func drainContext(parent context.Context, grace time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var timer *time.Timer
	var mu sync.Mutex
	stopAfter := context.AfterFunc(parent, func() {
		mu.Lock()
		timer = time.AfterFunc(grace, cancel)
		mu.Unlock()
	})
	return ctx, func() {
		stopAfter()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// pollLoop polls records while the in-flight bound allows and dispatches them.
func (w *Worker) pollLoop(stop, work context.Context) error {
	retry := w.backoff()
	for {
		room, err := w.waitRoom(stop)
		if err != nil {
			return nil
		}
		fetches := w.cl.PollRecords(stop, room)
		if stop.Err() != nil {
			return nil
		}
		if fetches.IsClientClosed() {
			return fmt.Errorf("%w: kafka client closed while running", ErrFatal)
		}
		failed := false
		fetches.EachError(func(topic string, partition int32, err error) {
			failed = true
			w.log.Warn("fetching closed windows failed", "topic", topic, "partition", partition,
				"retryable", kafka.IsRetryable(err), "error", err)
		})
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			w.dispatch(stop, work, r)
		})
		w.cl.AllowRebalance()
		if failed && n == 0 {
			if backoff.Sleep(stop, retry.next()) != nil {
				return nil
			}
			continue
		}
		retry.reset()
	}
}

// waitRoom blocks until fewer than MaxInFlightRecords records are in flight.
func (w *Worker) waitRoom(stop context.Context) (int, error) {
	for {
		w.mu.Lock()
		room := w.o.MaxInFlightRecords - w.inflight
		w.mu.Unlock()
		if room > 0 {
			return room, nil
		}
		select {
		case <-w.freed:
		case <-stop.Done():
			return 0, stop.Err()
		}
	}
}

func (w *Worker) signalFreed() {
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// dispatch queues r on its chat's lane, starting the lane if idle.
func (w *Worker) dispatch(stop, work context.Context, r *kgo.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tp := topicPartition{r.Topic, r.Partition}
	t := w.parts[tp]
	if t == nil {
		t = newPartitionTracker()
		w.parts[tp] = t
	}
	p := t.add(r)
	key := string(r.Key)
	ln := t.lanes[key]
	if ln == nil {
		ln = &lane{}
		t.lanes[key] = ln
	}
	ln.queue = append(ln.queue, p)
	w.inflight++
	if !ln.running {
		ln.running = true
		w.jobs.Add(1)
		go w.runLane(stop, work, t, key, ln)
	}
}

// runLane processes one chat's records in order, marking each finished one for commit
// once every earlier record of its partition is finished too.
func (w *Worker) runLane(stop, work context.Context, t *partitionTracker, key string, ln *lane) {
	defer w.jobs.Done()
	for {
		w.mu.Lock()
		if t.gone || stop.Err() != nil || len(ln.queue) == 0 {
			if n := len(ln.queue); n > 0 {
				w.inflight -= n
				w.m.records.WithLabelValues("dropped").Add(float64(n))
			}
			ln.queue, ln.running = nil, false
			if t.lanes[key] == ln {
				delete(t.lanes, key)
			}
			w.mu.Unlock()
			w.signalFreed()
			return
		}
		p := ln.queue[0]
		ln.queue = ln.queue[1:]
		w.mu.Unlock()

		finished := w.handle(stop, work, p.rec)

		w.mu.Lock()
		w.inflight--
		var mark *kgo.Record
		if finished {
			mark = t.finish(p)
		}
		gone := t.gone
		w.mu.Unlock()
		w.signalFreed()
		if mark != nil && !gone {
			w.cl.MarkCommitRecords(mark)
			select {
			case w.commitReq <- struct{}{}:
			default:
			}
		}
	}
}

// handle takes one record to a terminal state: the window it names is completed,
// ignored, failed or found so, or the record was dead-lettered. It returns false
// when the worker stopped first (the record is then not committed).
func (w *Worker) handle(stop, work context.Context, r *kgo.Record) bool {
	cw, err := w.decode(stop, r)
	if err != nil {
		if stop.Err() != nil {
			return false
		}
		return w.deadLetter(stop, r, err)
	}
	j := jobOf(&cw)
	if err := j.validate(); err != nil {
		return w.deadLetter(stop, r, err)
	}
	out, err := w.runWindow(work, stop, j)
	if err != nil {
		if errors.Is(err, ErrInvalidWindow) {
			return w.deadLetter(stop, r, err)
		}
		if errors.Is(err, errAbandoned) {
			w.log.Warn("window attempt abandoned", append(j.logAttrs(), "error", err)...)
		}
		return false
	}
	w.m.windows.WithLabelValues(out).Inc()
	w.m.records.WithLabelValues("processed").Inc()
	w.log.Debug("closed window done", append(j.logAttrs(), "outcome", out, "partition", r.Partition, "offset", r.Offset)...)
	return true
}

// decode decodes a closed-window record, retrying schema-registry failures until stop.
func (w *Worker) decode(stop context.Context, r *kgo.Record) (schemas.ClosedWindow, error) {
	retry := w.backoff()
	for {
		cw, err := w.o.Codecs.ClosedWindow.Decode(stop, r.Value)
		switch {
		case err == nil:
			if cw.Key() != string(r.Key) {
				return cw, fmt.Errorf("%w: %w (value names workspace %s, chat %s)", schemas.ErrInvalidRecord,
					ErrKeyMismatch, cw.WorkspaceID, cw.ChatID)
			}
			return cw, nil
		case schemas.IsRetryable(err):
			w.log.Warn("decoding a closed window needs the schema registry, which failed; retrying",
				"partition", r.Partition, "offset", r.Offset, "error", err)
			if serr := backoff.Sleep(stop, retry.next()); serr != nil {
				return cw, serr
			}
		default:
			return cw, err
		}
	}
}

// deadLetter parks a record that cannot be decoded in the dead-letter topic, retrying
// until the broker acknowledged it; true once it did.
func (w *Worker) deadLetter(stop context.Context, r *kgo.Record, cause error) bool {
	retry := w.backoff()
	dl := schemas.NewDeadLetter(ids.StageSynthesis, cause, r.Topic, r.Partition, r.Offset, r.Key, r.Value, w.o.Clock().UTC())
	for {
		b, err := w.o.Codecs.DeadLetter.Encode(stop, dl)
		if err == nil {
			err = w.cl.ProduceSync(stop, &kgo.Record{Topic: w.o.DeadLetterTopic, Key: r.Key, Value: b}).FirstErr()
		}
		if err == nil {
			w.m.windows.WithLabelValues(outcomeDeadLettered).Inc()
			w.m.records.WithLabelValues("dead_lettered").Inc()
			w.log.Warn("closed-window record parked in the dead-letter topic", "partition", r.Partition,
				"offset", r.Offset, "reason", dl.Reason, "error", cause)
			return true
		}
		if stop.Err() != nil {
			return false
		}
		w.log.Error("writing a dead letter failed; retrying", "partition", r.Partition, "offset", r.Offset,
			"retryable", kafka.IsRetryable(err) || schemas.IsRetryable(err), "error", err)
		if backoff.Sleep(stop, retry.next()) != nil {
			return false
		}
	}
}

// commitLoop commits marked offsets whenever a mark moved, until stopped.
func (w *Worker) commitLoop(stop <-chan struct{}) {
	for {
		select {
		case <-w.commitReq:
			w.commit()
		case <-stop:
			return
		}
	}
}

func (w *Worker) commit() {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if err := w.cl.CommitMarkedOffsets(ctx); err != nil {
		w.m.commits.WithLabelValues("error").Inc()
		w.log.Warn("committing finished windows failed; franz-go retries with the next commit", "error", err)
		return
	}
	w.m.commits.WithLabelValues("ok").Inc()
}

// onRevoked forgets revoked partitions (queued records are dropped; one in progress
// finishes but is not marked) and commits what was marked before they go.
func (w *Worker) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	w.forget(revoked, "revoked")
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if err := cl.CommitMarkedOffsets(cctx); err != nil {
		w.m.commits.WithLabelValues("error").Inc()
		w.log.Warn("committing finished windows of revoked partitions failed; the next owner repeats them (harmless)", "error", err)
		return
	}
	w.m.commits.WithLabelValues("ok").Inc()
}

// onLost forgets lost partitions; nothing can be committed for them any more.
func (w *Worker) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	w.forget(lost, "lost")
}

func (w *Worker) forget(parts map[string][]int32, how string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			tp := topicPartition{topic, p}
			if t := w.parts[tp]; t != nil {
				t.gone = true
				delete(w.parts, tp)
			}
		}
	}
	w.log.Info("partitions "+how, "partitions", fmt.Sprint(parts))
}

// sweepLoop reclaims stale processing windows every ScanInterval (design §11: the
// periodic watcher is the durable path; a window whose worker died is retried even
// when no record names it again).
func (w *Worker) sweepLoop(stop, work context.Context) {
	t := time.NewTicker(w.o.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
		w.sweep(stop, work)
	}
}

func (w *Worker) sweep(stop, work context.Context) {
	rows, err := w.o.Store.StaleProcessing(stop, w.o.StaleTimeout, w.o.SweepLimit)
	if err != nil {
		if stop.Err() == nil {
			w.log.Warn("listing stale processing windows failed", "error", err)
		}
		return
	}
	w.m.staleFound.Set(float64(len(rows)))
	for _, st := range rows {
		if st.Meta.WindowEnd.IsZero() || !st.Meta.WindowEnd.After(st.Key.Start) {
			w.log.Warn("stale window has no usable window end in its state; skipping", "window_key", st.Key.SourceKey())
			continue
		}
		id := string(st.Key.Workspace) + "|" + st.Key.SourceKey()
		w.mu.Lock()
		if w.sweeping[id] || stop.Err() != nil {
			w.mu.Unlock()
			continue
		}
		w.sweeping[id] = true
		w.jobs.Add(1)
		w.mu.Unlock()
		j := &job{key: st.Key, end: st.Meta.WindowEnd.UTC(), sweep: true}
		go func() {
			defer w.jobs.Done()
			defer func() {
				w.mu.Lock()
				delete(w.sweeping, id)
				w.mu.Unlock()
			}()
			w.log.Info("reclaiming a stale processing window", j.logAttrs()...)
			out, err := w.runWindow(work, stop, j)
			switch {
			case err == nil:
				w.m.windows.WithLabelValues(out).Inc()
			case errors.Is(err, ErrInvalidWindow):
				w.log.Error("a stale window cannot be claimed", append(j.logAttrs(), "error", err)...)
			}
		}()
	}
}
