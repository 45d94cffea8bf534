package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/larkline/larkline/internal/testenv/provision"
)

// clearTestEnv unsets every variable the runner reads, so the caller's
// environment (e.g. a run under the runner itself) does not leak in.
func clearTestEnv(t *testing.T) {
	for _, k := range []string{
		provision.EnvKafka, provision.EnvKafkaBrokers, provision.EnvKafkaKind,
		provision.EnvPG, provision.EnvPGDSN, provision.EnvPGKind, provision.EnvRequireReal,
	} {
		t.Setenv(k, "") // restores the old value after the test
		os.Unsetenv(k)
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no arguments", nil, "usage: testenv run"},
		{"unknown subcommand", []string{"up"}, "usage: testenv run"},
		{"no command", []string{"run", "-kafka=false", "-postgres=false", "--"}, "no command given"},
		{"unknown flag", []string{"run", "-docker", "--", "true"}, "flag provided but not defined"},
		{"command not found", []string{"run", "-kafka=false", "-postgres=false", "--", "larkline-no-such-command"}, "executable file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tt.args, &stderr); code != exitSetup {
				t.Errorf("exit status = %d, want %d", code, exitSetup)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}

func TestRunReturnsTheCommandStatus(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   int
	}{
		{"success", "exit 0", 0},
		{"failure", "exit 3", 3},
		{"killed by SIGTERM", "kill -TERM $$", 128 + 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run([]string{"run", "-kafka=false", "-postgres=false", "--", "sh", "-c", tt.script}, &stderr)
			if code != tt.want {
				t.Errorf("exit status = %d, want %d; stderr:\n%s", code, tt.want, stderr.String())
			}
		})
	}
}

// envDump returns a command that writes its view of the LARKLINE_TEST_* variables to a file.
func envDump(t *testing.T) (args []string, read func() map[string]string) {
	out := filepath.Join(t.TempDir(), "env")
	args = []string{"sh", "-c", `env | grep '^LARKLINE_TEST_' > "$0"`, out}
	return args, func() map[string]string {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("the command did not run: %v", err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				m[k] = v
			}
		}
		return m
	}
}

func TestRunExportsStartedServices(t *testing.T) {
	clearTestEnv(t)
	t.Setenv(provision.EnvKafka, "embedded") // in-process: cheap, and announced loudly
	cmd, read := envDump(t)
	var stderr bytes.Buffer
	if code := run(append([]string{"run", "-postgres=false", "--"}, cmd...), &stderr); code != 0 {
		t.Fatalf("exit status = %d; stderr:\n%s", code, stderr.String())
	}
	env := read()
	if env[provision.EnvKafkaKind] != "embedded" {
		t.Errorf("%s = %q, want embedded", provision.EnvKafkaKind, env[provision.EnvKafkaKind])
	}
	if !strings.HasPrefix(env[provision.EnvKafkaBrokers], "127.0.0.1:") {
		t.Errorf("%s = %q, want a loopback broker", provision.EnvKafkaBrokers, env[provision.EnvKafkaBrokers])
	}
	if _, ok := env[provision.EnvPGDSN]; ok {
		t.Errorf("%s exported although -postgres=false", provision.EnvPGDSN)
	}
	if !strings.Contains(stderr.String(), "IN-PROCESS FAKE") {
		t.Errorf("no loud kfake warning on stderr:\n%s", stderr.String())
	}
}

func TestRunAdoptsProvidedServices(t *testing.T) {
	clearTestEnv(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	t.Setenv(provision.EnvKafkaBrokers, brokers)
	cmd, read := envDump(t)
	var stderr bytes.Buffer
	if code := run(append([]string{"run", "-postgres=false", "--"}, cmd...), &stderr); code != 0 {
		t.Fatalf("exit status = %d; stderr:\n%s", code, stderr.String())
	}
	env := read()
	if env[provision.EnvKafkaBrokers] != brokers || env[provision.EnvKafkaKind] != "external" {
		t.Errorf("exported %v, want the provided brokers %s as external", env, brokers)
	}
}

func TestRunRefusesTheFakeWhenRealIsRequired(t *testing.T) {
	clearTestEnv(t)
	t.Setenv(provision.EnvKafka, "embedded")
	t.Setenv(provision.EnvRequireReal, "1")
	marker := filepath.Join(t.TempDir(), "ran")
	var stderr bytes.Buffer
	code := run([]string{"run", "-postgres=false", "--", "touch", marker}, &stderr)
	if code != exitSetup {
		t.Errorf("exit status = %d, want %d", code, exitSetup)
	}
	if !strings.Contains(stderr.String(), provision.EnvRequireReal) {
		t.Errorf("stderr does not explain the refusal:\n%s", stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although no real broker was available")
	}
}

func TestChildEnv(t *testing.T) {
	kafka, err := provision.StartKafka(t.Context(), provision.Options{
		Getenv: func(k string) string {
			return map[string]string{provision.EnvKafka: "embedded"}[k]
		},
		Warnings: &bytes.Buffer{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close(t.Context())
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{
			name: "adds the service variables",
			env:  []string{"PATH=/bin"},
			want: append([]string{"PATH=/bin"}, kafka.Env()...),
		},
		{
			name: "replaces earlier values, keeps the rest",
			env:  []string{provision.EnvKafkaBrokers + "=old:1", "HOME=/root", provision.EnvKafkaKind + "=external"},
			want: append([]string{"HOME=/root"}, kafka.Env()...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := childEnv(tt.env, []*provision.Service{kafka})
			if !slices.Equal(got, tt.want) {
				t.Errorf("childEnv() = %q, want %q", got, tt.want)
			}
		})
	}
}
