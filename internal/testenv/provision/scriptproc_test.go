package provision

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptProcStartNamesTheServiceLog: when a service the script started does not
// answer, Start's error carries the tail of the service's own log, so a run that
// failed under load says why (a registry that died after opening its port, say).
func TestScriptProcStartNamesTheServiceLog(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "svc.sh")
	// start <dir> <port>: "starts" by writing its log, as launch() does, and exits 0.
	body := "#!/bin/bash\nif [[ $1 == start ]]; then printf 'booting\\nH2 database locked\\n' >>\"$2/registry.log\"; fi\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	notReady := errors.New("schema registry did not answer")
	sp := &scriptProc{what: "registry", bash: bash, script: script, dir: dir, ports: []int{1},
		env: os.Environ(), ready: func(context.Context) error { return notReady }}
	err = sp.Start(context.Background())
	if !errors.Is(err, notReady) {
		t.Fatalf("Start = %v, want the readiness error", err)
	}
	if !strings.Contains(err.Error(), "H2 database locked") || !strings.Contains(err.Error(), "registry log") {
		t.Fatalf("Start's error does not carry the service's log tail: %v", err)
	}
	if got := logTail(filepath.Join(dir, "absent.log"), "broker"); !strings.Contains(got, "no broker log") {
		t.Fatalf("logTail of a missing file = %q", got)
	}
}
