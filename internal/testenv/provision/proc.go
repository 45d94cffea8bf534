package provision

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/larkline/larkline/internal/freeport"
	"github.com/larkline/larkline/internal/reaper"
)

// modulePath identifies the larkline checkout when looking for the repo root.
const modulePath = "github.com/larkline/larkline"

// freePorts reserves n distinct free TCP ports on 127.0.0.1 for a service this
// process starts (internal/freeport: outside the kernel's ephemeral range, locked
// against every other larkline process). They stay reserved until this process
// exits, so no other test binary is handed them while the service may restart.
func freePorts(n int) ([]int, error) {
	reserved, err := freeport.ReserveN(n)
	if err != nil {
		return nil, fmt.Errorf("reserving a free port: %w", err)
	}
	ports := make([]int, n)
	for i, p := range reserved {
		ports[i] = p.Number()
	}
	return ports, nil
}

// repoRoot finds the larkline checkout: Options.RepoRoot, else the first
// directory up from the working directory whose go.mod declares the larkline
// module, else the one holding this source file.
func repoRoot(o Options) (string, error) {
	if o.RepoRoot != "" {
		return o.RepoRoot, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if isLarklineRoot(dir) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", unavailable("cannot find the larkline checkout (go.mod of %s) above the working directory", modulePath)
}

func isLarklineRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath
		}
	}
	return false
}

// runLogged runs cmd, returning its combined output in the error on failure.
func runLogged(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, tail(out.String(), 60))
	}
	return out.Bytes(), nil
}

// tail keeps the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stopChain runs the steps in order, all of them, and joins their errors.
func stopChain(steps ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, step := range steps {
			errs = append(errs, step(ctx))
		}
		return errors.Join(errs...)
	}
}

// removeDir is a stop step that deletes a service's temporary directory.
func removeDir(dir string) func(context.Context) error {
	return func(context.Context) error {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing %s: %w", dir, err)
		}
		return nil
	}
}

// cancelReaper is a stop step that retires a reaper after a clean stop.
func cancelReaper(r *reaper.Reaper) func(context.Context) error {
	return func(context.Context) error {
		r.Cancel()
		return nil
	}
}
