package workspaces

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

func newAdmin(t *testing.T, st *store.Store) *Admin {
	t.Helper()
	a, err := NewAdmin(st, AdminOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func spec(id ids.WorkspaceID, status store.WorkspaceStatus) WorkspaceSpec {
	return WorkspaceSpec{ID: id, Type: "incident", Status: status, CreatedAt: t0.Add(-time.Hour)}
}

func TestAdminPutWorkspaceVersions(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	a := newAdmin(t, st)
	ctx := context.Background()
	steps := []struct {
		name        string
		spec        WorkspaceSpec
		want        PutOutcome
		wantErr     error
		wantVersion int64
		wantStatus  store.WorkspaceStatus
	}{
		{"create takes version 1", spec("INC-1", store.WorkspaceFiring), PutCreated, nil, 1, store.WorkspaceFiring},
		{"the same again changes nothing", spec("INC-1", store.WorkspaceFiring), PutUnchanged, nil, 1, store.WorkspaceFiring},
		{"a change bumps the version", spec("INC-1", store.WorkspaceRecovered), PutUpdated, nil, 2, store.WorkspaceRecovered},
		{"an explicit version not newer is stale", func() WorkspaceSpec {
			s := spec("INC-1", store.WorkspaceArchived)
			s.Version = 2
			return s
		}(), 0, ErrStaleVersion, 2, store.WorkspaceRecovered},
		{"an explicit newer version is stored", func() WorkspaceSpec {
			s := spec("INC-1", store.WorkspaceFiring)
			s.Version = 1000
			return s
		}(), PutUpdated, nil, 1000, store.WorkspaceFiring},
		{"an explicit version creates", func() WorkspaceSpec {
			s := spec("INC-2", store.WorkspaceFiring)
			s.Version = 7
			return s
		}(), PutCreated, nil, 7, store.WorkspaceFiring},
	}
	for _, s := range steps {
		got, out, err := a.PutWorkspace(ctx, s.spec)
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("%s: PutWorkspace = %v, want %v", s.name, err, s.wantErr)
			}
		} else if err != nil || out != s.want || got.Version != s.wantVersion || got.Status != s.wantStatus {
			t.Fatalf("%s: PutWorkspace = %+v %s %v, want %s v%d", s.name, got, out, err, s.want, s.wantVersion)
		}
		stored, err := st.GetWorkspace(ctx, s.spec.ID)
		if err != nil || stored.Version != s.wantVersion || stored.Status != s.wantStatus {
			t.Fatalf("%s: stored %+v %v, want v%d %s", s.name, stored, err, s.wantVersion, s.wantStatus)
		}
	}
}

func TestAdminValidation(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	a := newAdmin(t, st)
	ctx := context.Background()
	if _, _, err := a.PutWorkspace(ctx, spec("INC-1", store.WorkspaceFiring)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		op    func() error
		field string  // the FieldError's field; "" when not a FieldError
		is    []error // errors the result must wrap
		isNot []error
	}{
		{"unknown status on put", func() error {
			_, _, err := a.PutWorkspace(ctx, spec("INC-2", "open"))
			return err
		}, "status", []error{ErrInvalid}, nil},
		{"empty type", func() error {
			s := spec("INC-2", store.WorkspaceFiring)
			s.Type = ""
			_, _, err := a.PutWorkspace(ctx, s)
			return err
		}, "type", []error{ErrInvalid}, nil},
		{"creation time in the future", func() error {
			s := spec("INC-2", store.WorkspaceFiring)
			s.CreatedAt = t0.Add(time.Hour)
			_, _, err := a.PutWorkspace(ctx, s)
			return err
		}, "created_at", []error{ErrInvalid}, nil},
		{"bad workspace id", func() error {
			_, _, err := a.PutWorkspace(ctx, spec("INC 2", store.WorkspaceFiring))
			return err
		}, "id", []error{ErrInvalid, ids.ErrInvalidID}, nil},
		{"negative version", func() error {
			s := spec("INC-2", store.WorkspaceFiring)
			s.Version = -1
			_, _, err := a.PutWorkspace(ctx, s)
			return err
		}, "version", []error{ErrInvalid}, nil},
		{"unknown status on set", func() error {
			_, _, err := a.SetStatus(ctx, "INC-1", "resolved")
			return err
		}, "status", []error{ErrInvalid}, nil},
		{"status of a missing workspace", func() error {
			_, _, err := a.SetStatus(ctx, "INC-404", store.WorkspaceRecovered)
			return err
		}, "", []error{ErrWorkspaceNotFound}, []error{ErrInvalid}},
		{"get a missing workspace", func() error {
			_, err := a.GetWorkspace(ctx, "INC-404")
			return err
		}, "", []error{ErrWorkspaceNotFound}, []error{ErrInvalid}},
		{"bind a chat id that is not a Lark chat id", func() error {
			_, err := a.Bind(ctx, "INC-1", "om_123")
			return err
		}, "chat_id", []error{ErrInvalid, ids.ErrInvalidID}, nil},
		{"bind to a missing workspace", func() error {
			_, err := a.Bind(ctx, "INC-404", "oc_1")
			return err
		}, "workspace_id", []error{ErrInvalid, ErrWorkspaceNotFound}, nil},
		{"unbind a binding that does not exist", func() error {
			return a.Unbind(ctx, "INC-1", "oc_never")
		}, "", []error{ErrBindingNotFound}, []error{ErrInvalid}},
		{"bindings of a bad chat id", func() error {
			_, err := a.BindingsOfChat(ctx, "oc_a/b")
			return err
		}, "chat_id", []error{ErrInvalid}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if err == nil {
				t.Fatal("no error")
			}
			mustIs(t, err, tc.is...)
			for _, not := range tc.isNot {
				if errors.Is(err, not) {
					t.Errorf("%v wraps %v", err, not)
				}
			}
			var fe *FieldError
			if got := errors.As(err, &fe); got != (tc.field != "") || (got && fe.Field != tc.field) {
				t.Fatalf("%v: FieldError %+v, want field %q", err, fe, tc.field)
			}
			if IsRetryable(err) {
				t.Errorf("IsRetryable(%v) = true", err)
			}
		})
	}
	// Nothing of the rejected input was written.
	if _, err := st.GetWorkspace(ctx, "INC-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("INC-2 was written: %v", err)
	}
	if bs, err := st.BindingsForChat(ctx, "oc_1"); err != nil || len(bs) != 0 {
		t.Fatalf("oc_1 was bound: %v %v", bs, err)
	}
}

func TestAdminBindRespectsMaxChats(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	a := newAdmin(t, st)
	ctx := context.Background()
	if _, _, err := a.PutWorkspace(ctx, spec("INC-1", store.WorkspaceFiring)); err != nil {
		t.Fatal(err)
	}
	full := make([]ids.ChatID, MaxChats)
	for i := range full {
		full[i] = ids.ChatID(fmt.Sprintf("oc_%05d", i))
	}
	if _, _, err := st.ReplaceBindings(ctx, "INC-1", full); err != nil {
		t.Fatal(err)
	}
	_, err := a.Bind(ctx, "INC-1", "oc_one_more")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "chat_id" {
		t.Fatalf("Bind beyond MaxChats = %v, want a chat_id FieldError", err)
	}
	// Re-binding a chat already bound is still fine.
	if added, err := a.Bind(ctx, "INC-1", full[0]); err != nil || added {
		t.Fatalf("Bind of a bound chat at MaxChats = %t %v", added, err)
	}
}

// TestAdminChangesAreVisibleAndNotified: a binding made through the admin function
// is visible to store.BindingsForChat as soon as Bind returns and is announced on
// the bindings channel; so is a status change to recovered, and an unbind.
func TestAdminChangesAreVisibleAndNotified(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	a := newAdmin(t, st)
	ctx := context.Background()
	n := listen(t, st)
	const ws, chat = ids.WorkspaceID("INC-7"), ids.ChatID("oc_admin_fn")
	if _, out, err := a.PutWorkspace(ctx, spec(ws, store.WorkspaceFiring)); err != nil || out != PutCreated {
		t.Fatalf("PutWorkspace = %s %v", out, err)
	}
	added, err := a.Bind(ctx, ws, chat)
	if err != nil || !added {
		t.Fatalf("Bind = %t %v", added, err)
	}
	if b, ok := bindingOf(t, st, chat, ws); !ok || b.Workspace.Status != store.WorkspaceFiring {
		t.Fatalf("binding after Bind: %+v %t", b, ok)
	}
	n.waitFor(t, chat)
	if again, err := a.Bind(ctx, ws, chat); err != nil || again {
		t.Fatalf("second Bind = %t %v, want false nil", again, err)
	}

	got, changed, err := a.SetStatus(ctx, ws, store.WorkspaceRecovered)
	if err != nil || !changed || got.Status != store.WorkspaceRecovered || got.Version != 1 {
		t.Fatalf("SetStatus = %+v %t %v", got, changed, err)
	}
	if b, ok := bindingOf(t, st, chat, ws); !ok || b.Workspace.Status != store.WorkspaceRecovered {
		t.Fatalf("binding after SetStatus: %+v %t", b, ok)
	}
	n.waitFor(t, chat)
	if _, changed, err := a.SetStatus(ctx, ws, store.WorkspaceRecovered); err != nil || changed {
		t.Fatalf("repeated SetStatus = %t %v, want unchanged", changed, err)
	}

	d, err := a.GetWorkspace(ctx, ws)
	if err != nil || len(d.Chats) != 1 || d.Chats[0] != chat || d.Status != store.WorkspaceRecovered {
		t.Fatalf("GetWorkspace = %+v %v", d, err)
	}
	bs, err := a.BindingsOfChat(ctx, chat)
	if err != nil || len(bs) != 1 || bs[0].Workspace.ID != ws {
		t.Fatalf("BindingsOfChat = %+v %v", bs, err)
	}

	if err := a.Unbind(ctx, ws, chat); err != nil {
		t.Fatalf("Unbind: %v", err)
	}
	if _, ok := bindingOf(t, st, chat, ws); ok {
		t.Fatal("binding still visible after Unbind")
	}
	n.waitFor(t, chat)
}

func TestNewAdminOptions(t *testing.T) {
	t.Parallel()
	if _, err := NewAdmin(nil, AdminOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("nil store: %v", err)
	}
	if _, err := NewAdmin(&store.Store{}, AdminOptions{ClockSkew: -time.Second}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("negative skew: %v", err)
	}
}
