package reconcile

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/larkline/larkline/internal/ids"
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
