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
	"github.com/larkline/larkline/internal/reaper"
)

// Sentinels.
var (
	// ErrUnavailable means this machine cannot run the PostgreSQL asked for: no
	// server binaries, root without a postgres user, embedded-postgres as root.
	ErrUnavailable = errors.New("pgcluster: no PostgreSQL server available")
	// ErrBadBinDir means Options.BinDir holds no initdb, pg_ctl and postgres.
	ErrBadBinDir = errors.New("pgcluster: BinDir holds no PostgreSQL server binaries")
)

// Kind is how the server runs.
type Kind string

const (
	// KindLocal runs the machine's initdb and pg_ctl.
	KindLocal Kind = "local"
	// KindEmbedded runs the binaries embedded-postgres fetches from Maven Central
	// once (cached in ~/.embedded-postgres-go); initdb refuses root, so root cannot.
	KindEmbedded Kind = "embedded"
)

// Options configure Start.
type Options struct {
	// Dir holds the cluster (Dir/data) and its log; created if missing. A Dir that
	// already holds a cluster is started again, keeping its data. Required.
	Dir string
	// Kind is KindLocal or KindEmbedded; empty takes local binaries when there are
	// some and embedded-postgres otherwise.
	Kind Kind
	// BinDir holds initdb and pg_ctl. Empty: pg_config --bindir, then the newest
	// /usr/lib/postgresql/*/bin, then the directory of initdb on PATH.
	BinDir string
	// Port to listen on; 0 reserves a free one (internal/freeport).
	Port int
	// Throwaway makes Stop, and the reaper when this process dies first, delete Dir.
	Throwaway bool
	// Logger receives progress lines. Nil discards.
	Logger *slog.Logger

	owner int // the process whose death stops the server; 0 is this one (tests set it)
}

// Cluster is a running server. Whatever way this process ends, the server ends
// with it: Stop, or a reaper that stops it (and deletes a throwaway Dir) once the
// process has died without calling Stop.
type Cluster struct {
	// Kind is how the server runs.
	Kind Kind
	dsn  string
	stop func(context.Context) error
}

// DSN of the postgres database as the postgres superuser.
func (c *Cluster) DSN() string { return c.dsn }

// Stop shuts the server down (fast mode) and waits for it, bounded by ctx.
func (c *Cluster) Stop(ctx context.Context) error { return c.stop(ctx) }

// settings relax durability (the data is the demo's or a test's) and allow the
// connections of parallel tests.
var settings = []string{"listen_addresses=127.0.0.1", "fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=200"}

const (
	startTimeout = 60 // seconds, pg_ctl -t
	stopTimeout  = 30 // seconds, pg_ctl -t
)

// reapScript stops the server whose data directory is $1/data and removes $1 when
// $2 is "remove". A fast shutdown (SIGINT) ends with a checkpoint, so every
// committed row survives even with synchronous_commit off; an immediate one
// (SIGQUIT) follows only if the fast one did not finish within 30 s.
const reapScript = `dir="$1"; mode="$2"; pidfile="$dir/data/postmaster.pid"
stop() {
	[ -r "$pidfile" ] || return 0
	pid=$(head -n 1 "$pidfile")
	[ -n "$pid" ] && kill -"$1" "$pid" 2>/dev/null
	i=0
	while [ -e "$pidfile" ] && [ "$i" -lt "$2" ]; do sleep 0.1; i=$((i + 1)); done
}
stop INT 300
stop QUIT 100
[ "$mode" = remove ] && rm -rf "$dir"
exit 0
`

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
	kind, bin, err := resolve(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: creating %s: %w", dir, err)
	}
	port := o.Port
	if port == 0 {
		p, err := freeport.Reserve() // held for this process's life: nothing takes it before the bind
		if err != nil {
			return nil, fmt.Errorf("pgcluster: reserving a port: %w", err)
		}
		port = p.Number()
	}
	remove := "keep"
	if o.Throwaway {
		remove = "remove"
	}
	owner := o.owner
	if owner == 0 {
		owner = os.Getpid()
	}
	reap, err := reaper.StartFor(owner, reapScript, dir, remove)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	var c *Cluster
	if kind == KindLocal {
		log.Info("starting PostgreSQL from local binaries", "bin", bin, "port", port)
		c, err = startLocal(ctx, dir, bin, port)
	} else {
		log.Info("starting embedded-postgres (fetches binaries once)", "port", port)
		c, err = startEmbedded(dir, port)
	}
	stopServer := func(ctx context.Context) error { return nil }
	if c != nil {
		stopServer = c.stop
	}
	stop := func(ctx context.Context) error {
		err := stopServer(ctx)
		if o.Throwaway {
			if rerr := os.RemoveAll(dir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("pgcluster: removing %s: %w", dir, rerr))
			}
		}
		reap.Cancel()
		return err
	}
	if err != nil {
		return nil, errors.Join(err, stop(context.WithoutCancel(ctx)))
	}
	c.stop = stop
	return c, nil
}

// Available tells whether Start could run a cluster of o's Kind and BinDir on this
// machine, without starting one: nil, or an error wrapping ErrUnavailable or
// ErrBadBinDir.
func Available(ctx context.Context, o Options) error {
	_, _, err := resolve(ctx, o)
	return err
}

// resolve picks the kind and the binaries directory Start uses.
func resolve(ctx context.Context, o Options) (Kind, string, error) {
	if o.Kind != "" && o.Kind != KindLocal && o.Kind != KindEmbedded {
		return "", "", fmt.Errorf("pgcluster: Kind %q is neither %q nor %q", o.Kind, KindLocal, KindEmbedded)
	}
	bin := o.BinDir
	switch {
	case bin != "" && !hasTools(bin):
		return "", "", fmt.Errorf("%w: %s", ErrBadBinDir, bin)
	case bin == "" && o.Kind != KindEmbedded:
		bin = findBinDir(ctx)
	}
	kind := o.Kind
	if kind == "" {
		kind = KindEmbedded
		if bin != "" {
			kind = KindLocal
		}
	}
	switch {
	case kind == KindLocal && bin == "":
		return "", "", fmt.Errorf("%w: no PostgreSQL server binaries (initdb, pg_ctl) found; name their directory", ErrUnavailable)
	case kind == KindLocal:
		if _, err := owner(); err != nil {
			return "", "", err
		}
	case os.Geteuid() == 0:
		return "", "", fmt.Errorf("%w: embedded-postgres runs initdb as the current user, which initdb refuses for root; install the PostgreSQL server package", ErrUnavailable)
	}
	return kind, bin, nil
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
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(initdb); err == nil && hasTools(filepath.Dir(real)) {
			return filepath.Dir(real)
		}
	}
	return ""
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
		cmd.Dir = dir // the caller's working directory may be closed to the postgres user
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pgcluster: %s: %w: %s", tool, err, tail(out.String(), 30))
		}
		return nil
	}
	stop := func(ctx context.Context) error {
		if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
			return nil // never started, or already stopped
		}
		return run(ctx, "pg_ctl", "stop", "-D", data, "-m", "fast", "-w", "-t", strconv.Itoa(stopTimeout))
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
	if err := run(ctx, "pg_ctl", "start", "-D", data, "-l", logFile, "-w", "-t", strconv.Itoa(startTimeout), "-o", opts); err != nil {
		serverLog, _ := os.ReadFile(logFile)
		return &Cluster{stop: stop}, fmt.Errorf("%w\nserver log:\n%s", err, tail(string(serverLog), 30))
	}
	return &Cluster{Kind: KindLocal, dsn: dsn("postgres", port), stop: stop}, nil
}

func startEmbedded(dir string, port int) (*Cluster, error) {
	runtimeDir := filepath.Join(dir, "runtime")
	params := map[string]string{"unix_socket_directories": runtimeDir}
	for _, s := range settings {
		k, v, _ := strings.Cut(s, "=")
		params[k] = v
	}
	var serverLog bytes.Buffer
	pg := embeddedpostgres.NewDatabase(embeddedpostgres.DefaultConfig().
		Version(embeddedpostgres.V15).
		Port(uint32(port)).
		Username("postgres").
		Password("postgres").
		Database("postgres").
		DataPath(filepath.Join(dir, "data")).
		RuntimePath(runtimeDir).
		StartParameters(params).
		StartTimeout(startTimeout * time.Second).
		Logger(&serverLog))
	if err := pg.Start(); err != nil {
		return nil, fmt.Errorf("%w: embedded-postgres: %v\n%s", ErrUnavailable, err, tail(serverLog.String(), 30))
	}
	return &Cluster{Kind: KindEmbedded, dsn: dsn("postgres:postgres", port), stop: func(context.Context) error { return pg.Stop() }}, nil
}

func dsn(userinfo string, port int) string {
	return "postgres://" + userinfo + "@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
}

// tail keeps the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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
