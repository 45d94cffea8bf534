package synthesis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

// meeting is a synthesizer that proves concurrency without timing: the first call of
// each workspace waits until the other workspace's first call has started (so two
// workspaces must be able to synthesize at once), and it records how many calls of
// one workspace ever ran together.
type meeting struct {
	next synth.Synthesizer

	mu      sync.Mutex
	active  map[ids.WorkspaceID]int
	maxWS   map[ids.WorkspaceID]int
	started map[ids.WorkspaceID]chan struct{}
	once    map[ids.WorkspaceID]*sync.Once
	missed  bool
}

func newMeeting(next synth.Synthesizer, wss ...ids.WorkspaceID) *meeting {
	m := &meeting{next: next, active: map[ids.WorkspaceID]int{}, maxWS: map[ids.WorkspaceID]int{},
		started: map[ids.WorkspaceID]chan struct{}{}, once: map[ids.WorkspaceID]*sync.Once{}}
	for _, ws := range wss {
		m.started[ws] = make(chan struct{})
		m.once[ws] = &sync.Once{}
	}
	return m
}

func (m *meeting) Synthesize(ctx context.Context, req synth.Request) (synth.Result, error) {
	m.mu.Lock()
	m.active[req.Workspace]++
	m.maxWS[req.Workspace] = max(m.maxWS[req.Workspace], m.active[req.Workspace])
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.active[req.Workspace]--
		m.mu.Unlock()
	}()
	m.once[req.Workspace].Do(func() { close(m.started[req.Workspace]) })
	for ws, ch := range m.started {
		if ws == req.Workspace {
			continue
		}
		select {
		case <-ch:
		case <-time.After(waitFor / 2):
			m.mu.Lock()
			m.missed = true
			m.mu.Unlock()
		}
	}
	return m.next.Synthesize(ctx, req)
}

// TestConcurrencyBounds: windows of two workspaces synthesize at the same time, while
// the two chats of one workspace never do (one window per workspace at a time).
func TestConcurrencyBounds(t *testing.T) {
	e := newEnv(t)
	type chat struct {
		ws   ids.WorkspaceID
		chat ids.ChatID
	}
	chats := []chat{{"ws-a", "oc_a1"}, {"ws-a", "oc_a2"}, {"ws-b", "oc_b1"}}
	o := e.options()
	m := newMeeting(o.Synthesizer, "ws-a", "ws-b")
	o.Synthesizer = m
	o.MaxConcurrentSynthesis = 2
	e.start(o)
	var keys []store.WindowKey
	for _, c := range chats {
		e.ws, e.chat = c.ws, c.chat
		rows := e.seed(win, incidentLines...)
		e.produce(e.closedWindow(win, rows))
		keys = append(keys, e.key(win))
	}
	for _, k := range keys {
		eventually(t, "window "+k.SourceKey()+" of "+string(k.Workspace)+" to finish", func() bool {
			st, err := e.st.GetWindow(context.Background(), k)
			return err == nil && terminal(st)
		})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.missed {
		t.Error("the two workspaces never synthesized at the same time")
	}
	if m.maxWS["ws-a"] != 1 {
		t.Errorf("%d windows of one workspace synthesized at once, want 1", m.maxWS["ws-a"])
	}
}
