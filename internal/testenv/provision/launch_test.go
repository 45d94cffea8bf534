package provision

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeServiceEnv makes the test binary a stand-in for a JVM service that launch
// (deploy/kafka/jvm-lib.sh) starts: "idle:<seconds>:<port>" waits without working,
// then listens; "spin" works without ever listening; "exit" ends at once.
const fakeServiceEnv = "LARKLINE_TEST_FAKE_SERVICE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServiceEnv); mode != "" {
		fakeService(mode)
		return
	}
	os.Exit(m.Run())
}

func fakeService(mode string) {
	switch f := strings.Split(mode, ":"); f[0] {
	case "idle":
		secs, _ := strconv.Atoi(f[1])
		// The scenario's input, not a wait before a check: a starved JVM spends wall
		// time without CPU time before it listens. The verdict is launch's exit
		// status and output, which the test waits for.
		time.Sleep(time.Duration(secs) * time.Second)
		l, err := net.Listen("tcp", "127.0.0.1:"+f[2])
		if err != nil {
			os.Exit(3)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(0)
			}
			c.Close()
		}
	case "spin":
		for n := 0; ; n++ {
			_ = n * n
		}
	default:
		os.Exit(0)
	}
}

// TestLaunchBoundsTheStartInCPUTime: launch gives a service <timeout> seconds of its
// own CPU time to listen, so a start the machine's load keeps waiting longer than
// that in wall time still succeeds, while one that works without listening fails,
// and one that exits is reported as such.
func TestLaunchBoundsTheStartInCPUTime(t *testing.T) {
	t.Parallel()
	root, err := repoRoot(Options{})
	if err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(root, "deploy", "kafka", "jvm-lib.sh")
	for _, c := range []struct {
		name, mode string
		timeout    int
		wantErr    string // "" for a start that listens
	}{
		{"idle longer than the bound in wall time", "idle:3:%d", 2, ""},
		{"working without listening", "spin", 1, "did not accept connections"},
		{"exiting", "exit", 5, "exited before"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ports, err := freePorts(1)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			mode := c.mode
			if strings.Contains(mode, "%d") {
				mode = strings.Replace(mode, "%d", strconv.Itoa(ports[0]), 1)
			}
			cmd := exec.Command("bash", "-c", `prog=launch-test; source "$1"; launch "$2" svc "$3" "$4" "$5"`,
				"bash", lib, dir, strconv.Itoa(ports[0]), strconv.Itoa(c.timeout), os.Args[0])
			cmd.Env = append(os.Environ(), fakeServiceEnv+"="+mode)
			t.Cleanup(func() { killRecorded(filepath.Join(dir, "svc.pid")) })
			out, err := cmd.CombinedOutput()
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("launch failed: %v\n%s", err, out)
			case c.wantErr == "" && !strings.Contains(string(out), "listening on 127.0.0.1:"+strconv.Itoa(ports[0])):
				t.Fatalf("launch succeeded without saying where it listens:\n%s", out)
			case c.wantErr != "" && (err == nil || !strings.Contains(string(out), c.wantErr)):
				t.Fatalf("launch = %v, want a failure saying %q:\n%s", err, c.wantErr, out)
			}
		})
	}
}

// killRecorded kills the process whose pid launch recorded, if it still runs.
func killRecorded(pidfile string) {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
