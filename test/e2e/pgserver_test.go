package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pgServer is a private PostgreSQL cluster of one test, made with the machine's initdb
// and run with pg_ctl (as the postgres user when the test runs as root, since initdb
// refuses root), which the test can stop and start again with its data: the chaos
// run's "restart Postgres" fault. The harness's shared server cannot be restarted
// under the other tests' feet.
//
// Unlike the harness's throwaway clusters it keeps synchronous_commit on: an immediate
// shutdown (a crash) must not lose a transaction the sink already committed, or the
// run would blame the pipeline for what the test configuration threw away. fsync stays
// off: the machine does not crash, only the server.
type pgServer struct {
	t          testing.TB
	bin, dir   string
	data, log  string
	port       int
	credential *syscall.Credential
}

// startPGServer makes and starts the cluster; it is stopped and removed at cleanup.
func startPGServer(t testing.TB) *pgServer {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		t.Fatalf("a private PostgreSQL for the restart fault: %v", err)
	}
	dir, err := os.MkdirTemp("", "larkline-e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &pgServer{t: t, bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log"), port: freePort(t)}
	t.Cleanup(func() {
		_ = s.pgctl("stop", "-D", s.data, "-m", "immediate", "-w", "-t", "30")
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the private PostgreSQL needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := s.run("initdb", "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.start()
	return s
}

// pgBinDir finds initdb and pg_ctl as the harness does: LARKLINE_TEST_PG_BIN, else the
// newest /usr/lib/postgresql/<version>/bin, else initdb on PATH.
func pgBinDir() (string, error) {
	has := func(dir string) bool {
		for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, tool)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("LARKLINE_TEST_PG_BIN"); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("LARKLINE_TEST_PG_BIN=%s holds no initdb and pg_ctl", dir)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl) found; set LARKLINE_TEST_PG_BIN")
}

func (s *pgServer) run(tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, tool), args...)
	cmd.Dir = s.dir
	if s.credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.credential}
	}
	return cmd.CombinedOutput()
}

func (s *pgServer) pgctl(args ...string) error {
	out, err := s.run("pg_ctl", args...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// dsn is the cluster's postgres database.
func (s *pgServer) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

func (s *pgServer) start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200", s.port, s.dir)
	if err := s.pgctl("start", "-D", s.data, "-l", s.log, "-w", "-t", "60", "-o", opts); err != nil {
		b, _ := os.ReadFile(s.log)
		s.t.Fatalf("%v\nserver log:\n%s", err, tailLines(string(b), 30))
	}
}

// stop stops the server: "immediate" is a crash (no checkpoint; recovery replays the
// WAL at the next start), "fast" a clean shutdown that aborts open transactions.
func (s *pgServer) stop(mode string) {
	s.t.Helper()
	if err := s.pgctl("stop", "-D", s.data, "-m", mode, "-w", "-t", "60"); err != nil {
		s.t.Fatal(err)
	}
}

// restart stops the server in mode, keeps it down for down, and starts it again.
func (s *pgServer) restart(mode string, down time.Duration) {
	s.t.Helper()
	s.stop(mode)
	timer := time.NewTimer(down)
	<-timer.C
	s.start()
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
