package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// prelude waits until the owner process ($1) is gone. A zombie owner (exited, not
// yet reaped by its parent) counts as gone.
const prelude = `owner=$1; shift
while kill -0 "$owner" 2>/dev/null; do
	if [ -r "/proc/$owner/stat" ]; then
		s=$(cat "/proc/$owner/stat" 2>/dev/null) || break
		case "${s##*) }" in Z*) break ;; esac
	fi
	sleep 1
done
`

// ErrUnsupported means this system has no Unix sessions: Start always fails.
var ErrUnsupported = errors.New("reaper: not supported on this system")

// Reaper is a detached shell that runs a cleanup script once its owner has exited.
type Reaper struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts a reaper for this process; cleanup is a sh script that sees args as
// $1, $2, ...
func Start(cleanup string, args ...string) (*Reaper, error) {
	return StartFor(os.Getpid(), cleanup, args...)
}

// StartFor starts a reaper that waits for the process owner.
func StartFor(owner int, cleanup string, args ...string) (*Reaper, error) {
	argv := append([]string{"-c", prelude + cleanup, "larkline-reaper", strconv.Itoa(owner)}, args...)
	cmd := exec.Command("/bin/sh", argv...)
	if err := detach(cmd); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("reaper: starting the cleanup shell: %w", err)
	}
	r := &Reaper{cmd: cmd, done: make(chan struct{})}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	return r, nil
}

// Done is closed when the reaper has exited: its cleanup ran, or Cancel killed it.
func (r *Reaper) Done() <-chan struct{} { return r.done }

// Err is the reaper's exit error once Done is closed (nil when the cleanup ran
// and succeeded).
func (r *Reaper) Err() error {
	<-r.done
	return r.err
}

// Cancel stops the reaper without running its cleanup (the owner cleaned up) and
// waits for it. Nil-safe.
func (r *Reaper) Cancel() {
	if r == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}
