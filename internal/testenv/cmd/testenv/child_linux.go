package main

import (
	"os/exec"
	"runtime"
	"syscall"
)

// bindChild makes the kernel send SIGTERM to the command if testenv dies
// first (even by SIGKILL), so a test run never outlives the services it
// uses. Pdeathsig fires when the creating OS thread exits, so the caller's
// goroutine stays locked to its thread until the command has been waited for;
// the returned func releases it.
func bindChild(cmd *exec.Cmd) (release func()) {
	runtime.LockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	return runtime.UnlockOSThread
}
