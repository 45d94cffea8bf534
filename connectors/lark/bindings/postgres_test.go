package bindings

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newStore returns a store on a fresh, migrated database of the real Postgres.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	return teststore.New(t, teststore.MaxConns(6))
}

func upsertWorkspace(t *testing.T, st *store.Store, id ids.WorkspaceID, created time.Time) {
	t.Helper()
	w := store.Workspace{ID: id, Type: "incident", Status: store.WorkspaceFiring, CreatedAt: created}
	if _, err := st.UpsertWorkspace(context.Background(), w, 1); err != nil {
		t.Fatalf("upsert workspace %s: %v", id, err)
	}
}

// eventually polls Resolve until check accepts the resolution.
func eventually(t *testing.T, r *Resolver, chat ids.ChatID, what string, check func(Resolution) bool) {
	t.Helper()
	testenv.EventuallyNil(t, 15*time.Second, what, func() error {
		res, err := r.Resolve(context.Background(), chat, time.Now())
		if err == nil && !check(res) {
			err = fmt.Errorf("last resolution %+v", res)
		}
		return err
	})
}

func hasTargets(want ...ids.WorkspaceID) func(Resolution) bool {
	return func(r Resolution) bool { return slices.Equal(targets(r), want) }
}

// TestBindingChangesAreSeenWithoutRestart proves the cache follows NOTIFY: both TTLs
// are an hour, so nothing but a notification can make a change visible.
func TestBindingChangesAreSeenWithoutRestart(t *testing.T) {
	st := newStore(t)
	const chat = ids.ChatID("oc_runtime")
	created := time.Now().Add(-time.Hour)
	upsertWorkspace(t, st, "ws-1", created)
	upsertWorkspace(t, st, "ws-2", created)

	r, err := New(Options{Source: st, WorkspaceTypes: []string{"incident"}, CacheTTL: time.Hour, FallbackTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	runResolver(t, r)
	waitFor(t, "LISTEN established", r.Listening)

	ctx := context.Background()
	res, err := r.Resolve(ctx, chat, time.Now())
	if err != nil || res.Reason() != ReasonUnboundChat {
		t.Fatalf("before binding: %+v, %v", res, err)
	}

	steps := []struct {
		name   string
		change func() error
		check  func(Resolution) bool
	}{
		{"bind ws-1", func() error { _, err := st.BindChat(ctx, "ws-1", chat); return err }, hasTargets("ws-1")},
		{"bind ws-2 as well", func() error { _, err := st.BindChat(ctx, "ws-2", chat); return err }, hasTargets("ws-1", "ws-2")},
		{"ws-1 recovers", func() error { _, err := st.SetWorkspaceStatus(ctx, "ws-1", store.WorkspaceRecovered); return err },
			func(r Resolution) bool {
				return slices.Equal(targets(r), []ids.WorkspaceID{"ws-2"}) && len(r.Excluded) == 1 && r.Excluded[0].Reason == ReasonNotFiring
			}},
		{"unbind ws-2", func() error { _, err := st.UnbindChat(ctx, "ws-2", chat); return err },
			func(r Resolution) bool { return r.Reason() == ReasonNotFiring }},
		{"unbind ws-1", func() error { _, err := st.UnbindChat(ctx, "ws-1", chat); return err },
			func(r Resolution) bool { return r.Reason() == ReasonUnboundChat }},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		eventually(t, r, chat, s.name, s.check)
	}
}

// TestListenDropFallsBackAndReconnects kills the LISTEN session's backend: the
// resolver notices, reconnects, and changes are seen again.
func TestListenDropFallsBackAndReconnects(t *testing.T) {
	st := newStore(t)
	const chat = ids.ChatID("oc_dropped")
	upsertWorkspace(t, st, "ws-1", time.Now().Add(-time.Hour))

	r, err := New(Options{Source: st, WorkspaceTypes: []string{"incident"}, CacheTTL: time.Hour,
		FallbackTTL: 100 * time.Millisecond, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	runResolver(t, r)
	waitFor(t, "LISTEN established", r.Listening)
	eventually(t, r, chat, "unbound at first", func(res Resolution) bool { return res.Reason() == ReasonUnboundChat })

	ctx := context.Background()
	var killed int
	err = st.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = $1`, "LISTEN "+store.BindingsChannel).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminate the listening backend: killed %d, %v", killed, err)
	}
	waitFor(t, "drop noticed", func() bool { return testutil.ToFloat64(r.m.listenDrops) >= 1 })
	waitFor(t, "LISTEN re-established", r.Listening)

	if _, err := st.BindChat(ctx, "ws-1", chat); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, chat, "binding after reconnect", hasTargets("ws-1"))
}
