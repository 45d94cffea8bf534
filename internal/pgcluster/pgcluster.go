package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"

	"github.com/larkline/larkline/internal/freeport"
)

// ErrUnavailable means no way to run PostgreSQL was found on this machine.
var ErrUnavailable = errors.New("pgcluster: no PostgreSQL server available")

// Options configure Start.
type Options struct {
	// Dir holds the cluster (Dir/data) and its log; created if missing. A Dir that
	// already holds a cluster is started again, keeping its data. Required.
	Dir string
	// BinDir holds initdb and pg_ctl. Empty: pg_config --bindir, then the newest
	// /usr/lib/postgresql/*/bin; without either, embedded-postgres.
	BinDir string
	// Port to listen on; 0 picks a free one.
	Port int
	// Logger receives progress lines. Nil discards.
	Logger *slog.Logger
}

// Cluster is a running server.
type Cluster struct {
	dsn  string
	stop func(context.Context) error
	Kind string // "local" or "embedded"
}

// DSN of the postgres database as the postgres superuser.
func (c *Cluster) DSN() string { return c.dsn }

// Stop shuts the server down (fast mode) and waits for it, bounded by ctx.
func (c *Cluster) Stop(ctx context.Context) error { return c.stop(ctx) }

var settings = []string{"listen_addresses=127.0.0.1", "fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=100"}

// Start runs a cluster in o.Dir.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Dir == "" {
		return nil, errors.New("pgcluster: Dir is required")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: creating %s: %w", dir, err)
	}
	port := o.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	bin := o.BinDir
	if bin == "" {
		bin = findBinDir(ctx)
	}
	if bin != "" {
		log.Info("starting PostgreSQL from local binaries", "bin", bin, "port", port)
		return startLocal(ctx, dir, bin, port)
	}
	log.Info("no local PostgreSQL binaries; starting embedded-postgres (fetches binaries once)", "port", port)
	return startEmbedded(dir, port)
}

func hasTools(dir string) bool {
	for _, t := range []string{"initdb", "pg_ctl", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, t)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

func findBinDir(ctx context.Context) string {
	if p, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.CommandContext(ctx, p, "--bindir").Output(); err == nil {
			if d := strings.TrimSpace(string(out)); hasTools(d) {
				return d
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(d string) int { v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return v }
	slices.SortFunc(dirs, func(a, b string) int { return major(b) - major(a) })
	for _, d := range dirs {
		if hasTools(d) {
			return d
		}
	}
	return ""
}

// freePort reserves a port for the cluster for the life of this process
// (internal/freeport), so nothing takes it between the choice and the bind.
func freePort() (int, error) {
	p, err := freeport.Reserve()
	if err != nil {
		return 0, fmt.Errorf("pgcluster: reserving a port: %w", err)
	}
	return p.Number(), nil
}

// owner is the user the server tools run as: nil unless we are root.
func owner() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root, initdb refuses root, and there is no postgres user: %v", ErrUnavailable, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgcluster: postgres user ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func startLocal(ctx context.Context, dir, bin string, port int) (*Cluster, error) {
	cred, err := owner()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := traversable(filepath.Dir(dir)); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgcluster: handing %s to postgres: %w", dir, err)
		}
	}
	data, logFile := filepath.Join(dir, "data"), filepath.Join(dir, "postgres.log")
	run := func(ctx context.Context, tool string, args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, tool), args...)
		cmd.Dir = dir
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pgcluster: %s: %w: %s", tool, err, strings.TrimSpace(out.String()))
		}
		return nil
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if err := run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
			return nil, err
		}
	}
	opts := "-p " + strconv.Itoa(port) + " -k " + dir
	for _, s := range settings {
		opts += " -c " + s
	}
	if err := run(ctx, "pg_ctl", "start", "-D", data, "-l", logFile, "-w", "-t", "60", "-o", opts); err != nil {
		return nil, err
	}
	stop := func(ctx context.Context) error {
		if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
			return nil
		}
		return run(ctx, "pg_ctl", "stop", "-D", data, "-m", "fast", "-w", "-t", "30")
	}
	return &Cluster{dsn: dsn(port), stop: stop, Kind: "local"}, nil
}

func startEmbedded(dir string, port int) (*Cluster, error) {
	if os.Geteuid() == 0 {
		return nil, fmt.Errorf("%w: embedded-postgres runs initdb as the current user, which initdb refuses for root; install the PostgreSQL server package", ErrUnavailable)
	}
	pg := embeddedpostgres.NewDatabase(embeddedpostgres.DefaultConfig().
		Port(uint32(port)).
		DataPath(filepath.Join(dir, "data")).
		RuntimePath(filepath.Join(dir, "runtime")).
		BinariesPath(filepath.Join(dir, "binaries")).
		StartTimeout(2 * time.Minute).
		Logger(nil))
	if err := pg.Start(); err != nil {
		return nil, fmt.Errorf("%w: embedded-postgres: %v", ErrUnavailable, err)
	}
	return &Cluster{dsn: dsn(port), stop: func(context.Context) error { return pg.Stop() }, Kind: "embedded"}, nil
}

func dsn(port int) string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
}

// traversable checks that the postgres user can reach a directory below dir: every
// ancestor must be searchable by others (the server runs as postgres, not root).
func traversable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%w: the postgres user cannot enter %s (mode %v); choose a data directory under a world-searchable path such as /tmp or /var/tmp",
				ErrUnavailable, d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
