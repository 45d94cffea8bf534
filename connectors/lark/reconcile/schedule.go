package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/larkline/larkline/internal/store"
)

// Coverage passes follow the window clock (issue #20, docs/decisions.md D15). A
// window closes once its grace has passed and history covers its end; with passes
// only every ReconcileInterval a window waited for the next one. So, when Window is
// set, Run also starts a coverage pass CoverageDelay after every window end: the
// chats that hold evidence in the window that just ended (the store's evidence
// table, ChatsWithEvidence) are read first, each an incremental run whose range
// ends at now − Settle ≥ the window's end. The rest of the schedule (every chat,
// refreshes, backfills) keeps its interval and shares the chat-run slots: while both
// wait, coverage runs get coverageShare slots for every one a scheduled run gets,
// so a window clock busier than the API can serve never starves older work. Every
// call still waits on the app's Limiter and every run keeps its page budget.

// slot classes: who waits for a chat-run slot.
const (
	classCoverage  = 0 // a coverage pass (the window clock)
	classScheduled = 1 // the interval pass, RunOnce, Refresh
)

// coverageShare is how many slots coverage runs get in a row, while a scheduled run
// waits, before the scheduled run gets one.
const coverageShare = 3

// slots are the MaxConcurrentChats chat-run slots shared by every entry point,
// granted coverage first with the share above.
type slots struct {
	mu      sync.Mutex
	free    int
	waiting [2][]*slotWaiter // FIFO per class
	// announced counts coverage runs a pass has announced and not yet asked a slot
	// for: between two of a pass's acquires its next run is not yet waiting, and a
	// slot freed then is kept for it (as if it waited) rather than handed to a
	// scheduled run out of turn.
	announced int
	streak    int // coverage grants in a row while a scheduled run waited
	// granted counts grants per class (tests).
	granted [2]int
}

type slotWaiter struct {
	ch      chan struct{}
	granted bool
}

func newSlots(n int) *slots { return &slots{free: n} }

// announce tells the slots that a coverage pass will ask for n more slots (n < 0:
// it will not, after all).
func (s *slots) announce(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.announced = max(s.announced+n, 0)
	s.grant()
}

// acquire takes a slot for a run of class, waiting as the order requires. A
// coverage acquire takes the place of one announced run.
func (s *slots) acquire(ctx context.Context, stop stopSignal, class int) error {
	s.mu.Lock()
	if class == classCoverage && s.announced > 0 {
		s.announced--
	}
	w := &slotWaiter{ch: make(chan struct{})}
	s.waiting[class] = append(s.waiting[class], w)
	s.grant()
	s.mu.Unlock()
	var err error
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop.c:
		err = ErrShuttingDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted { // granted while giving up: hand it on
		s.free++
		s.grant()
		return err
	}
	for i, o := range s.waiting[class] {
		if o == w {
			s.waiting[class] = append(s.waiting[class][:i], s.waiting[class][i+1:]...)
			break
		}
	}
	return err
}

// release gives a slot back.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free++
	s.grant()
}

// grant hands free slots to waiters; s.mu is held. An announced coverage run
// counts as waiting, but a slot kept for it is granted only once it asks.
func (s *slots) grant() {
	for s.free > 0 {
		queued := len(s.waiting[classCoverage]) > 0
		cov, sch := queued || s.announced > 0, len(s.waiting[classScheduled]) > 0
		var c int
		switch {
		case cov && sch && s.streak >= coverageShare:
			c, s.streak = classScheduled, 0
		case !queued && cov:
			return // kept for the announced run
		case cov && sch:
			c = classCoverage
			s.streak++
		case cov:
			c, s.streak = classCoverage, 0
		case sch:
			c, s.streak = classScheduled, 0
		default:
			return
		}
		w := s.waiting[c][0]
		s.waiting[c] = s.waiting[c][1:]
		w.granted = true
		close(w.ch)
		s.free--
		s.granted[c]++
	}
}

// nextCoverage returns the window end the next coverage pass is for and when it is
// due (end + delay), after a pass for last (zero: none yet) at now: the window after
// last, or, when more than one window ended since, the latest one that is due (its
// pass reads each chat up to now and so covers the earlier ones too).
func nextCoverage(now, last time.Time, window, delay time.Duration) (end, at time.Time) {
	latest := now.Add(-delay).Truncate(window) // the latest end whose pass is due at now
	if last.IsZero() {
		end = latest.Add(window) // Run's first pass covers what ended before it
	} else if end = last.Add(window); latest.After(end) {
		end = latest
	}
	return end, end.Add(delay)
}

// followWindows runs a coverage pass after every window end until stop.
func (r *Reconciler) followWindows(ctx context.Context, stop stopSignal) {
	var last time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		end, at := nextCoverage(r.opts.Clock(), last, r.opts.Window, r.opts.CoverageDelay)
		resetTimer(timer, at.Sub(r.opts.Clock()))
		select {
		case <-stop.c:
			return
		case <-timer.C:
		}
		from := end.Add(-r.opts.Window)
		if !last.IsZero() && last.Before(from) {
			from = last // windows skipped while a pass overran: their chats too
		}
		if _, err := r.coveragePass(ctx, stop, from, end); err != nil {
			r.log.Warn("coverage pass failed; the interval pass covers its chats", "window_end", end, "err", err)
		}
		last = end
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(max(d, 0))
}

// coveragePass reconciles the eligible chats that hold evidence in [from, end), the
// window(s) that just ended, coverage first (see the top of this file). Each run
// reads the chat up to now − Settle; one that completes covers end.
func (r *Reconciler) coveragePass(ctx context.Context, stop stopSignal, from, end time.Time) (PassReport, error) {
	rep := PassReport{Started: r.opts.Clock()}
	bs, err := r.opts.Store.ListBindings(ctx, store.BindingFilter{
		Statuses:     []store.WorkspaceStatus{store.WorkspaceFiring},
		CreatedSince: rep.Started.Add(-r.opts.IngestionLookback),
	})
	if err != nil {
		r.m.failures.WithLabelValues(reasonStore).Inc()
		return rep, fmt.Errorf("list the bindings to cover: %w", err)
	}
	refs := make([]store.ChatRef, len(bs))
	byRef := make(map[store.ChatRef]store.WorkspaceBinding, len(bs))
	for i, b := range bs {
		refs[i] = store.ChatRef{Workspace: b.Workspace.ID, Chat: b.Chat}
		byRef[refs[i]] = b
	}
	active, err := r.opts.Store.ChatsWithEvidence(ctx, refs, from, end)
	if err != nil {
		r.m.failures.WithLabelValues(reasonStore).Inc()
		return rep, fmt.Errorf("find the chats with evidence in [%s, %s): %w", from, end, err)
	}
	r.m.coveragePasses.Inc()
	r.m.coverageChats.Set(float64(len(active)))
	rep.Chats = make([]ChatReport, len(active))
	var wg sync.WaitGroup
	r.slots.announce(len(active))
	asked := 0
	for i, a := range active {
		b := byRef[a]
		asked++
		if err := r.slots.acquire(ctx, stop, classCoverage); err != nil {
			for k := i; k < len(active); k++ {
				rep.Chats[k] = ChatReport{Workspace: active[k].Workspace, Chat: active[k].Chat, Kind: KindIncremental, Stopped: ErrShuttingDown}
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.slots.release()
			rep.Chats[i] = r.runChat(ctx, job{ws: b.Workspace, chat: b.Chat, stop: stop, coverage: true, windowEnd: end})
		}()
	}
	r.slots.announce(asked - len(active)) // a stopped pass asks for no more
	wg.Wait()
	rep.Finished = r.opts.Clock()
	rep.Lag = lag(rep.Finished, rep.Chats)
	r.log.Info("coverage pass done", "window_end", end, "chats", len(rep.Chats), "failed", rep.Failed(),
		"duration", rep.Finished.Sub(rep.Started))
	return rep, nil
}

// noteCovered records that a coverage run starting at began read its chat to its end.
func (r *Reconciler) noteCovered(key string, began time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if began.After(r.complete[key]) {
		r.complete[key] = began
	}
}

// fresh reports whether a coverage run of the chat that started within the last
// max(ReconcileInterval, Window) before now read it to its end: a chat with evidence
// in every window is then read once per window, by its coverage run, and the interval
// pass reads the others every interval, as before (and refreshes every chat).
func (r *Reconciler) fresh(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.complete[key]
	return ok && now.Sub(at) < max(r.opts.ReconcileInterval, r.opts.Window)
}

// setFollowing turns the continuations on (Run started) or off (Run returned: the
// queued ones are left to the next interval pass).
func (r *Reconciler) setFollowing(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.following = on
	if !on {
		r.continued = nil
		clear(r.continuing)
	}
}

// queueContinuation asks Run to continue the chat of j at once: its run used the page
// budget before the end of its range (a burst, a backfill). Without Run following
// the window clock the next interval pass continues it, as before.
func (r *Reconciler) queueContinuation(j job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.following || r.continuing[j.key()] {
		return
	}
	r.continuing[j.key()] = true
	r.continued = append(r.continued, job{ws: j.ws, chat: j.chat, continued: true})
	select {
	case r.continueNew <- struct{}{}:
	default:
	}
}

// continueRuns runs the queued continuations, each as the interval pass's work (the
// share of the slots that coverage leaves), until stop.
func (r *Reconciler) continueRuns(ctx context.Context, stop stopSignal) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		r.mu.Lock()
		var next *job
		if len(r.continued) > 0 {
			j := r.continued[0]
			r.continued = r.continued[1:]
			next = &j
		}
		r.mu.Unlock()
		if next == nil {
			select {
			case <-stop.c:
				return
			case <-r.continueNew:
				continue
			}
		}
		if err := r.slots.acquire(ctx, stop, classScheduled); err != nil {
			return
		}
		j := *next
		j.stop = stop
		r.mu.Lock()
		delete(r.continuing, j.key())
		r.mu.Unlock()
		r.m.continuations.Inc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.slots.release()
			r.runChat(ctx, j)
		}()
	}
}
