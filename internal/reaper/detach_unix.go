//go:build unix

package reaper

import (
	"os/exec"
	"syscall"
)

// detach puts cmd in its own session, so a terminal's Ctrl-C (sent to the
// foreground process group) reaches the owner, which stops its services in order,
// and not the reaper.
func detach(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return nil
}
