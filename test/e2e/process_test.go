package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/freeport"
	"github.com/larkline/larkline/internal/reaper"
)

// proc is one `larkline run --roles …` process under a supervisor that restarts it when
// it exits, unless the test holds it down.
type proc struct {
	t       testing.TB
	name    string
	roles   []string
	args    []string
	env     []string
	port    int
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}  // closed when the current cmd has exited
	reap    *reaper.Reaper // kills cmd's process group should this binary die first
	held    bool           // Kill: stay down until Start
	closed  bool
	starts  int
	wake    chan struct{}
	stopped chan struct{}
}

// larklineEnv is the test's environment without the jvm broker script's variables
// (LARKLINE_KAFKA_JARS, LARKLINE_KAFKA_HEAP, …) and the load benchmarks' knobs
// (LARKLINE_LOAD_OUTAGE, LARKLINE_LOAD_GRACE): larkline reads every LARKLINE_
// variable as configuration and refuses one that names no key, so a run with the jar
// cache moved, or a knob set, would fail before it started.
func larklineEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LARKLINE_KAFKA_") && !strings.HasPrefix(kv, "LARKLINE_KAFKA__") {
			continue
		}
		if strings.HasPrefix(kv, "LARKLINE_LOAD_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// freePort reserves a port on 127.0.0.1 for a process the test starts (and may
// restart on it) until the test ends (internal/freeport).
func freePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Reserve()
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	t.Cleanup(func() { _ = p.Release() })
	return p.Number()
}

func newProc(t testing.TB, name string, roles []string, args, env []string, dir string) *proc {
	p := &proc{
		t: t, name: name, roles: roles, args: args, env: env, port: freePort(t),
		logPath: filepath.Join(dir, name+".log"),
		wake:    make(chan struct{}, 1), stopped: make(chan struct{}),
	}
	return p
}

func (p *proc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// supervise starts the process and restarts it whenever it exits, with a short pause,
// until close; a held process waits for Start.
func (p *proc) supervise() {
	defer close(p.stopped)
	for {
		p.mu.Lock()
		for p.held && !p.closed {
			p.mu.Unlock()
			<-p.wake
			p.mu.Lock()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		cmd, exited, err := p.startLocked()
		reap := p.reap
		p.mu.Unlock()
		if err != nil {
			p.t.Errorf("%s: starting: %v", p.name, err)
			return
		}
		err = cmd.Wait()
		reap.Cancel() // before the pid can be reused
		close(exited)
		p.mu.Lock()
		closed, held := p.closed, p.held
		p.mu.Unlock()
		if closed {
			return
		}
		if !held {
			p.logf("process exited (%v); the supervisor restarts it", err)
			select {
			case <-time.After(500 * time.Millisecond):
			case <-p.wake:
			}
		}
	}
}

func (p *proc) startLocked() (*exec.Cmd, chan struct{}, error) {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	args := append([]string{"run", "--roles", strings.Join(p.roles, ",")}, p.args...)
	cmd := exec.Command(larklineBin, args...)
	cmd.Env = append(larklineEnv(), p.env...)
	cmd.Env = append(cmd.Env, "LARKLINE_HTTP__LISTEN="+p.addr(),
		"LARKLINE_HTTP__APILISTEN="+p.addr(), "LARKLINE_HTTP__WEBHOOKLISTEN="+p.addr()) // one listener per process
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, nil, err
	}
	f.Close() // the child holds its own descriptor
	// A test binary killed by a signal runs no cleanup: the reaper kills the
	// process group once this binary is gone, so no larkline outlives its test.
	reap, err := reaper.Start(`kill -KILL -"$1" 2>/dev/null`, strconv.Itoa(cmd.Process.Pid))
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, fmt.Errorf("starting the reaper of %s: %w", p.name, err)
	}
	p.cmd, p.exited, p.reap = cmd, make(chan struct{}), reap
	p.starts++
	return cmd, p.exited, nil
}

func (p *proc) logf(format string, a ...any) {
	p.t.Logf("%s %s: %s", time.Now().UTC().Format("15:04:05.000"), p.name, fmt.Sprintf(format, a...))
}

// Kill sends SIGKILL and keeps the process down until Start.
func (p *proc) Kill() { p.signal(syscall.SIGKILL, true) }

// Crash sends SIGKILL and lets the supervisor restart the process.
func (p *proc) Crash() { p.signal(syscall.SIGKILL, false) }

// Stop sends SIGTERM (the process drains) and keeps it down until Start.
func (p *proc) Stop() { p.signal(syscall.SIGTERM, true) }

func (p *proc) signal(sig syscall.Signal, hold bool) {
	p.mu.Lock()
	p.held = hold
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	p.logf("sending %v", sig)
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		p.t.Errorf("%s did not exit within 60s of %v", p.name, sig)
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Start lets a held process run again.
func (p *proc) Start() {
	p.mu.Lock()
	p.held = false
	p.mu.Unlock()
	p.logf("starting again")
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Restarts is how often the process was started beyond the first time.
func (p *proc) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.starts-1, 0)
}

// close stops the process for good (SIGTERM, then SIGKILL after 30 s).
func (p *proc) close() {
	p.mu.Lock()
	p.closed = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			p.t.Errorf("%s did not drain within 30s of SIGTERM", p.name)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	<-p.stopped
}

// ready waits until /readyz answers 200.
func (p *proc) ready(ctx context.Context) error {
	url := "http://" + p.addr() + "/readyz"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last: %v)", p.name, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// metric sums the samples of a metric family on the process's /metrics whose labels
// contain every given label="value" pair.
func (p *proc) metric(ctx context.Context, name string, labels ...string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				continue lines
			}
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// logTail is the last n lines of the process's log.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
