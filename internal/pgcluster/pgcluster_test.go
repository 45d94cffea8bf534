package pgcluster

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStartStopRestart starts a real cluster, writes a row, stops it, starts the same
// directory again and finds the row: the demo's data directory survives a restart.
func TestStartStopRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// not t.TempDir(): its parent is private to root, and the server runs as postgres
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	exec := func(c *Cluster, sql string) pgx.Rows {
		conn, err := pgx.Connect(ctx, c.DSN())
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return rows
	}
	exec(c, "create table t(x int)").Close()
	exec(c, "insert into t values (42)").Close()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	c2, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer func() { _ = c2.Stop(context.Background()) }()
	var x int
	rows := exec(c2, "select x from t")
	for rows.Next() {
		if err := rows.Scan(&x); err != nil {
			t.Fatal(err)
		}
	}
	rows.Close()
	if x != 42 {
		t.Fatalf("row lost across restart: %d", x)
	}
}

func TestUnreachableDirIsAClearError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: the server runs as this user, so any directory it owns works")
		return
	}
	private := t.TempDir() // mode 0700, owned by root
	_, err := Start(context.Background(), Options{Dir: private + "/pg"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable naming the directory, got %v", err)
	}
}

func TestStartRequiresDir(t *testing.T) {
	if _, err := Start(context.Background(), Options{}); err == nil {
		t.Fatal("started without a directory")
	}
}
