package reaper

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestCleanupRunsWhenOwnerDies(t *testing.T) {
	owner := exec.Command("sleep", "600")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = owner.Process.Kill()
		_ = owner.Wait()
	})
	marker := filepath.Join(t.TempDir(), "cleaned")
	r, err := StartFor(owner.Process.Pid, `echo done > "$1"`, marker)
	if err != nil {
		t.Fatal(err)
	}
	// Kill the owner without reaping it: the reaper must treat the zombie as gone.
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
		if err := r.Err(); err != nil {
			t.Fatalf("reaper: %v", err)
		}
	case <-time.After(time.Minute): // a bound against hanging, not a speed check
		r.Cancel()
		t.Fatal("the reaper never noticed its owner had died")
	}
	got, err := os.ReadFile(marker)
	if err != nil || string(got) != "done\n" {
		t.Fatalf("cleanup did not run: %q, %v", got, err)
	}
}

func TestCancelSkipsCleanup(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "cleaned")
	r, err := Start(`echo done > "$1"`, marker)
	if err != nil {
		t.Fatal(err)
	}
	r.Cancel()
	if r.Err() == nil {
		t.Fatal("reaper exited cleanly after Cancel, want killed")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cleanup ran after cancel: %v", err)
	}
	var nilReaper *Reaper
	nilReaper.Cancel() // nil-safe
}
