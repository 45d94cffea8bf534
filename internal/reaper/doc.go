// Package reaper runs a cleanup script once a process has exited, however it
// exited: a detached shell waits for the owner and then runs the script. It keeps
// servers that larkline starts in other processes (the demo's PostgreSQL, the test
// harness's broker, PostgreSQL and registry) from outliving a process killed before
// it could stop them (SIGKILL, go test -timeout). Unix only; elsewhere Start fails.
package reaper
