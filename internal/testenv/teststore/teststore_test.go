package teststore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/teststore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestOpenGivesAMigratedDatabaseOfItsOwn(t *testing.T) {
	ctx := context.Background()
	a := teststore.Open(t, teststore.MaxConns(2))
	b := teststore.Open(t)
	if a.DSN == b.DSN {
		t.Fatalf("two Opens share the database %s", a.DSN)
	}
	var n int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM workspace_timeline_evidence`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the evidence table of a fresh database: %d rows, %v", n, err)
	}
	if got := a.Pool.Config().MaxConns; got != 2 {
		t.Errorf("MaxConns(2) made a pool of %d", got)
	}
	if _, err := a.Store.GetWorkspace(ctx, "inc-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the store's answer for a workspace of an empty database: %v", err)
	}
	// DSN reopens a database; migrating it again is a no-op.
	c := teststore.Open(t, teststore.DSN(a.DSN))
	if c.DSN != a.DSN {
		t.Fatalf("DSN(%s) opened %s", a.DSN, c.DSN)
	}
}
