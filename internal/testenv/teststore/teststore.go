package teststore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
)

// DB is a fresh, migrated database of the test's own.
type DB struct {
	DSN   string
	Pool  *pgxpool.Pool
	Store *store.Store
}

// Option changes how Open opens the database.
type Option func(*config)

type config struct {
	dsn      string
	maxConns int32
}

// MaxConns sets the pool's size (default 4).
func MaxConns(n int32) Option { return func(c *config) { c.maxConns = n } }

// DSN opens this database instead of a fresh one from testenv (for example one a
// test started and stops itself); it is migrated all the same.
func DSN(dsn string) Option { return func(c *config) { c.dsn = dsn } }

// Open opens a pool on a fresh database (or the one DSN names), applies the
// migrations and makes a store on it. The pool is closed at t's cleanup.
func Open(t testing.TB, opts ...Option) DB {
	t.Helper()
	c := config{maxConns: 4}
	for _, o := range opts {
		o(&c)
	}
	if c.dsn == "" {
		c.dsn = testenv.PostgresDSN(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := store.OpenPool(ctx, store.PoolConfig{DSN: c.dsn, MaxConns: c.maxConns})
	if err != nil {
		t.Fatalf("teststore: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("teststore: migrate: %v", err)
	}
	st, err := store.New(pool)
	if err != nil {
		t.Fatalf("teststore: new store: %v", err)
	}
	return DB{DSN: c.dsn, Pool: pool, Store: st}
}

// New is Open's store.
func New(t testing.TB, opts ...Option) *store.Store {
	t.Helper()
	return Open(t, opts...).Store
}
