//go:build !unix

package reaper

import "os/exec"

func detach(*exec.Cmd) error { return ErrUnsupported }
