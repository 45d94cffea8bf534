//go:build !unix

package provision

import (
	"os/exec"
	"runtime"
)

// On systems without Unix sessions and credentials, only provided (external)
// services and in-process ones can be used; starting a helper process fails
// with ErrUnavailable.

func detach(*exec.Cmd) {}

type userID struct{}

func runAs(*exec.Cmd, *userID) {}

func unprivilegedUser() (*userID, error) {
	return nil, unavailable("starting local services is not supported on %s", runtime.GOOS)
}

func chownTo(string, *userID) error { return nil }
