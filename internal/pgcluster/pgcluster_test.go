package pgcluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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

// TestServerEndsWithItsOwner kills the process that started a cluster without
// letting it call Stop (as SIGKILL or a crash would): the reaper stops the server,
// deletes a throwaway directory, and keeps a demo's data, which the next Start
// recovers.
func TestServerEndsWithItsOwner(t *testing.T) {
	for _, throwaway := range []bool{false, true} {
		t.Run(map[bool]string{false: "keeps_data", true: "throwaway"}[throwaway], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			dir, err := os.MkdirTemp("", "pgcluster-test-") // its parent must be world-searchable
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			owner := exec.Command("sleep", "600")
			if err := owner.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
			c, err := Start(ctx, Options{Dir: dir, Throwaway: throwaway, owner: owner.Process.Pid})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			t.Cleanup(func() { _ = c.Stop(context.Background()) })
			conn, err := pgx.Connect(ctx, c.DSN())
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			if _, err := conn.Exec(ctx, "create table t(x int); insert into t values (7)"); err != nil {
				t.Fatal(err)
			}
			_ = conn.Close(ctx)

			if err := owner.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(dir, "data", "postmaster.pid")
			for {
				if _, err := os.Stat(pidFile); errors.Is(err, os.ErrNotExist) {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatal("the server outlived the process that started it")
				case <-time.After(50 * time.Millisecond):
				}
			}
			if _, err := pgx.Connect(ctx, c.DSN()); err == nil {
				t.Fatal("the server still answers after its owner died")
			}
			_, err = os.Stat(dir)
			if throwaway {
				for !errors.Is(err, os.ErrNotExist) { // the reaper removes the directory after the server is down
					select {
					case <-ctx.Done():
						t.Fatalf("throwaway directory left behind: %v", err)
					case <-time.After(50 * time.Millisecond):
					}
					_, err = os.Stat(dir)
				}
				return
			}
			if err != nil {
				t.Fatalf("the data directory is gone: %v", err)
			}
			again, err := Start(ctx, Options{Dir: dir})
			if err != nil {
				t.Fatalf("restart after the owner died: %v", err)
			}
			defer func() { _ = again.Stop(context.Background()) }()
			conn, err = pgx.Connect(ctx, again.DSN())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close(context.Background()) }()
			var x int
			if err := conn.QueryRow(ctx, "select x from t").Scan(&x); err != nil || x != 7 {
				t.Fatalf("row after recovery = %d, %v; want 7", x, err)
			}
		})
	}
}

func TestAvailableRefusesWhatCannotRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Options
		want error
	}{
		{"bad bin dir", Options{Kind: KindLocal, BinDir: t.TempDir()}, ErrBadBinDir},
		{"unknown kind", Options{Kind: "docker"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Available(t.Context(), tt.o)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Available = %v, want an error wrapping %v", err, tt.want)
			}
		})
	}
	if os.Geteuid() == 0 {
		if err := Available(t.Context(), Options{Kind: KindEmbedded}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("embedded-postgres as root: %v, want ErrUnavailable", err)
		}
	}
}
