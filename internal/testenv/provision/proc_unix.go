//go:build unix

package provision

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// detach puts cmd in its own session, so a terminal's Ctrl-C (sent to the
// foreground process group) reaches the owner, which stops services in order,
// and not the helper directly.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// runAs makes cmd run as the given user (nil: the current user).
func runAs(cmd *exec.Cmd, id *userID) {
	if id == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: []uint32{}}
}

// userID is a user to drop privileges to.
type userID struct {
	name     string
	uid, gid uint32
}

// unprivilegedUser returns the user that PostgreSQL's tools must run as:
// nil when the caller is not root, otherwise the "postgres" user (initdb and
// postgres refuse to run as root).
func unprivilegedUser() (*userID, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, unavailable("running as root, and initdb refuses root, but there is no \"postgres\" user to run it as: %v", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user postgres has a non-numeric uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user postgres has a non-numeric gid %q: %w", u.Gid, err)
	}
	return &userID{name: u.Username, uid: uint32(uid), gid: uint32(gid)}, nil
}

// chownTo hands path to the user (no-op for nil).
func chownTo(path string, id *userID) error {
	if id == nil {
		return nil
	}
	if err := os.Chown(path, int(id.uid), int(id.gid)); err != nil {
		return fmt.Errorf("handing %s to user %s: %w", path, id.name, err)
	}
	return nil
}
