package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/logtest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// roleConfig is config.Default() pointed at the harness's broker and a fresh database,
// with private topics.
func roleConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Kafka.Brokers = testenv.KafkaBrokers(t)
	cfg.Kafka.Partitions = 3
	cfg.Kafka.ReplicationFactor = 1
	cfg.Kafka.GroupPrefix = "roles-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	cfg.Kafka.Topics.Evidence = testenv.NewTopic(t, 3, nil)
	cfg.Kafka.Topics.Checkpoints = testenv.NewTopic(t, 3, nil)
	cfg.Kafka.Topics.DeadLetter = testenv.NewTopic(t, 3, nil)
	cfg.Postgres.DSN = config.Secret(testenv.PostgresDSN(t))
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.APIListen, cfg.HTTP.WebhookListen = cfg.HTTP.Listen, cfg.HTTP.Listen // shared
	cfg.Windows.StateDir = t.TempDir()
	return cfg
}

// startTestRoles runs roles in this process until the test ends.
func startTestRoles(t *testing.T, cfg *config.Config, roles ...ids.Stage) (*running, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, err := startRoles(context.Background(), cfg, log, roles)
	if err != nil {
		t.Fatalf("starting %v: %v", roles, err)
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("stopping %v: %v", roles, err)
		}
	})
	return r, logs
}

// openTestStore opens a migrated store on cfg's database.
func openTestStore(t *testing.T, cfg *config.Config) *store.Store {
	t.Helper()
	return teststore.New(t, teststore.DSN(cfg.Postgres.DSN.Value()))
}

// waitFor polls cond until it holds or d passes (testenv.Eventually).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, d, what, cond)
}

func putEvidence(t *testing.T, st *store.Store, ws ids.WorkspaceID, msg, text string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.UpsertWorkspace(ctx, store.Workspace{ID: ws, Type: "incident", Status: store.WorkspaceFiring, CreatedAt: at.Add(-time.Hour)}, 1); err != nil {
		t.Fatal(err)
	}
	_, err := st.UpsertEvidence(ctx, []store.Evidence{{
		WorkspaceID: ws, Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
		SourceKey:  ids.MessageSourceKey("oc_roles", ids.MessageID(msg)),
		OccurredAt: at, SourceUpdatedAt: at, ObservedAt: at, ActorID: "ou_a", Content: text,
		ContentHash: fmt.Sprintf("%x", sha256.Sum256([]byte(text))), SynthesisEligible: true,
		Metadata: json.RawMessage(fmt.Sprintf(`{"chat_id":"oc_roles","message_id":%q,"message_type":"text"}`, msg)),
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRoleRetentionOnByDefault: with the default configuration, the retention role
// redacts evidence past the 30-day period; with retention turned off, every process
// logs that decision and where it came from (issue #19). Before the fix the default
// was off: the role did nothing and the old text stayed.
func TestRoleRetentionOnByDefault(t *testing.T) {
	cfg := roleConfig(t)
	st := openTestStore(t, cfg)
	const text = "old incident text that retention must remove"
	putEvidence(t, st, "ws-ret", "om_old", text, time.Now().Add(-40*24*time.Hour))
	putEvidence(t, st, "ws-ret", "om_new", "recent text", time.Now().Add(-time.Hour))

	_, logs := startTestRoles(t, cfg, "retention")
	content := func(msg string) string {
		ev, err := st.EvidenceByKeys(context.Background(), "ws-ret", store.LarkMessageEvidence,
			[]string{ids.MessageSourceKey("oc_roles", ids.MessageID(msg))})
		if err != nil || len(ev) != 1 {
			t.Fatalf("evidence %s: %v %v", msg, ev, err)
		}
		return ev[0].Content
	}
	waitFor(t, time.Minute, "the 40-day-old evidence to be redacted", func() bool { return content("om_old") == "" })
	if got := content("om_new"); got != "recent text" {
		t.Fatalf("recent evidence changed: %q", got)
	}
	if strings.Contains(logs.String(), "retention is turned off") {
		t.Fatalf("default configuration logged retention as off:\n%s", logs)
	}

	off := roleConfig(t)
	off.Services.Workspace.Timeline.Lark.Retention.Enabled = false
	_, offLogs := startTestRoles(t, off, "retention")
	waitFor(t, 30*time.Second, "the retention-off warning", func() bool {
		return strings.Contains(offLogs.String(), "evidence retention is turned off by configuration")
	})
}

// TestRoleAPIRefusesForgedCursor: the api role built from a configuration without
// http.cursorKey generates a key (and warns); a cursor sealed with the key larkline
// once used by default, which is public in its source, is refused. Before the fix
// the role used that public key and served the forged page.
func TestRoleAPIRefusesForgedCursor(t *testing.T) {
	cfg := roleConfig(t)
	const token = "roles-test-token"
	sum := sha256.Sum256([]byte(token))
	cfg.HTTP.APITokens = []config.APIToken{{Name: "t", SHA256: fmt.Sprintf("%x", sum), Workspaces: []string{"*"}}}
	cfg.Services.Workspace.Timeline.Lark.EvidenceListedInAPI = true
	st := openTestStore(t, cfg)
	now := time.Now().UTC().Truncate(time.Second)
	for i := range 3 {
		putEvidence(t, st, "ws-cur", fmt.Sprintf("om_%d", i), fmt.Sprintf("text %d", i), now.Add(time.Duration(i)*time.Second))
	}
	r, logs := startTestRoles(t, cfg, "api")
	base := "http://" + r.rt.ops.Addr().String()
	get := func(q string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/workspaces/ws-cur/evidence?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get("limit=1")
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil || page.NextCursor == "" {
		t.Fatalf("first page: %d %s %v", code, body, err)
	}
	if !strings.Contains(logs.String(), "no http.cursorKey configured") {
		t.Fatalf("no warning about the generated cursor key:\n%s", logs)
	}
	forged := sealCursor([]byte("larkline/httpapi/default-cursor-key/v1"), "ws-cur", time.Unix(0, 0), 0)
	if code, body := get("limit=1&cursor=" + url.QueryEscape(forged)); code != http.StatusBadRequest || !strings.Contains(body, "invalid_cursor") {
		t.Fatalf("cursor forged with the formerly public key: %d %s, want 400 invalid_cursor", code, body)
	}
	if code, body := get("limit=1&cursor=" + url.QueryEscape(page.NextCursor)); code != 200 {
		t.Fatalf("genuine cursor: %d %s", code, body)
	}
}

// sealCursor builds an evidence cursor the way internal/httpapi documents its format
// (version 1 | occurred_at µs | id | HMAC-SHA256(key, domain | version | workspace |
// source | source_type | position)[:16]), as a forger who knows the key would.
func sealCursor(key []byte, ws string, at time.Time, id int64) string {
	payload := make([]byte, 17)
	payload[0] = 1
	binary.BigEndian.PutUint64(payload[1:], uint64(at.UnixMicro()))
	binary.BigEndian.PutUint64(payload[9:], uint64(id))
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"larkline/httpapi/evidence-cursor", ws, ids.SourceLark, ids.SourceTypeLarkMessage} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		m.Write(n[:])
		m.Write([]byte(part))
	}
	m.Write(payload)
	return base64.RawURLEncoding.EncodeToString(append(payload, m.Sum(nil)[:16]...))
}

// TestLarkClientLogsThroughTheSanitizer: the process's one Open API client logs
// through larkline's logger (JSON, component lark.client) with Lark's error code and
// without the SDK's dump of the answer (issue #19). Before the fix the client used the
// SDK's own logger on stdout, at error level, and this line never reached the logger.
func TestLarkClientLogsThroughTheSanitizer(t *testing.T) {
	srv := larktest.StartForTest(t, larktest.Options{AppID: "cli_sanitizer", AppSecret: "the-right-secret"})
	cfg := config.Default()
	cfg.Lark.AppID, cfg.Lark.AppSecret, cfg.Lark.OpenBaseURL = "cli_sanitizer", "a-wrong-secret", srv.URL()
	logs := &logtest.Buffer{}
	rt := &runtime{opts: newRoleOptions(cfg), log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := rt.larkClient()
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.GetChat(ctx, "oc_sanitizer")
	if err == nil {
		t.Fatal("a wrong app secret was accepted")
	}
	out := logs.String()
	want := fmt.Sprintf("(code %d)", larktest.CodeAppCredentialsInvalid)
	if !strings.Contains(out, `"component":"lark.client"`) || !strings.Contains(out, want) {
		t.Fatalf("no sanitized SDK line with %s in the logs:\n%s", want, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if msg, _ := v["msg"].(string); strings.Contains(msg, "Msg") || strings.Contains(msg, "{") {
			t.Fatalf("the SDK's dump of the answer reached the log: %q", msg)
		}
	}
}
