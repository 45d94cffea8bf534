package reconcile

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// threadRegistry remembers, per chat, the threads reconciliation must re-read on
// every run. Lark's chat container shows a thread's root only, so a reply made
// to a thread whose root lies before a run's range is visible nowhere but in the
// thread container. The registry learns threads from chat pages (a root carries
// its thread_id) and, once per chat per process and at every refresh or manual
// run, from the thread ids the chat's stored evidence names (which includes
// threads the event path saw). Each chat keeps at most max threads, the most
// recently active; chats no longer scanned are forgotten by retain.
type threadRegistry struct {
	max int

	mu    sync.Mutex
	chats map[ids.ChatID]*chatThreads
}

type chatThreads struct {
	seeded bool
	last   map[string]time.Time // thread id → newest message time seen
}

func newThreadRegistry(max int) *threadRegistry {
	return &threadRegistry{max: max, chats: map[ids.ChatID]*chatThreads{}}
}

func (g *threadRegistry) chat(c ids.ChatID) *chatThreads {
	ct, ok := g.chats[c]
	if !ok {
		ct = &chatThreads{last: map[string]time.Time{}}
		g.chats[c] = ct
	}
	return ct
}

// observe records activity of thread at time at.
func (g *threadRegistry) observe(c ids.ChatID, thread string, at time.Time) {
	if thread == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ct := g.chat(c)
	if prev, ok := ct.last[thread]; !ok || at.After(prev) {
		ct.last[thread] = at
	}
	if len(ct.last) <= g.max {
		return
	}
	// Evict the least recently active thread.
	var (
		victim string
		oldest time.Time
	)
	for id, t := range ct.last {
		if victim == "" || t.Before(oldest) || (t.Equal(oldest) && id < victim) {
			victim, oldest = id, t
		}
	}
	delete(ct.last, victim)
}

// forget drops a thread Lark no longer serves.
func (g *threadRegistry) forget(c ids.ChatID, thread string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ct, ok := g.chats[c]; ok {
		delete(ct.last, thread)
	}
}

// threads returns the chat's known threads active at or after since (zero: all),
// most recently active first.
func (g *threadRegistry) threads(c ids.ChatID, since time.Time) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ct, ok := g.chats[c]
	if !ok {
		return nil
	}
	type tt struct {
		id string
		at time.Time
	}
	all := make([]tt, 0, len(ct.last))
	for id, at := range ct.last {
		if !at.Before(since) {
			all = append(all, tt{id, at})
		}
	}
	slices.SortFunc(all, func(a, b tt) int { return cmp.Or(b.at.Compare(a.at), cmp.Compare(a.id, b.id)) })
	out := make([]string, len(all))
	for i, t := range all {
		out[i] = t.id
	}
	return out
}

// seeded reports whether the chat was seeded from stored evidence in this process.
func (g *threadRegistry) seeded(c ids.ChatID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ct, ok := g.chats[c]
	return ok && ct.seeded
}

func (g *threadRegistry) markSeeded(c ids.ChatID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.chat(c).seeded = true
}

// retain forgets every chat not in keep.
func (g *threadRegistry) retain(keep map[ids.ChatID]bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.chats {
		if !keep[c] {
			delete(g.chats, c)
		}
	}
}

// Refused threads (issue #19). A thread whose replies Lark refuses to list (deleted,
// not visible to the bot: a non-retryable answer) used to be dropped while the
// checkpoint moved past its range, so a reply in it was never collected even after
// the cause went away. Now the chat's checkpoint keeps it (store.RefusedThread: from
// where it is unread, how often it was refused, when to try next) and later runs read
// it again from there, before the known threads and the chat pages: the first retry
// one ReconcileInterval after the refusal, then after twice as long each time (at most
// maxThreadBackoff), and after maxThreadAttempts refusals it is abandoned. Counted by
// larkline_reconcile_refused_threads_total{result}.
const (
	maxThreadAttempts = 8
	maxThreadBackoff  = 12 * time.Hour
)

// refuse records a refusal of thread, whose replies from from on are unread.
func (c *chatRun) refuse(thread string, from time.Time, code, status int) {
	th, known := c.refused[thread]
	if !known {
		th = store.RefusedThread{ID: thread, From: from.UTC()}
	} else if from.Before(th.From) {
		th.From = from.UTC()
	}
	th.Attempts++
	switch {
	case th.Attempts >= maxThreadAttempts:
		delete(c.refused, thread)
		c.r.m.refusedThreads.WithLabelValues(threadAbandoned).Inc()
		c.log.Warn("lark refused a thread again; it is no longer read", "thread_id", thread, "attempts", th.Attempts,
			"unread_from", th.From, "code", code, "status", status)
		return
	case !known && len(c.refused) >= store.MaxRefusedThreads:
		c.r.m.refusedThreads.WithLabelValues(threadAbandoned).Inc()
		c.log.Warn("lark refused a thread; the chat has too many refused threads, so it is not tried again",
			"thread_id", thread, "refused_threads", len(c.refused), "code", code, "status", status)
		return
	}
	backoff := c.r.opts.ReconcileInterval
	for i := 1; i < th.Attempts && backoff < maxThreadBackoff; i++ {
		backoff *= 2
	}
	th.NextAt = c.now.Add(min(backoff, maxThreadBackoff)).UTC()
	c.refused[thread] = th
	c.r.m.refusedThreads.WithLabelValues(threadRefused).Inc()
	c.log.Warn("lark refused a thread; a later run reads it again", "thread_id", thread, "attempts", th.Attempts,
		"next_at", th.NextAt, "unread_from", th.From, "code", code, "status", status)
}

// retryRefused reads the refused threads that are due, each from where its refusals
// left it (never before the plan's bound), and commits what it finds. A thread read
// leaves the list; the checkpoint records that with its next change, after the
// thread's messages were acknowledged by Kafka.
func (c *chatRun) retryRefused(ctx context.Context) error {
	due := make([]store.RefusedThread, 0, len(c.refused))
	for _, th := range c.refused {
		if !th.NextAt.After(c.now) {
			due = append(due, th)
		}
	}
	slices.SortFunc(due, func(a, b store.RefusedThread) int { return cmp.Or(a.NextAt.Compare(b.NextAt), cmp.Compare(a.ID, b.ID)) })
	for _, th := range due {
		from := th.From
		if from.Before(c.plan.bound) {
			from = c.plan.bound
		}
		if from.After(c.plan.start) {
			from = c.plan.start
		}
		items, ok, err := c.readThreadFrom(ctx, th.ID, from)
		if err != nil {
			return err
		}
		if !ok {
			continue // refused again (refuse kept or abandoned it), or read already
		}
		if err := c.commitFrom(ctx, items, from); err != nil {
			return err
		}
		delete(c.refused, th.ID)
		c.r.m.refusedThreads.WithLabelValues(threadRecovered).Inc()
		c.log.Info("a refused thread was read", "thread_id", th.ID, "attempts", th.Attempts, "messages", len(items))
	}
	return nil
}

// refusedThreads is the list the checkpoint keeps, in a stable order.
func (c *chatRun) refusedThreads() []store.RefusedThread {
	if len(c.refused) == 0 {
		return nil
	}
	out := make([]store.RefusedThread, 0, len(c.refused))
	for _, th := range c.refused {
		out = append(out, th)
	}
	slices.SortFunc(out, func(a, b store.RefusedThread) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
