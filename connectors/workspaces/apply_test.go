package workspaces

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

func chatsOf(t *testing.T, st *store.Store, ws ids.WorkspaceID) []ids.ChatID {
	t.Helper()
	cs, err := st.ChatsOfWorkspace(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// drainUntil collects the notifications that arrive up to a marker chat notified last
// (notifications of one session arrive in commit order).
func (n *notifications) drainUntil(t *testing.T, st *store.Store, marker ids.ChatID) map[ids.ChatID]int {
	t.Helper()
	ctx := context.Background()
	if _, err := st.BindChat(ctx, "MARKER", marker); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UnbindChat(ctx, "MARKER", marker); err != nil {
		t.Fatal(err)
	}
	got := map[ids.ChatID]int{}
	timeout := time.After(waitLimit)
	for {
		select {
		case c := <-n.changed:
			if c == marker {
				n.waitFor(t, marker) // the unbind's
				return got
			}
			got[c]++
		case <-timeout:
			t.Fatalf("no NOTIFY for the marker chat %s", marker)
		}
	}
}

func TestPGApplier(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := context.Background()
	a := applier(t, st)
	if _, err := st.UpsertWorkspace(ctx, store.Workspace{ID: "MARKER", Type: "marker", Status: store.WorkspaceArchived, CreatedAt: t0}, 1); err != nil {
		t.Fatal(err)
	}
	n := listen(t, st)
	w := store.Workspace{ID: "INC-A", Type: "incident", Status: store.WorkspaceFiring, CreatedAt: t0}

	steps := []struct {
		name        string
		version     int64
		status      store.WorkspaceStatus
		chats       []ids.ChatID
		want        ApplyResult
		wantChats   []ids.ChatID
		wantVersion int64
		wantNotify  []ids.ChatID
	}{
		{"insert", 2, store.WorkspaceFiring, []ids.ChatID{"oc_a", "oc_b"},
			ApplyResult{Outcome: store.WorkspaceInserted, Added: 2}, []ids.ChatID{"oc_a", "oc_b"}, 2, []ids.ChatID{"oc_a", "oc_b"}},
		{"an older version changes nothing", 1, store.WorkspaceRecovered, []ids.ChatID{"oc_z"},
			ApplyResult{Outcome: store.WorkspaceIgnored}, []ids.ChatID{"oc_a", "oc_b"}, 2, nil},
		{"the same version changes nothing", 2, store.WorkspaceRecovered, nil,
			ApplyResult{Outcome: store.WorkspaceIgnored}, []ids.ChatID{"oc_a", "oc_b"}, 2, nil},
		// The removed chat, the added chat and the kept chat (its workspace changed) are
		// all announced.
		{"a newer version replaces the bindings", 3, store.WorkspaceRecovered, []ids.ChatID{"oc_c", "oc_b"},
			ApplyResult{Outcome: store.WorkspaceUpdated, Added: 1, Removed: 1}, []ids.ChatID{"oc_b", "oc_c"}, 3, []ids.ChatID{"oc_a", "oc_b", "oc_c"}},
		{"a newer version with no chats removes them all", 4, store.WorkspaceRecovered, nil,
			ApplyResult{Outcome: store.WorkspaceUpdated, Removed: 2}, nil, 4, []ids.ChatID{"oc_b", "oc_c"}},
	}
	for _, s := range steps {
		w.Status = s.status
		got, err := a.ApplyRecord(ctx, w, s.version, s.chats)
		if err != nil || got != s.want {
			t.Fatalf("%s: ApplyRecord = %+v %v, want %+v", s.name, got, err, s.want)
		}
		if cs := chatsOf(t, st, w.ID); !slices.Equal(cs, s.wantChats) {
			t.Fatalf("%s: chats %v, want %v", s.name, cs, s.wantChats)
		}
		if stored, err := st.GetWorkspace(ctx, w.ID); err != nil || stored.Version != s.wantVersion {
			t.Fatalf("%s: stored %+v %v, want version %d", s.name, stored, err, s.wantVersion)
		}
		notified := n.drainUntil(t, st, "oc_marker")
		for _, c := range s.wantNotify {
			if notified[c] != 1 {
				t.Errorf("%s: chat %s notified %d times, want once", s.name, c, notified[c])
			}
			delete(notified, c)
		}
		if len(notified) != 0 {
			t.Errorf("%s: unexpected notifications %v", s.name, notified)
		}
	}

	// A tombstone removes the bindings and archives, keeping the version.
	if _, err := a.ApplyRecord(ctx, w, 5, []ids.ChatID{"oc_t"}); err != nil {
		t.Fatal(err)
	}
	n.drainUntil(t, st, "oc_marker")
	res, err := a.ApplyTombstone(ctx, w.ID)
	if err != nil || res != (TombstoneResult{Found: true, Archived: true, Removed: 1}) {
		t.Fatalf("ApplyTombstone = %+v %v", res, err)
	}
	if notified := n.drainUntil(t, st, "oc_marker"); len(notified) != 1 || notified["oc_t"] != 1 {
		t.Errorf("tombstone notified %v, want oc_t", notified)
	}
	if stored, err := st.GetWorkspace(ctx, w.ID); err != nil || stored.Status != store.WorkspaceArchived || stored.Version != 5 {
		t.Fatalf("after the tombstone: %+v %v", stored, err)
	}
	if res, err := a.ApplyTombstone(ctx, w.ID); err != nil || res != (TombstoneResult{Found: true}) {
		t.Fatalf("repeated tombstone = %+v %v", res, err)
	}
	if res, err := a.ApplyTombstone(ctx, "NEVER"); err != nil || res != (TombstoneResult{}) {
		t.Fatalf("tombstone of an unknown workspace = %+v %v", res, err)
	}
	// A late older record does not resurrect the deleted workspace.
	w.Status = store.WorkspaceFiring
	if got, err := a.ApplyRecord(ctx, w, 4, []ids.ChatID{"oc_t"}); err != nil || got.Outcome != store.WorkspaceIgnored {
		t.Fatalf("older record after the tombstone = %+v %v", got, err)
	}

	for name, call := range map[string]func() error{
		"bad status": func() error {
			_, err := a.ApplyRecord(ctx, store.Workspace{ID: "X", Type: "incident", Status: "open", CreatedAt: t0}, 1, nil)
			return err
		},
		"bad chat": func() error {
			_, err := a.ApplyRecord(ctx, store.Workspace{ID: "X", Type: "incident", Status: "firing", CreatedAt: t0}, 1, []ids.ChatID{"x"})
			return err
		},
		"zero version": func() error {
			_, err := a.ApplyRecord(ctx, store.Workspace{ID: "X", Type: "incident", Status: "firing", CreatedAt: t0}, 0, nil)
			return err
		},
		"bad tombstone id": func() error {
			_, err := a.ApplyTombstone(ctx, "a b")
			return err
		},
	} {
		if err := call(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := st.GetWorkspace(ctx, "X"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("invalid input was written: %v", err)
	}
}
