package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// Reconciler collects Lark message history into the evidence topic: the
// periodic scheduler (Run), one pass on demand (RunOnce) and the manual refresh
// of one workspace (Refresh). It is safe for concurrent use.
type Reconciler struct {
	opts    Options
	writer  *evidence.Writer
	log     *slog.Logger
	m       *metrics
	threads *threadRegistry
	slots   *slots // MaxConcurrentChats chat-run slots, shared by every entry point (schedule.go)
	locks   *keyLocks

	// life ends Run, RunOnce and Refresh calls at Close and waits for them.
	life *lifecycle.State

	mu      sync.Mutex
	pending map[string]bool // chat keys whose last checkpoint was not published
	// evidenceEnd: per chat key, one past the highest evidence offset this process
	// produced for the chat (one int64 per chat reconciled since start).
	evidenceEnd map[string]int64
	// complete: per chat key, when the newest coverage run that read the chat to its
	// end started (one time per chat covered since start; schedule.go's fresh).
	complete map[string]time.Time
	// continued: chats whose automatic run used its page budget short of its range's
	// end, to be continued at once by Run (schedule.go); one entry per chat.
	continued   []job
	continuing  map[string]bool
	following   bool          // Run follows the window clock (continuations are taken)
	continueNew chan struct{} // a continuation was queued
	// lastPass is the report of the last finished pass (zero before the first).
	lastPass PassReport
}

// New validates opts once and returns a Reconciler.
func New(opts Options) (*Reconciler, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	w, err := evidence.New(evidence.Options{Producer: o.Producer, Codec: o.EvidenceCodec, Topic: o.EvidenceTopic, Names: o.Names})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{
		life: lifecycle.New("reconciler", lifecycle.OneAtATime, ErrClosed),
		opts: o, writer: w, log: log.With("component", string(ids.StageReconcile)), m: m,
		threads:     newThreadRegistry(o.MaxThreadsPerChat),
		slots:       newSlots(o.MaxConcurrentChats),
		locks:       newKeyLocks(),
		pending:     map[string]bool{},
		evidenceEnd: map[string]int64{},
		complete:    map[string]time.Time{},
		continuing:  map[string]bool{},
		continueNew: make(chan struct{}, 1),
	}, nil
}

// Run reconciles every eligible chat at once and then every ReconcileInterval
// until ctx is done or Close is called. It then drains: chat runs finish the page
// batch they are on (at most DrainTimeout, after which they are cancelled and keep
// their last committed checkpoint), and Run returns nil. Pass failures are logged
// and counted, never returned.
func (r *Reconciler) Run(ctx context.Context) error {
	// stop ends chat runs between pages once ctx is done or Close is called.
	// jobCtx cancels them outright, DrainTimeout later.
	stopCtx, end, err := r.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	stop := stopSignal{c: stopCtx.Done(), run: ctx.Done()}
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stop.c:
		case <-done:
			return
		}
		t := time.NewTimer(r.opts.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelJobs()
		case <-done:
		}
	}()

	r.log.Info("reconciliation started", "interval", r.opts.ReconcileInterval, "overlap", r.opts.ReconcileOverlap,
		"refresh_interval", r.opts.EvidenceRefreshInterval, "max_concurrent_chats", r.opts.MaxConcurrentChats,
		"window", r.opts.Window, "coverage_delay", r.opts.CoverageDelay)
	if r.opts.Window > 0 {
		r.setFollowing(true)
		defer r.setFollowing(false)
		var followed sync.WaitGroup
		followed.Add(2)
		go func() { defer followed.Done(); r.followWindows(jobCtx, stop) }()
		go func() { defer followed.Done(); r.continueRuns(jobCtx, stop) }()
		defer followed.Wait()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-stop.c:
			r.log.Info("reconciliation stopped")
			return nil
		case <-timer.C:
		}
		if _, err := r.pass(jobCtx, stop); err != nil {
			r.log.Warn("reconciliation pass failed", "err", err)
		}
		timer.Reset(r.opts.ReconcileInterval)
	}
}

// RunOnce runs one pass over every eligible chat and returns when it is done.
// Cancelling ctx cancels the chat runs at once (each keeps its last committed
// checkpoint). The error is about the pass as a whole (listing the bindings);
// chat failures are in the report.
func (r *Reconciler) RunOnce(ctx context.Context) (PassReport, error) {
	ctx, leave, err := r.life.Enter(ctx)
	if err != nil {
		return PassReport{}, err
	}
	defer leave()
	return r.pass(ctx, stopSignal{})
}

// pass reconciles every binding of a firing workspace created within the lookback,
// at most MaxConcurrentChats at a time. A job that waits for a slot re-checks
// eligibility when it starts and before every page.
func (r *Reconciler) pass(ctx context.Context, stop stopSignal) (PassReport, error) {
	rep := PassReport{Started: r.opts.Clock()}
	bs, err := r.opts.Store.ListBindings(ctx, store.BindingFilter{
		Statuses:     []store.WorkspaceStatus{store.WorkspaceFiring},
		CreatedSince: rep.Started.Add(-r.opts.IngestionLookback),
	})
	if err != nil {
		r.m.failures.WithLabelValues(reasonStore).Inc()
		return rep, fmt.Errorf("list the bindings to reconcile: %w", err)
	}
	keep := make(map[ids.ChatID]bool, len(bs))
	for _, b := range bs {
		keep[b.Chat] = true
	}
	r.threads.retain(keep)

	rep.Chats = make([]ChatReport, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		if err := r.slots.acquire(ctx, stop, classScheduled); err != nil {
			for k := i; k < len(bs); k++ {
				rep.Chats[k] = ChatReport{Workspace: bs[k].Workspace.ID, Chat: bs[k].Chat, Kind: KindIncremental, Stopped: ErrShuttingDown}
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.slots.release()
			rep.Chats[i] = r.runChat(ctx, job{ws: b.Workspace, chat: b.Chat, stop: stop, scheduled: true})
		}()
	}
	wg.Wait()
	rep.Finished = r.opts.Clock()
	rep.Lag = lag(rep.Finished, rep.Chats)
	r.m.lag.Set(rep.Lag.Seconds())
	r.m.passes.Inc()
	r.m.lastPass.Set(float64(rep.Started.UnixMilli()) / 1000)
	r.mu.Lock()
	r.lastPass = rep
	r.mu.Unlock()
	r.log.Info("reconciliation pass done", "chats", len(rep.Chats), "failed", rep.Failed(), "lag", rep.Lag,
		"duration", rep.Finished.Sub(rep.Started))
	return rep, nil
}

// LastPass returns the report of the last pass that finished (Run's or RunOnce's),
// and false before the first. A pass that started at T read every eligible chat's
// history up to T minus the settle delay, unless its report says otherwise.
func (r *Reconciler) LastPass() (PassReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastPass, !r.lastPass.Finished.IsZero()
}

// lag is the time between now and the oldest coverage among the chats that are
// still eligible: a chat without a checkpoint counts from its bound.
func lag(now time.Time, chats []ChatReport) time.Duration {
	var worst time.Duration
	for i := range chats {
		c := &chats[i]
		if c.Skipped || errors.Is(c.Stopped, ErrIneligible) || errors.Is(c.Stopped, ErrNotGroupChat) {
			continue
		}
		at := c.CoveredUntil
		if at.IsZero() {
			at = c.Bound
		}
		if at.IsZero() {
			continue
		}
		worst = max(worst, now.Sub(at))
	}
	return worst
}

// eligible reports whether ws may still be reconciled automatically for chat: the
// event path's rule (bound, firing, young enough, type enabled) at the current time.
func (r *Reconciler) eligible(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error) {
	res, err := r.opts.Eligibility.Resolve(ctx, chat, r.opts.Clock())
	if err != nil {
		return false, err
	}
	for _, t := range res.Targets {
		if t.Workspace == ws {
			return true, nil
		}
	}
	return false, nil
}

// Refresh reconciles every chat bound to ws over its whole bounded range
// (max(created_at, now − lookback, now − retention) to now), even when the
// workspace is no longer eligible for automatic scans (design §6: "Refresh from
// sources"). Evidence it produces has IngestPath manual; checkpoints advance as in
// automatic runs. It waits for an automatic run of the same chat to finish first.
// A workspace whose type ingestion is not enabled for gives ErrNotEnabled; an
// unknown one ErrUnknownWorkspace. Chat failures are joined into the error and
// detailed in the report.
func (r *Reconciler) Refresh(ctx context.Context, ws ids.WorkspaceID) (RefreshReport, error) {
	rep := RefreshReport{Workspace: ws}
	if _, err := ids.ParseWorkspaceID(string(ws)); err != nil {
		return rep, fmt.Errorf("refresh: %w", err)
	}
	ctx, leave, err := r.life.Enter(ctx)
	if err != nil {
		return rep, err
	}
	defer leave()

	w, err := r.opts.Store.GetWorkspace(ctx, ws)
	if errors.Is(err, store.ErrNotFound) {
		return rep, fmt.Errorf("refresh workspace %s: %w", ws, ErrUnknownWorkspace)
	}
	if err != nil {
		return rep, fmt.Errorf("refresh workspace %s: %w", ws, err)
	}
	chats, err := r.opts.Store.ChatsOfWorkspace(ctx, ws)
	if err != nil {
		return rep, fmt.Errorf("refresh workspace %s: %w", ws, err)
	}
	if len(chats) == 0 {
		return rep, nil
	}
	res, err := r.opts.Eligibility.Resolve(ctx, chats[0], r.opts.Clock())
	if err != nil {
		return rep, fmt.Errorf("refresh workspace %s: check its type: %w", ws, err)
	}
	for _, ex := range res.Excluded {
		if ex.Workspace == ws && ex.Reason == bindings.ReasonTypeDisabled {
			return rep, fmt.Errorf("refresh workspace %s of type %q: %w", ws, w.Type, ErrNotEnabled)
		}
	}
	r.log.Info("manual refresh started", "workspace_id", ws, "chats", len(chats), "status", w.Status)

	rep.Chats = make([]ChatReport, len(chats))
	var wg sync.WaitGroup
	for i, chat := range chats {
		if err := r.slots.acquire(ctx, stopSignal{}, classScheduled); err != nil {
			for k := i; k < len(chats); k++ {
				rep.Chats[k] = ChatReport{Workspace: ws, Chat: chats[k], Kind: KindManual, Err: fail(reasonCanceled, err)}
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.slots.release()
			rep.Chats[i] = r.runChat(ctx, job{ws: w, chat: chat, manual: true})
		}()
	}
	wg.Wait()
	var errs []error
	for i := range rep.Chats {
		c := &rep.Chats[i]
		switch {
		case c.Err != nil:
			errs = append(errs, fmt.Errorf("chat %s: %w", c.Chat, c.Err))
		case c.Stopped != nil:
			errs = append(errs, fmt.Errorf("chat %s: %w", c.Chat, c.Stopped))
		}
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("refresh workspace %s: %w", ws, errors.Join(errs...))
	}
	return rep, nil
}

// Close stops Run (which drains), cancels RunOnce and Refresh calls, and waits for
// all of them to return. Later calls answer ErrClosed. It is safe to call more
// than once.
func (r *Reconciler) Close() error {
	r.life.Close()
	return nil
}

// list sends one history request through the app's rate limiter, retrying
// retryable answers (IsRetryable) up to MaxRetries times with exponential backoff
// and jitter. A rate-limit answer pauses the limiter for every caller for at
// least x-ogw-ratelimit-reset; other retries wait in this caller only.
func (r *Reconciler) list(ctx context.Context, q larkapi.ListQuery) (larkapi.ListPage, error) {
	q.PageSize = r.opts.PageSize
	for attempt := 0; ; attempt++ {
		if err := r.opts.Limiter.Wait(ctx); err != nil {
			return larkapi.ListPage{}, fmt.Errorf("wait for the lark rate limit: %w", err)
		}
		cctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
		page, err := r.opts.History.ListMessages(cctx, q)
		cancel()
		outcome := apiOutcome(err)
		if err != nil && ctx.Err() != nil {
			outcome = outcomeCanceled
		}
		r.m.apiCalls.WithLabelValues(larkapi.EndpointListMessages, outcome).Inc()
		if err == nil {
			return page, nil
		}
		if ctx.Err() != nil {
			return larkapi.ListPage{}, fmt.Errorf("list %s %s: %w", q.ContainerType, q.ContainerID, context.Cause(ctx))
		}
		if !IsRetryable(err) || attempt >= *r.opts.MaxRetries {
			return larkapi.ListPage{}, fmt.Errorf("list %s %s (attempt %d): %w", q.ContainerType, q.ContainerID, attempt+1, err)
		}
		var retryAfter time.Duration
		if ae, ok := errors.AsType[*larkapi.APIError](err); ok {
			retryAfter = ae.RetryAfter
		}
		d := retryDelay(attempt, r.opts.MinBackoff, r.opts.MaxBackoff, retryAfter, r.opts.Jitter)
		r.m.retries.WithLabelValues(outcome).Inc()
		r.m.backoffS.Add(d.Seconds())
		r.log.Debug("lark history call retried", "container", q.ContainerType, "container_id", q.ContainerID,
			"outcome", outcome, "attempt", attempt+1, "backoff", d, "err", err)
		if outcome == outcomeRateLimited {
			r.opts.Limiter.Pause(r.opts.Clock().Add(d)) // the next Wait sleeps it
			continue
		}
		if err := r.opts.Sleep(ctx, d); err != nil {
			return larkapi.ListPage{}, fmt.Errorf("list %s %s: back off: %w", q.ContainerType, q.ContainerID, err)
		}
	}
}

// keyLocks serialises the runs of one workspace/chat within the process.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

func newKeyLocks() *keyLocks { return &keyLocks{held: map[string]chan struct{}{}} }

// tryLock takes the key if it is free.
func (k *keyLocks) tryLock(key string) (func(), bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, busy := k.held[key]; busy {
		return nil, false
	}
	ch := make(chan struct{})
	k.held[key] = ch
	return func() { k.unlock(key, ch) }, true
}

// lock waits for the key.
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	for {
		k.mu.Lock()
		ch, busy := k.held[key]
		if !busy {
			mine := make(chan struct{})
			k.held[key] = mine
			k.mu.Unlock()
			return func() { k.unlock(key, mine) }, nil
		}
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (k *keyLocks) unlock(key string, ch chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[key] == ch {
		delete(k.held, key)
	}
	close(ch)
}
