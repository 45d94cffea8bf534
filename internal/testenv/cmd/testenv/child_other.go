//go:build !linux

package main

import "os/exec"

// bindChild is a no-op where the kernel offers no parent-death signal; there
// a command can outlive a testenv killed by SIGKILL.
func bindChild(*exec.Cmd) (release func()) { return func() {} }
