package workspaces

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// waitLimit bounds every wait for something asynchronous (a notification, a consumer
// catching up), so that a broken test fails instead of hanging. It is not a speed
// assertion.
const waitLimit = 60 * time.Second

// t0 is the tests' fixed "now".
var t0 = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return t0 }

// newStore returns a store on a fresh, migrated database of its own.
func newStore(t testing.TB) *store.Store {
	t.Helper()
	st, _ := newStoreDSN(t)
	return st
}

// newStoreDSN is newStore that also returns the database's DSN.
func newStoreDSN(t testing.TB) (*store.Store, string) {
	t.Helper()
	db := teststore.Open(t, teststore.MaxConns(8))
	return db.Store, db.DSN
}

// notifications records what store.ListenBindings reports.
type notifications struct {
	reset   chan struct{}
	changed chan ids.ChatID
}

func (n *notifications) BindingsReset() {
	select {
	case n.reset <- struct{}{}:
	default:
	}
}

func (n *notifications) BindingChanged(c ids.ChatID) { n.changed <- c }

// listen starts store.ListenBindings and returns once it listens.
func listen(t *testing.T, st *store.Store) *notifications {
	t.Helper()
	n := &notifications{reset: make(chan struct{}, 1), changed: make(chan ids.ChatID, 4096)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	errc := make(chan error, 1)
	go func() {
		defer wg.Done()
		errc <- st.ListenBindings(ctx, n)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := <-errc; err != nil {
			t.Errorf("ListenBindings: %v", err)
		}
	})
	select {
	case <-n.reset:
	case err := <-errc:
		t.Fatalf("ListenBindings returned before listening: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("ListenBindings did not start listening")
	}
	return n
}

// waitFor waits for a notification of chat, skipping others.
func (n *notifications) waitFor(t *testing.T, chat ids.ChatID) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case c := <-n.changed:
			if c == chat {
				return
			}
		case <-timeout:
			t.Fatalf("no NOTIFY for chat %s", chat)
		}
	}
}

// bindingOf returns the binding of chat to ws as store.BindingsForChat reports it.
func bindingOf(t *testing.T, st *store.Store, chat ids.ChatID, ws ids.WorkspaceID) (store.WorkspaceBinding, bool) {
	t.Helper()
	bs, err := st.BindingsForChat(context.Background(), chat)
	if err != nil {
		t.Fatalf("BindingsForChat(%s): %v", chat, err)
	}
	for _, b := range bs {
		if b.Workspace.ID == ws {
			return b, true
		}
	}
	return store.WorkspaceBinding{}, false
}

func mustIs(t *testing.T, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %v does not wrap %v", err, target)
		}
	}
}
