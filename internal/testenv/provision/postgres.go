package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"
	"github.com/jackc/pgx/v5"
)

const (
	postgresReadyTimeout = 60 * time.Second
	postgresStartTimeout = 60 // seconds, pg_ctl -t
	postgresStopTimeout  = 30 // seconds, pg_ctl -t
)

// postgresServerSettings apply to the throwaway clusters started here: a test
// cluster needs no durability, and parallel tests each hold a few connections.
var postgresServerSettings = []string{
	"listen_addresses=127.0.0.1",
	"fsync=off",
	"synchronous_commit=off",
	"full_page_writes=off",
	"max_connections=200",
}

// postgresReaperCleanup, run by a reaper with the service directory as $1,
// stops a cluster whose data directory is $1/data (immediate shutdown, bounded
// wait) and removes $1.
const postgresReaperCleanup = `pidfile="$1/data/postmaster.pid"
if [ -r "$pidfile" ]; then
	pid=$(head -n 1 "$pidfile")
	[ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null
	i=0
	while [ -e "$pidfile" ] && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
fi
rm -rf "$1"
`

// postgresReady waits until the DSN accepts a connection and answers a query.
func postgresReady(ctx context.Context, s *Service) error {
	ctx, cancel := context.WithTimeout(ctx, postgresReadyTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(s.Endpoint)
	if err != nil {
		return fmt.Errorf("%w: parsing the PostgreSQL DSN: %v", ErrBadEnv, err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	for {
		err = pingPostgres(ctx, cfg)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres at %s did not answer within %s: %w", RedactDSN(s.Endpoint), postgresReadyTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func pingPostgres(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// postgresBinDir finds a directory holding initdb and pg_ctl:
// LARKLINE_TEST_PG_BIN, else `pg_config --bindir`, else the newest
// /usr/lib/postgresql/<version>/bin, else the directory of initdb on PATH.
func postgresBinDir(ctx context.Context, o Options) (string, error) {
	if dir := o.getenv(EnvPGBin); dir != "" {
		if !hasPostgresTools(dir) {
			return "", fmt.Errorf("%w: %s=%s holds no initdb and pg_ctl", ErrBadEnv, EnvPGBin, dir)
		}
		return dir, nil
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output(); err == nil {
			if dir := strings.TrimSpace(string(out)); hasPostgresTools(dir) {
				return dir, nil
			}
		}
	}
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		version := func(d string) int {
			v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return v
		}
		slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
		for _, dir := range dirs {
			if hasPostgresTools(dir) {
				return dir, nil
			}
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(initdb); err == nil && hasPostgresTools(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
	}
	return "", unavailable("no PostgreSQL server binaries (initdb, pg_ctl) found; set %s", EnvPGBin)
}

func hasPostgresTools(dir string) bool {
	for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, tool)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// startPostgresLocal makes a throwaway cluster with the machine's initdb and
// starts it with pg_ctl on a free port, as the "postgres" user when root.
func startPostgresLocal(ctx context.Context, o Options) (*Service, error) {
	bin, err := postgresBinDir(ctx, o)
	if err != nil {
		return nil, err
	}
	owner, err := unprivilegedUser()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ports[0])
	dir, err := os.MkdirTemp("", "larkline-pg-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster directory: %w", err)
	}
	if err := chownTo(dir, owner); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	data := filepath.Join(dir, "data")
	logFile := filepath.Join(dir, "postgres.log")
	reap, err := startReaper(postgresReaperCleanup, dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	pgCommand := func(ctx context.Context, tool string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, tool), args...)
		cmd.Dir = dir // the caller's working directory may be closed to the postgres user
		runAs(cmd, owner)
		return cmd
	}
	stopCluster := func(ctx context.Context) error {
		if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
			return nil // never started, or already stopped
		}
		_, err := runLogged(pgCommand(ctx, "pg_ctl", "stop", "-D", data, "-m", "fast", "-w", "-t", strconv.Itoa(postgresStopTimeout)))
		return err
	}
	stop := stopChain(stopCluster, removeDir(dir), cancelReaper(reap))

	if _, err := runLogged(pgCommand(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync")); err != nil {
		return nil, errors.Join(fmt.Errorf("initdb: %w", err), stop(context.WithoutCancel(ctx)))
	}
	opts := "-p " + port + " -k " + dir
	for _, s := range postgresServerSettings {
		opts += " -c " + s
	}
	if _, err := runLogged(pgCommand(ctx, "pg_ctl", "start", "-D", data, "-l", logFile, "-w",
		"-t", strconv.Itoa(postgresStartTimeout), "-o", opts)); err != nil {
		serverLog, _ := os.ReadFile(logFile)
		return nil, errors.Join(fmt.Errorf("pg_ctl start: %w\nserver log:\n%s", err, tail(string(serverLog), 30)),
			stop(context.WithoutCancel(ctx)))
	}
	dsn := "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
	return newService(postgresSpec, KindLocal, dsn, stop), nil
}

// startPostgresEmbedded starts PostgreSQL from the binaries that
// embedded-postgres downloads (and caches in ~/.embedded-postgres-go). It
// runs initdb as the current user, so it is unavailable to root. Its start is
// bounded by its own timeouts rather than ctx.
func startPostgresEmbedded(ctx context.Context, _ Options) (*Service, error) {
	if os.Geteuid() == 0 {
		return nil, unavailable("embedded-postgres runs initdb as the current user, and initdb refuses root")
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "larkline-pg-embedded-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster directory: %w", err)
	}
	reap, err := startReaper(postgresReaperCleanup, dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	runtimeDir := filepath.Join(dir, "runtime")
	params := map[string]string{"unix_socket_directories": runtimeDir}
	for _, s := range postgresServerSettings {
		k, v, _ := strings.Cut(s, "=")
		params[k] = v
	}
	var serverLog bytes.Buffer
	ep := embeddedpostgres.NewDatabase(embeddedpostgres.DefaultConfig().
		Version(embeddedpostgres.V15).
		Port(uint32(ports[0])).
		Username("postgres").
		Password("postgres").
		Database("postgres").
		RuntimePath(runtimeDir).
		DataPath(filepath.Join(dir, "data")).
		StartParameters(params).
		StartTimeout(postgresStartTimeout * time.Second).
		Logger(&serverLog))
	started := false
	stopServer := func(context.Context) error {
		if !started {
			return nil
		}
		return ep.Stop()
	}
	stop := stopChain(stopServer, removeDir(dir), cancelReaper(reap))
	if err := ep.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("embedded-postgres: %w\n%s", err, tail(serverLog.String(), 30)),
			stop(context.WithoutCancel(ctx)))
	}
	started = true
	dsn := "postgres://postgres:postgres@127.0.0.1:" + strconv.Itoa(ports[0]) + "/postgres?sslmode=disable"
	return newService(postgresSpec, KindEmbedded, dsn, stop), nil
}
