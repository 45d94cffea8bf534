package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// registryGateway: the shared registry behind testenv.RegistryGateway.
func registryGateway(t *testing.T, user, pass, token string) (string, *atomic.Int64) {
	t.Helper()
	return testenv.RegistryGateway(t, testenv.SchemaRegistryURL(t), user, pass, token)
}

// schemasConfig writes a configuration file on the harness's broker with private
// topic names, the registry behind the gateway, and autoRegister false.
func schemasConfig(t *testing.T, registryURL, user, passwordFile string) (path string, topics map[string]string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := "sch-" + hex.EncodeToString(b) + "."
	topics = map[string]string{"evidence": p + "evidence", "windowsClosed": p + "closed", "checkpoints": p + "checkpoints",
		"workspaces": testenv.NewTopic(t, 1, nil), "deadLetter": p + "deadletter"}
	var y strings.Builder
	fmt.Fprintf(&y, "kafka:\n  brokers: [%s]\n  replicationFactor: 1\n  topics:\n", strings.Join(testenv.KafkaBrokers(t), ", "))
	for k, v := range topics {
		fmt.Fprintf(&y, "    %s: %s\n", k, v)
	}
	fmt.Fprintf(&y, "schemas:\n  autoRegister: false\n  registry:\n    url: %s\n", registryURL)
	if user != "" {
		fmt.Fprintf(&y, "    username: %s\n    passwordFile: %s\n", user, passwordFile)
	}
	path = filepath.Join(t.TempDir(), "larkline.yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, topics
}

// TestSchemasOnAnAuthenticatedRegistry: the real registry behind an authenticating
// gateway, schemas.autoRegister false. A start before the schemas are registered
// is refused naming the subject; without credentials the registry refuses
// larkline; `schemas register` registers the five subjects and `schemas check`
// finds them compatible; `workspaces publish` then writes a record in the
// Confluent wire format that a plain franz-go consumer with sr.Serde and goavro
// (bearer token, no larkline code) reads back.
func TestSchemasOnAnAuthenticatedRegistry(t *testing.T) {
	const user, pass, token = "larkline", "gateway-pass-1", "gateway-token-1"
	gw, refused := registryGateway(t, user, pass, token)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path, topics := schemasConfig(t, gw, user, pwFile)
	wsSubject := topics["workspaces"] + "-value"

	// 1. Not registered yet: the roles refuse to start, naming the subject.
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.Listen = "127.0.0.1:0"
	if r, err := startRoles(context.Background(), cfg, slog.New(slog.DiscardHandler), []ids.Stage{ids.StageSink}); err == nil {
		_ = r.stop()
		t.Fatal("roles started with autoRegister false and no schema registered")
	} else {
		for _, want := range []string{"schemas.autoRegister is false", "schema not registered", topics["evidence"] + "-value", "larkline schemas register"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("start refused with %q, which does not say %q", err, want)
			}
		}
		t.Logf("refused start: %v", err)
	}
	rec := filepath.Join(t.TempDir(), "ws.json")
	if err := os.WriteFile(rec, []byte(`{"id":"inc-sr-1","type":"incident","status":"firing","created_at":"2026-12-04T07:00:00Z","version":3,"chats":["oc_sr1"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "workspaces", "publish", "--config", path, "--file", rec); code != 1 || !strings.Contains(stderr, wsSubject) {
		t.Fatalf("publish before registration: exit %d, stderr %q; want 1 naming %s", code, stderr, wsSubject)
	}

	// 2. Without credentials the gateway refuses larkline.
	anon, _ := schemasConfig(t, gw, "", "")
	before := refused.Load()
	if _, stderr, code := runCLI(t, "schemas", "register", "--config", anon); code != 1 || !strings.Contains(stderr, "HTTP 401") {
		t.Fatalf("register without credentials: exit %d, stderr %q; want 1 and HTTP 401", code, stderr)
	}
	if refused.Load() == before {
		t.Fatal("the gateway saw no unauthenticated request")
	}

	// 3. Register and check with basic auth.
	stdout, stderr, code := runCLI(t, "schemas", "register", "--config", path)
	if code != 0 || strings.Count(stdout, "registered") != 5 || !strings.Contains(stdout, wsSubject) {
		t.Fatalf("schemas register: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, "schemas", "check", "--config", path)
	if code != 0 || strings.Count(stdout, "compatible") != 5 || strings.Contains(stdout, "incompatible") {
		t.Fatalf("schemas check: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	// 4. Publish through larkline, read back with franz-go's serde.
	if stdout, stderr, code := runCLI(t, "workspaces", "publish", "--config", path, "--file", rec); code != 0 {
		t.Fatalf("publish: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	got := consumeConfluent(t, gw, token, topics["workspaces"])
	if got["id"] != "inc-sr-1" || got["status"] != "firing" || got["version"] != int64(3) || fmt.Sprint(got["chats"]) != "[oc_sr1]" {
		t.Fatalf("the Confluent consumer read %v", got)
	}
}

// consumeConfluent reads the first record of topic the way any Confluent-format
// consumer does: the schema id from the 5-byte header, the writer schema from
// the registry by id (sr.Client, bearer token), the body with goavro.
func consumeConfluent(t *testing.T, registryURL, token, topic string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := sr.NewClient(sr.URLs(registryURL), sr.BearerToken(token))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(testenv.KafkaBrokers(t)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record on %s: %v", topic, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v", errs)
		}
		for _, r := range fs.Records() {
			var serde sr.Serde
			id, _, err := serde.DecodeID(r.Value)
			if err != nil {
				t.Fatalf("value is not in the Confluent wire format: %v", err)
			}
			s, err := rc.SchemaByID(ctx, id)
			if err != nil {
				t.Fatalf("schema id %d: %v", id, err)
			}
			codec, err := goavro.NewCodec(s.Schema)
			if err != nil {
				t.Fatal(err)
			}
			serde.Register(id, map[string]any{}, sr.DecodeFn(func(b []byte, v any) error {
				native, _, err := codec.NativeFromBinary(b)
				if err == nil {
					*v.(*map[string]any) = native.(map[string]any)
				}
				return err
			}))
			var m map[string]any
			if err := serde.Decode(r.Value, &m); err != nil {
				t.Fatalf("decode: %v", err)
			}
			return m
		}
	}
}

// TestSchemasCheckRefusesAnIncompatibleChange: the evidence subject, under BACKWARD
// compatibility, holds an earlier schema that the current one cannot read (it lacks
// fields the current schema requires without default). `schemas check` exits 1,
// names the subject as incompatible and the others as compatible, and registers
// nothing.
func TestSchemasCheckRefusesAnIncompatibleChange(t *testing.T) {
	const user, pass, token = "larkline", "gateway-pass-2", "gateway-token-2"
	gw, _ := registryGateway(t, user, pass, token)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pass), 0o600); err != nil {
		t.Fatal(err)
	}
	path, topics := schemasConfig(t, gw, user, pwFile)
	subject := topics["evidence"] + "-value"

	ctx := context.Background()
	rc, err := sr.NewClient(sr.URLs(gw), sr.BearerToken(token))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rc.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject) {
		if r.Err != nil {
			t.Fatalf("set BACKWARD on %s: %v", subject, r.Err)
		}
	}
	old := `{"type":"record","name":"EvidenceRecord","namespace":"io.larkline","fields":[{"name":"schema_version","type":"int","default":0}]}`
	if _, err := rc.RegisterSchema(ctx, subject, sr.Schema{Schema: old}, -1, -1); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runCLI(t, "schemas", "check", "--config", path)
	if code != 1 || !strings.Contains(stdout, "incompatible  "+subject) || countLines(stdout, "compatible  ") != 4 ||
		!strings.Contains(stderr, "incompatible with the subject's registered versions") || !strings.Contains(stderr, subject+" under its BACKWARD compatibility rule") {
		t.Fatalf("schemas check: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	t.Logf("schemas check said:\n%s%s", stdout, stderr)
	versions, err := rc.SubjectVersions(ctx, subject)
	if err != nil || len(versions) != 1 {
		t.Fatalf("subject versions %v (%v), want only the earlier one", versions, err)
	}
}

// countLines counts the lines of s that start with prefix.
func countLines(s, prefix string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}
