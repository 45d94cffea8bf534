package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

func workspace(id ids.WorkspaceID, status WorkspaceStatus) Workspace {
	return Workspace{ID: id, Type: "incident", Status: status, CreatedAt: t0}
}

func TestUpsertWorkspaceVersionOrdering(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-feed"
	steps := []struct {
		name       string
		status     WorkspaceStatus
		version    int64
		want       WorkspaceOutcome
		wantStatus WorkspaceStatus
		wantVer    int64
	}{
		{"first version inserts", WorkspaceFiring, 5, WorkspaceInserted, WorkspaceFiring, 5},
		{"newer version updates", WorkspaceRecovered, 7, WorkspaceUpdated, WorkspaceRecovered, 7},
		{"older version is ignored", WorkspaceFiring, 6, WorkspaceIgnored, WorkspaceRecovered, 7},
		{"same version is ignored", WorkspaceArchived, 7, WorkspaceIgnored, WorkspaceRecovered, 7},
		{"newer version after that updates", WorkspaceArchived, 8, WorkspaceUpdated, WorkspaceArchived, 8},
	}
	for _, st := range steps {
		out, err := s.UpsertWorkspace(ctx, workspace(ws, st.status), st.version)
		if err != nil || out != st.want {
			t.Fatalf("%s: %s %v, want %s", st.name, out, err, st.want)
		}
		got, err := s.GetWorkspace(ctx, ws)
		if err != nil || got.Status != st.wantStatus || got.Version != st.wantVer || !got.CreatedAt.Equal(t0) || got.Type != "incident" {
			t.Fatalf("%s: stored %+v %v", st.name, got, err)
		}
	}
	if _, err := s.GetWorkspace(ctx, "ws-missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetWorkspace missing = %v", err)
	}
	for name, w := range map[string]Workspace{
		"bad status":  workspace(ws, "open"),
		"no type":     {ID: ws, Status: WorkspaceFiring, CreatedAt: t0},
		"zero create": {ID: ws, Type: "incident", Status: WorkspaceFiring},
		"bad id":      workspace("ws/1", WorkspaceFiring),
	} {
		if _, err := s.UpsertWorkspace(ctx, w, 100); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.UpsertWorkspace(ctx, workspace(ws, WorkspaceFiring), -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative version: %v, want ErrInvalid", err)
	}
}

func TestBindings(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	if _, err := s.BindChat(ctx, "ws-nope", "oc_a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("binding to a missing workspace: %v, want ErrNotFound", err)
	}
	for _, w := range []Workspace{workspace("ws-1", WorkspaceFiring), workspace("ws-2", WorkspaceRecovered)} {
		if _, err := s.UpsertWorkspace(ctx, w, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []struct {
		ws   ids.WorkspaceID
		chat ids.ChatID
		new  bool
	}{{"ws-1", "oc_a", true}, {"ws-1", "oc_a", false}, {"ws-2", "oc_a", true}, {"ws-1", "oc_b", true}} {
		if added, err := s.BindChat(ctx, b.ws, b.chat); err != nil || added != b.new {
			t.Fatalf("BindChat(%s, %s) = %v %v, want %v", b.ws, b.chat, added, err, b.new)
		}
	}
	got, err := s.BindingsForChat(ctx, "oc_a")
	if err != nil || len(got) != 2 || got[0].Workspace.ID != "ws-1" || got[1].Workspace.ID != "ws-2" ||
		got[1].Workspace.Status != WorkspaceRecovered || !got[0].Workspace.CreatedAt.Equal(t0) || got[0].Chat != "oc_a" || got[0].BoundAt.IsZero() {
		t.Fatalf("BindingsForChat = %+v %v", got, err)
	}
	chats, err := s.ChatsOfWorkspace(ctx, "ws-1")
	if err != nil || !slices.Equal(chats, []ids.ChatID{"oc_a", "oc_b"}) {
		t.Fatalf("ChatsOfWorkspace = %v %v", chats, err)
	}
	firing, err := s.ListBindings(ctx, BindingFilter{Statuses: []WorkspaceStatus{WorkspaceFiring}, CreatedSince: t0.Add(-72 * time.Hour)})
	if err != nil || len(firing) != 2 || firing[0].Workspace.ID != "ws-1" || firing[1].Chat != "oc_b" {
		t.Fatalf("ListBindings(firing) = %+v %v", firing, err)
	}
	if recent, err := s.ListBindings(ctx, BindingFilter{CreatedSince: t0.Add(time.Second)}); err != nil || len(recent) != 0 {
		t.Fatalf("ListBindings(created after) = %+v %v", recent, err)
	}
	if all, err := s.ListBindings(ctx, BindingFilter{}); err != nil || len(all) != 3 {
		t.Fatalf("ListBindings(all) = %d %v", len(all), err)
	}

	added, removed, err := s.ReplaceBindings(ctx, "ws-1", []ids.ChatID{"oc_b", "oc_c", "oc_c"})
	if err != nil || added != 1 || removed != 1 {
		t.Fatalf("ReplaceBindings = +%d -%d %v; want +1 -1", added, removed, err)
	}
	if chats, _ := s.ChatsOfWorkspace(ctx, "ws-1"); !slices.Equal(chats, []ids.ChatID{"oc_b", "oc_c"}) {
		t.Fatalf("after replace: %v", chats)
	}
	if _, _, err := s.ReplaceBindings(ctx, "ws-nope", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReplaceBindings of a missing workspace: %v", err)
	}
	if removedOK, err := s.UnbindChat(ctx, "ws-2", "oc_a"); err != nil || !removedOK {
		t.Fatalf("UnbindChat = %v %v", removedOK, err)
	}
	if removedOK, err := s.UnbindChat(ctx, "ws-2", "oc_a"); err != nil || removedOK {
		t.Fatalf("UnbindChat again = %v %v", removedOK, err)
	}
	if got, _ := s.BindingsForChat(ctx, "oc_a"); len(got) != 0 {
		t.Fatalf("oc_a still bound: %+v", got)
	}
	if _, err := s.BindChat(ctx, "ws-1", "chat-1"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad chat id: %v", err)
	}
	if changed, err := s.SetWorkspaceStatus(ctx, "ws-1", WorkspaceArchived); err != nil || !changed {
		t.Fatalf("SetWorkspaceStatus = %v %v", changed, err)
	}
	if changed, err := s.SetWorkspaceStatus(ctx, "ws-1", WorkspaceArchived); err != nil || changed {
		t.Fatalf("SetWorkspaceStatus again = %v %v", changed, err)
	}
	if _, err := s.SetWorkspaceStatus(ctx, "ws-nope", WorkspaceArchived); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetWorkspaceStatus missing = %v", err)
	}
}

// recorder collects ListenBindings events.
type recorder struct {
	mu     sync.Mutex
	resets int
	ready  chan struct{}
	chats  chan ids.ChatID
}

func (r *recorder) BindingsReset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resets++; r.resets == 1 {
		close(r.ready)
	}
}

func (r *recorder) BindingChanged(c ids.ChatID) { r.chats <- c }

func TestListenBindingsNotifiesEveryChange(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{ready: make(chan struct{}), chats: make(chan ids.ChatID, 64)}
	done := make(chan error, 1)
	go func() { done <- s.ListenBindings(ctx, rec) }()
	select {
	case <-rec.ready:
	case err := <-done:
		t.Fatalf("ListenBindings returned before listening: %v", err)
	}

	// Each step and the chats whose caches it must invalidate, in commit order.
	// Steps that change nothing notify nothing.
	steps := []struct {
		name string
		do   func() error
		want []ids.ChatID
	}{
		{"create workspace (no bindings yet)", func() error {
			_, err := s.UpsertWorkspace(ctx, workspace("ws-n", WorkspaceFiring), 1)
			return err
		}, nil},
		{"bind", func() error { _, err := s.BindChat(ctx, "ws-n", "oc_n1"); return err }, []ids.ChatID{"oc_n1"}},
		{"bind again (no change)", func() error { _, err := s.BindChat(ctx, "ws-n", "oc_n1"); return err }, nil},
		{"bind second chat", func() error { _, err := s.BindChat(ctx, "ws-n", "oc_n2"); return err }, []ids.ChatID{"oc_n2"}},
		{"workspace feed update", func() error {
			_, err := s.UpsertWorkspace(ctx, workspace("ws-n", WorkspaceRecovered), 2)
			return err
		}, []ids.ChatID{"oc_n1", "oc_n2"}},
		{"stale feed update (no change)", func() error {
			_, err := s.UpsertWorkspace(ctx, workspace("ws-n", WorkspaceFiring), 1)
			return err
		}, nil},
		{"status change", func() error { _, err := s.SetWorkspaceStatus(ctx, "ws-n", WorkspaceArchived); return err }, []ids.ChatID{"oc_n1", "oc_n2"}},
		{"replace", func() error {
			_, _, err := s.ReplaceBindings(ctx, "ws-n", []ids.ChatID{"oc_n2", "oc_n3"})
			return err
		}, []ids.ChatID{"oc_n1", "oc_n3"}},
		{"unbind", func() error { _, err := s.UnbindChat(ctx, "ws-n", "oc_n3"); return err }, []ids.ChatID{"oc_n3"}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		// A marker notification sent after the step bounds what the step sent.
		if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, 'marker')`, BindingsChannel); err != nil {
			t.Fatal(err)
		}
		var got []ids.ChatID
		for c := range rec.chats {
			if c == "marker" {
				break
			}
			got = append(got, c)
		}
		slices.Sort(got)
		if !slices.Equal(got, st.want) {
			t.Fatalf("%s: notified %v, want %v", st.name, got, st.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenBindings after cancel = %v, want nil", err)
	}
	if err := s.ListenBindings(context.Background(), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil handler: %v", err)
	}
}
