package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/larkline/larkline/schemas/ids"
)

// TestConfigCheck: `config check` prints the effective configuration with every
// secret masked and exits 0; a file with problems exits 1 naming each of them; a
// --require key that is empty is a problem too.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "app-secret")
	const secret = "s3cr3t-app-secret-value"
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "lark:\n  appID: cli_a\n  appSecretFile: "+secretFile+"\npostgres:\n  dsn: postgres://u:pgpassword@db/larkline?sslmode=require\n")
	bad := write("bad.yaml", "kafka:\n  partitions: 0\n  producer:\n    acks: some\n")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		inStdout []string
		inStderr []string
	}{
		{"valid, secrets masked", []string{"config", "check", "--config", good}, 0,
			[]string{"appID: cli_a", `appSecret: "" # redacted`, `dsn: "" # redacted`}, nil},
		{"problems named", []string{"config", "check", "--config", bad}, 1,
			nil, []string{"kafka.partitions", "kafka.producer.acks"}},
		{"required key missing", []string{"config", "check", "--config", bad, "--require", "postgres.dsn"}, 1,
			nil, []string{"kafka.partitions"}},
		{"required key empty", []string{"config", "check", "--config", good, "--require", "kafka.sasl.username"}, 1,
			nil, []string{"kafka.sasl.username"}},
		{"quiet", []string{"config", "check", "--config", good, "--quiet"}, 0, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.inStdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.inStderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			for _, leak := range []string{secret, "pgpassword"} {
				if strings.Contains(stdout+stderr, leak) {
					t.Fatalf("a secret was printed:\n%s%s", stdout, stderr)
				}
			}
			if tc.name == "quiet" && stdout != "" {
				t.Fatalf("--quiet printed %q", stdout)
			}
		})
	}
}

// TestRunRoleNames: run refuses a role it does not know and names a renamed one's new
// name (D30), before it reads any configuration or connects anywhere.
func TestRunRoleNames(t *testing.T) {
	for _, tc := range []struct {
		roles, want string
	}{
		{"synthesize", `role "synthesize" is now called "synthesis"`},
		{"sink,evidence_sink", `unknown role "evidence_sink"`},
		{"", "--roles is required"},
	} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), []string{"run", "--roles", tc.roles}, &stdout, &stderr); code != 2 {
			t.Errorf("run --roles %q: exit %d, want 2 (usage); stderr %s", tc.roles, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run --roles %q: stderr %q does not say %q", tc.roles, stderr.String(), tc.want)
		}
	}
}

// TestEveryStageIsARole: the roles run knows are exactly the stages (D30), so a stage
// added to ids.Stages without a role, or a role without a stage name, goes red here.
func TestEveryStageIsARole(t *testing.T) {
	if len(roleBuilders) != len(ids.Stages) {
		t.Errorf("%d roles, %d stages", len(roleBuilders), len(ids.Stages))
	}
	for _, st := range ids.Stages {
		if _, ok := roleBuilders[st]; !ok {
			t.Errorf("stage %s has no role", st)
		}
	}
}
