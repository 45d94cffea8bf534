package synthesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// storeRetries bounds the retries of one store call inside an attempt; the attempt
// fails after them (and is retried as a whole).
const storeRetries = 4

// releaseTimeout bounds the write that releases a window whose attempt was
// interrupted by shutdown.
const releaseTimeout = 5 * time.Second

// job is one window to bring to a terminal state.
type job struct {
	key store.WindowKey
	end time.Time
	// closedAt comes from the closed-window record (zero for a sweep).
	closedAt time.Time
	// sweep marks a job of the stale sweep: it does not wait for evidence and leaves a
	// window another worker is on alone.
	sweep bool
	// A record's evidence is the offsets below endOffset on the evidence partition;
	// the job waits for the sink's commit of them (waitSink).
	partition int32
	endOffset int64
	// drafted: this attempt created an entry (the first one was observed in
	// larkline_synthesis_window_end_to_first_draft_seconds).
	drafted bool
	// syn is the synthesis of the job's processor version, resolved before each claim
	// (resolveSynthesis); nil before the first.
	syn *jobSynthesis
}

func jobOf(cw *schemas.ClosedWindow) *job {
	j := &job{
		key: store.WindowKey{Workspace: cw.WorkspaceID, Chat: cw.ChatID, ProcessorVersion: cw.ProcessorVersion,
			Start: cw.WindowStart.UTC()},
		end:       cw.WindowEnd.UTC(),
		closedAt:  cw.ClosedAt,
		partition: cw.EvidencePartition, endOffset: cw.EvidenceEndOffset,
	}
	return j
}

// validate checks what the closed-window schema cannot: the window is aligned to its
// own length, as every window state must be.
func (j *job) validate() error {
	length := j.end.Sub(j.key.Start)
	if length <= 0 || !ids.WindowStart(j.key.Start, length).Equal(j.key.Start) {
		return fmt.Errorf("%w: %w: window [%s, %s) is not aligned to its length", schemas.ErrInvalidRecord, ErrInvalidWindow,
			j.key.Start.Format(time.RFC3339Nano), j.end.Format(time.RFC3339Nano))
	}
	return nil
}

// belowOffset limits a job's reads to the messages its record names: those first
// carried below its end offset (store.RangeQuery.BelowOffset); 0 (no limit) for a sweep.
func (j *job) belowOffset() int64 {
	if j.sweep {
		return 0
	}
	return j.endOffset
}

func (j *job) processorVersion() string {
	if j.key.ProcessorVersion == "" {
		return ids.DefaultProcessorVersion
	}
	return j.key.ProcessorVersion
}

func (j *job) claimOptions(o *Options) store.ClaimOptions {
	return store.ClaimOptions{WindowLength: j.end.Sub(j.key.Start), MaxAttempts: o.MaxAttempts,
		StaleAfter: o.StaleTimeout, PromptVersion: j.promptVersion(o), BelowOffset: j.belowOffset()}
}

func (j *job) logAttrs() []any {
	attrs := []any{"workspace_id", string(j.key.Workspace), "chat_id", string(j.key.Chat),
		"window_key", j.key.SourceKey(), "processor_version", j.processorVersion()}
	if j.sweep {
		attrs = append(attrs, "sweep", true)
	}
	return attrs
}

// attemptError is a whole-window attempt that failed for reason (a bounded label);
// its text (ids, counts, kinds, never message text) becomes the window's diagnostics.
type attemptError struct {
	reason string
	err    error
}

func (e *attemptError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

func failAttempt(reason string, err error) error { return &attemptError{reason: reason, err: err} }

// errAbandoned is returned when the test hook abandons a claimed window like a crash.
var errAbandoned = errors.New("window attempt abandoned")

// step says what runWindow does after one claim.
type step int

const (
	stepFinished step = iota // a terminal outcome was reached
	stepRetry                // back off, then claim again
	stepEmpty                // the table holds no evidence of the window
	stepOutage               // the model is down: the attempt was refunded; wait for the gate
)

// runWindow brings one window to a terminal state for this job: completed, ignored,
// failed, needs_attention (its evidence never reached the table within the bound: no
// attempt is spent on waiting for it), or found so (skipped_done, skipped_exhausted);
// for a sweep also busy. Claims and attempts run under ctx; waits (for evidence, for the workspace, for
// another worker, between attempts) also end when stop does, and no new claim starts
// after stop. It returns an error only when it ended early that way (or the test hook
// abandoned the attempt): the window is then not finished as far as this job is
// concerned.
func (w *Worker) runWindow(ctx, stop context.Context, j *job) (string, error) {
	wait, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(stop, cancel)()

	r := &windowRun{w: w, j: j, log: w.log.With(j.logAttrs()...), retry: w.backoff(), verified: !j.namesEvidence()}
	for {
		if err := wait.Err(); err != nil {
			return "", err
		}
		if !r.verified {
			if out, done, err := r.verify(wait); err != nil || done {
				return out, err
			}
		}
		out, next, err := r.claim(ctx, wait)
		if err != nil {
			return "", err
		}
		switch next {
		case stepFinished:
			return out, nil
		case stepOutage:
			continue // straight back to the gate, which paces the retry
		case stepEmpty:
			if out, done, err := r.emptyClaim(wait); err != nil || done {
				return out, err
			}
		}
		if err := backoff.Sleep(wait, r.retry.next()); err != nil {
			return "", err
		}
	}
}

// namesEvidence reports whether the job's record names evidence to wait for; a sweep's
// takeover names none.
func (j *job) namesEvidence() bool { return !j.sweep }

// windowRun is the state of runWindow between claims.
type windowRun struct {
	w     *Worker
	j     *job
	log   *slog.Logger
	retry *retryDelay
	// verified: the window's evidence is known to be in the table (a sweep names no
	// evidence to wait for).
	verified bool
	empty    int // claims in a row that found no evidence in the table
}

// verify checks whether a duplicate record names a window already terminal (done),
// then waits for the sink's commit of the window's evidence.
func (r *windowRun) verify(ctx context.Context) (string, bool, error) {
	if out, done, err := r.w.alreadyTerminal(ctx, r.j, r.retry, r.log); err != nil || done {
		return out, done, err
	}
	if err := r.w.waitSink(ctx, r.j, r.log); err != nil {
		return "", false, err
	}
	r.verified = true
	return "", false, nil
}

// claim passes the model gate and takes a workspace slot, waiting under wait, then
// claims the window once under ctx (claimOnce), holding both.
func (r *windowRun) claim(ctx, wait context.Context) (string, step, error) {
	w := r.w
	// A window that needs the model waits for the model gate first, holding
	// nothing: no claim (its lease cannot go stale), no slot, no workspace lock.
	tk, err := w.gate.pass(wait)
	if err != nil {
		return "", 0, err
	}
	release, err := w.limits.acquire(wait, r.j.key.Workspace)
	if err != nil {
		w.gate.done(tk)
		return "", 0, err
	}
	if err := wait.Err(); err != nil {
		release()
		w.gate.done(tk)
		return "", 0, err
	}
	w.m.inFlight.Set(float64(w.limits.inUse()))
	out, next, err := w.claimOnce(ctx, r.j, tk, r.log)
	release()
	w.gate.done(tk)
	w.m.inFlight.Set(float64(w.limits.inUse()))
	return out, next, err
}

// emptyClaim follows a claim that found no evidence of the window in the table: after
// MaxAttempts of them in a row the window ends needing attention; the evidence is
// verified again before the next claim.
func (r *windowRun) emptyClaim(ctx context.Context) (string, bool, error) {
	j := r.j
	if r.empty++; r.empty >= r.w.o.MaxAttempts {
		diag := fmt.Sprintf("the table holds no evidence of the window after %d claims", r.empty)
		if !j.sweep {
			diag = fmt.Sprintf("the evidence sink stored partition %d up to offset %d, but the table holds no evidence of the window after %d claims",
				j.partition, j.endOffset, r.empty)
		}
		if out, done, err := r.w.needsAttention(ctx, j, diag, r.log); err != nil || done {
			return out, done, err
		}
		r.empty = 0
	}
	r.verified = !j.namesEvidence()
	return "", false, nil
}

// alreadyTerminal checks, before any wait, whether a duplicate record names a window
// that is already terminal.
func (w *Worker) alreadyTerminal(ctx context.Context, j *job, retry *retryDelay, log *slog.Logger) (string, bool, error) {
	for {
		st, err := w.o.Store.GetWindow(ctx, j.key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "", false, nil
		case err == nil:
			switch {
			case st.Status.Terminal():
				w.m.claims.WithLabelValues(store.ClaimDone.String()).Inc()
				return outcomeSkippedDone, true, nil
			case st.Status == store.WindowFailed && st.Attempts >= w.o.MaxAttempts:
				w.m.claims.WithLabelValues(store.ClaimExhausted.String()).Inc()
				return outcomeSkippedExhausted, true, nil
			}
			return "", false, nil
		}
		if err := w.storeTrouble(ctx, "get_window", err, retry, log); err != nil {
			return "", false, err
		}
	}
}

// storeTrouble logs a store failure outside an attempt and waits before the caller
// tries again; it returns an error only when ctx ended.
func (w *Worker) storeTrouble(ctx context.Context, op string, err error, retry *retryDelay, log *slog.Logger) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	w.m.storeRetries.WithLabelValues(op).Inc()
	log.Warn("store call failed; retrying", "operation", op, "retryable", store.IsRetryable(err), "error", err)
	return backoff.Sleep(ctx, retry.next())
}

// claimOnce claims the window and, when it gets it, runs one whole-window attempt.
// The caller holds the workspace lock and a global slot.
func (w *Worker) claimOnce(ctx context.Context, j *job, tk *gateTicket, log *slog.Logger) (string, step, error) {
	serr := w.resolveSynthesis(ctx, j)
	st, oc, err := w.o.Store.ClaimWindow(ctx, j.key, j.claimOptions(&w.o))
	if err != nil {
		return w.claimFailed(ctx, err, log)
	}
	if out, next, ok := w.claimOutcome(j, st, oc, log); !ok {
		return out, next, nil
	}
	if serr != nil {
		return w.attemptFailed(ctx, st, serr, log)
	}
	log = log.With("attempt", st.Attempts)
	log.Info("window claimed", "claim", oc.String())
	if hook := w.o.afterClaim; hook != nil {
		if err := hook(ctx, st); err != nil {
			return "", 0, fmt.Errorf("%w: %w", errAbandoned, err)
		}
	}
	res, aerr := w.attemptClaimed(ctx, st, j, tk, log)
	if aerr != nil {
		return w.attemptFailed(ctx, st, aerr, log)
	}
	log.Info("window finished", "status", res.outcome, "chunks", res.state.Meta.ChunkCount,
		"evidence", res.state.Meta.EvidenceCount, "drafts", res.drafts, "aggregate_hash", res.state.AggregateHash)
	w.summarize(ctx, j, res, log)
	return res.outcome, stepFinished, nil
}

// claimFailed follows a claim that failed with err: an empty window waits for its
// evidence, an invalid one ends the job, any other failure is retried.
func (w *Worker) claimFailed(ctx context.Context, err error, log *slog.Logger) (string, step, error) {
	if errors.Is(err, store.ErrEmptyWindow) {
		log.Warn("window holds no evidence in the table; waiting for it")
		return "", stepEmpty, nil
	}
	switch {
	case ctx.Err() != nil:
		return "", 0, ctx.Err()
	case errors.Is(err, store.ErrInvalid):
		return "", 0, fmt.Errorf("%w: %w", ErrInvalidWindow, err)
	}
	w.m.storeRetries.WithLabelValues("claim_window").Inc()
	level := slog.LevelWarn
	if !store.IsRetryable(err) {
		level = slog.LevelError
	}
	log.Log(ctx, level, "claiming the window failed; retrying", "retryable", store.IsRetryable(err), "error", err)
	return "", stepRetry, nil
}

// claimOutcome counts the claim's outcome. proceed is false when the claim did not get
// the window; out and next then say what follows.
func (w *Worker) claimOutcome(j *job, st store.WindowState, oc store.ClaimOutcome, log *slog.Logger) (out string, next step, proceed bool) {
	w.m.claims.WithLabelValues(oc.String()).Inc()
	switch oc {
	case store.ClaimDone:
		return outcomeSkippedDone, stepFinished, false
	case store.ClaimExhausted:
		log.Info("window attempts are exhausted", "attempts", st.Attempts, "diagnostics", st.Meta.Error)
		return outcomeSkippedExhausted, stepFinished, false
	case store.ClaimBusy:
		if j.sweep {
			return outcomeBusy, stepFinished, false
		}
		log.Debug("another worker is processing the window; waiting", "attempt", st.Attempts)
		return "", stepRetry, false
	case store.ClaimRetried, store.ClaimTakenOver:
		w.m.windowRetries.Inc()
	}
	return "", 0, true
}

// attemptClaimed runs the attempt on the claimed window st and observes its duration.
// An attempt that failed because its heartbeat found the lease gone fails with the
// heartbeat's cause, errLeaseLost.
func (w *Worker) attemptClaimed(ctx context.Context, st store.WindowState, j *job, tk *gateTicket, log *slog.Logger) (attemptResult, error) {
	started := w.o.Clock()
	// The attempt runs under a heartbeat that keeps the claim fresh; a lost lease
	// (another worker took the window over) cancels it.
	actx, lost := context.WithCancelCause(ctx)
	stopBeat := w.heartbeat(actx, lost, st.Lease(), log)
	res, aerr := w.attempt(actx, st, j, tk, log)
	stopBeat()
	lost(nil)
	w.m.windowDuration.Observe(w.o.Clock().Sub(started).Seconds())
	if cause := context.Cause(actx); aerr != nil && ctx.Err() == nil && errors.Is(cause, errLeaseLost) {
		aerr = cause
	}
	return res, aerr
}

// attemptFailed follows an attempt on st that failed with aerr: a lost lease re-checks
// the window, shutdown releases it, a model outage refunds the attempt, and any other
// failure is recorded (the window failed once its attempts are exhausted).
func (w *Worker) attemptFailed(ctx context.Context, st store.WindowState, aerr error, log *slog.Logger) (string, step, error) {
	if errors.Is(aerr, store.ErrConflict) || errors.Is(aerr, errLeaseLost) {
		log.Warn("window lease lost (taken over by another worker); re-checking the window", "error", aerr)
		return "", stepRetry, nil
	}
	if ctx.Err() != nil {
		w.release(ctx, st, log)
		return "", 0, ctx.Err()
	}
	reason := reasonStore
	if ae, ok := errors.AsType[*attemptError](aerr); ok {
		reason = ae.reason
	}
	w.m.attemptFailures.WithLabelValues(reason).Inc()
	if errors.Is(aerr, errModelOutage) {
		return w.modelOutage(ctx, st, aerr, reason, log)
	}
	if err := w.finishFailed(ctx, st.Lease(), aerr); err != nil {
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		// The window stays processing; a later claim takes it over once stale.
		log.Warn("recording the failed attempt failed", "error", err)
		return "", stepRetry, nil
	}
	if st.Attempts >= w.o.MaxAttempts {
		log.Error("window failed; attempts exhausted", "reason", reason, "error", aerr)
		return outcomeFailed, stepFinished, nil
	}
	log.Warn("window attempt failed; the window will be retried", "reason", reason, "error", aerr)
	return "", stepRetry, nil
}

// modelOutage follows an attempt failed by a model outage (aerr, for reason).
func (w *Worker) modelOutage(ctx context.Context, st store.WindowState, aerr error, reason string, log *slog.Logger) (string, step, error) {
	// Not the window's failure: give the attempt back and wait for the model.
	if err := w.refundFailed(ctx, st.Lease(), aerr); err != nil {
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		log.Warn("recording the attempt failed by the model outage failed", "error", err)
		return "", stepRetry, nil
	}
	w.m.refunds.Inc()
	log.Warn("model unavailable; window attempt released without counting it, waiting for the model",
		"reason", reason, "error", aerr)
	return "", stepOutage, nil
}

// finishFailed records a failed attempt with bounded diagnostics.
func (w *Worker) finishFailed(ctx context.Context, lease store.WindowLease, cause error) error {
	return w.withStore(ctx, "finish_window", func() error {
		_, err := w.o.Store.FinishWindow(ctx, lease, store.WindowFailed, func(s *store.WindowState) {
			s.Meta.Error = cause.Error()
		})
		return err
	})
}

// refundFailed records an attempt failed by a model outage with bounded diagnostics,
// giving the attempt back in the same compare-and-set (store.RefundWindowAttempt).
func (w *Worker) refundFailed(ctx context.Context, lease store.WindowLease, cause error) error {
	return w.withStore(ctx, "refund_window_attempt", func() error {
		_, err := w.o.Store.RefundWindowAttempt(ctx, lease, func(s *store.WindowState) {
			s.Meta.Error = cause.Error()
		})
		return err
	})
}

// release ends an attempt interrupted by shutdown, so the window's next owner retries
// it at once instead of waiting for it to go stale. Shutdown is not the window's
// failure: the attempt is refunded (store.RefundWindowAttempt), and the next owner
// resumes at the window's next undone chunk.
func (w *Worker) release(ctx context.Context, st store.WindowState, log *slog.Logger) {
	w.m.attemptFailures.WithLabelValues(reasonInterrupted).Inc()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, err := w.o.Store.RefundWindowAttempt(rctx, st.Lease(), func(s *store.WindowState) {
		s.Meta.Error = "attempt interrupted: the worker shut down"
	})
	if err != nil {
		log.Warn("releasing the interrupted window failed; it is taken over once stale", "error", err)
		return
	}
	w.m.refunds.Inc()
	log.Info("interrupted window released for retry; its attempt was refunded")
}

// errLeaseLost is the cause an attempt is cancelled with when its heartbeat finds the
// claim gone (taken over, or finished by someone else).
var errLeaseLost = errors.New("window lease lost")

// heartbeat refreshes the claim of lease every StaleTimeout/3 until the returned stop
// is called or ctx ends, so that a live worker on a long window is never taken over;
// it cancels the attempt (lost) when the store says the lease is gone. A failed beat
// is retried at the next one: the claim goes stale only after StaleTimeout.
func (w *Worker) heartbeat(ctx context.Context, lost context.CancelCauseFunc, lease store.WindowLease, log *slog.Logger) (stop func()) {
	every := max(w.o.StaleTimeout/3, time.Millisecond)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := w.o.Store.HeartbeatWindow(ctx, lease)
			switch {
			case err == nil:
				w.m.heartbeats.WithLabelValues("ok").Inc()
			case ctx.Err() != nil:
				return
			case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
				w.m.heartbeats.WithLabelValues("lost").Inc()
				lost(fmt.Errorf("%w: %w", errLeaseLost, err))
				return
			default:
				w.m.heartbeats.WithLabelValues("error").Inc()
				log.Warn("refreshing the window's claim failed; trying again at the next beat",
					"retryable", store.IsRetryable(err), "error", err)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// needsAttention ends a window whose evidence did not reach the table within the
// bound in the terminal needs_attention state (store.MarkWindowNeedsAttention), with
// diag (ids and counts only) as its diagnostics. done is false when the window turned
// out to be held by another worker (its evidence arrived after all): the caller goes on.
func (w *Worker) needsAttention(ctx context.Context, j *job, diag string, log *slog.Logger) (string, bool, error) {
	retry := w.backoff()
	for {
		_, changed, err := w.o.Store.MarkWindowNeedsAttention(ctx, j.key, j.claimOptions(&w.o), diag)
		switch {
		case err == nil && changed:
			log.Error("window needs attention: its evidence did not reach the table; no attempt was spent",
				"diagnostics", diag)
			return outcomeNeedsAttention, true, nil
		case err == nil: // terminal already: another worker finished it
			return outcomeSkippedDone, true, nil
		case errors.Is(err, store.ErrConflict):
			log.Info("another worker holds the window whose evidence this worker did not find; waiting for it")
			return "", false, nil
		case errors.Is(err, store.ErrInvalid):
			return "", false, fmt.Errorf("%w: %w", ErrInvalidWindow, err)
		}
		if err := w.storeTrouble(ctx, "mark_window_needs_attention", err, retry, log); err != nil {
			return "", false, err
		}
	}
}

// withStore runs op, retrying store.IsRetryable failures with backoff up to
// storeRetries times; the last error is returned.
func (w *Worker) withStore(ctx context.Context, op string, f func() error) error {
	retry := w.backoff()
	for try := 0; ; try++ {
		err := f()
		if err == nil || !store.IsRetryable(err) || try >= storeRetries || ctx.Err() != nil {
			return err
		}
		w.m.storeRetries.WithLabelValues(op).Inc()
		if backoff.Sleep(ctx, retry.next()) != nil {
			return err
		}
	}
}

func (w *Worker) backoff() *retryDelay {
	return &retryDelay{min: w.o.RetryBackoffMin, max: w.o.RetryBackoffMax}
}
