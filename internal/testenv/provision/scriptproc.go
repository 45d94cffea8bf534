package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/larkline/larkline/internal/reaper"
)

// scriptProc is a service run by one of deploy/kafka's scripts (`start <dir> <ports…>`,
// `stop <dir>`) on fixed loopback ports with its data in its own directory: Stop and
// Start restart it in place, Close stops it and removes the directory (a reaper does
// both if the test process dies first). It is safe for concurrent use.
type scriptProc struct {
	what              string // "broker", "registry": in errors
	bash, script, dir string
	ports             []int // the script's port arguments
	env               []string
	reap              *reaper.Reaper
	ready             func(ctx context.Context) error

	mu        sync.Mutex
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// startScriptProc prepares script (jarsEnv names its cache), takes nPorts free ports
// and a fresh directory, lets setup write what the service needs into the directory
// (it returns extra environment for the script and the readiness check), starts the
// service with the first args ports as the script's arguments and waits until ready
// answers.
func startScriptProc(ctx context.Context, o Options, what, script, jarsEnv string, nPorts, args int,
	setup func(dir string, ports []int) (env []string, ready func(context.Context) error, err error)) (*scriptProc, error) {
	bash, path, env, err := prepareScript(ctx, o, script, jarsEnv)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(nPorts)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "larkline-"+what+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the %s directory: %w", what, err)
	}
	more, ready, err := setup(dir, ports)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	reap, err := reaper.Start(`bash "$1" stop "$2" >/dev/null 2>&1; rm -rf "$2"`, path, dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	sp := &scriptProc{what: what, bash: bash, script: path, dir: dir, ports: ports[:args],
		env: append(env, more...), reap: reap, ready: ready}
	if err := sp.Start(ctx); err != nil {
		return nil, errors.Join(err, sp.Close(context.WithoutCancel(ctx)))
	}
	return sp, nil
}

// Start starts the service (again) and waits until it answers.
func (sp *scriptProc) Start(ctx context.Context) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return fmt.Errorf("provision: %s already closed", sp.what)
	}
	args := []string{sp.script, "start", sp.dir}
	for _, p := range sp.ports {
		args = append(args, strconv.Itoa(p))
	}
	cmd := exec.CommandContext(ctx, sp.bash, args...)
	cmd.Env = sp.env
	if _, err := runLogged(cmd); err != nil {
		return fmt.Errorf("starting the %s: %w", sp.what, err)
	}
	if err := sp.ready(ctx); err != nil {
		// The script saw the port open; the service's own log says what came after.
		return fmt.Errorf("%w\n%s", err, logTail(filepath.Join(sp.dir, sp.what+".log"), sp.what))
	}
	return nil
}

// logTailBytes bounds the log tail logTail reads.
const logTailBytes = 4 << 10

// logTail returns the last lines (at most logTailBytes) of a service's log, labelled,
// or says why it has none.
func logTail(path, what string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no %s log: %v)", what, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > logTailBytes {
		_, _ = f.Seek(-logTailBytes, io.SeekEnd)
	}
	b, err := io.ReadAll(io.LimitReader(f, logTailBytes))
	if err != nil {
		return fmt.Sprintf("(reading the %s log: %v)", what, err)
	}
	return fmt.Sprintf("last lines of the %s log (%s):\n%s", what, path, strings.TrimRight(string(b), "\n"))
}

// Stop stops the service and keeps its directory (and so its data) for Start.
func (sp *scriptProc) Stop(ctx context.Context) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.stopLocked(ctx)
}

func (sp *scriptProc) stopLocked(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, sp.bash, sp.script, "stop", sp.dir)
	cmd.Env = sp.env
	_, err := runLogged(cmd)
	return err
}

// Close stops the service and removes its directory. Later calls return the first
// call's result.
func (sp *scriptProc) Close(ctx context.Context) error {
	sp.closeOnce.Do(func() {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		sp.closed = true
		sp.closeErr = stopChain(sp.stopLocked, removeDir(sp.dir), cancelReaper(sp.reap))(ctx)
	})
	return sp.closeErr
}
