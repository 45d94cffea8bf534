package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/schemas/ids"
)

func TestDefaultIsValidAndOff(t *testing.T) {
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	l := c.Services.Workspace.Timeline.Lark
	if l.Enabled || l.EventIngestionActive() || l.ReconciliationActive() || l.EvidenceListedInAPI {
		t.Errorf("a feature is on by default: %+v", l)
	}
	// Retention is the exception: on by default with the 30-day period (issue #19).
	if r := l.Retention; !r.Enabled || r.EvidenceRetention != 720*time.Hour || r.Mode != config.RetentionRedact {
		t.Errorf("retention by default = %+v, want enabled, 720h, redact", r)
	}
	// The design's §18 values, verbatim.
	design := map[string]any{
		"ingestionLookback": 72 * time.Hour, "synthesisScanInterval": 2 * time.Minute,
		"synthesisWindow": 10 * time.Minute, "synthesisWindowCloseGrace": 3 * time.Minute,
		"synthesisContextLookback": 5 * time.Minute, "synthesisStaleTimeout": 15 * time.Minute,
		"synthesisWindowMaxAttempts": 3, "reconcileInterval": 5 * time.Minute, "reconcileOverlap": 10 * time.Minute,
		"evidenceRefreshInterval": time.Hour, "evidenceRefreshLookback": 24 * time.Hour,
		"evidenceBatchLimit": 40, "maxConcurrentSynthesis": 2,
	}
	got := map[string]any{
		"ingestionLookback": l.IngestionLookback, "synthesisScanInterval": l.SynthesisScanInterval,
		"synthesisWindow": l.SynthesisWindow, "synthesisWindowCloseGrace": l.SynthesisWindowCloseGrace,
		"synthesisContextLookback": l.SynthesisContextLookback, "synthesisStaleTimeout": l.SynthesisStaleTimeout,
		"synthesisWindowMaxAttempts": l.SynthesisWindowMaxAttempts, "reconcileInterval": l.ReconcileInterval,
		"reconcileOverlap": l.ReconcileOverlap, "evidenceRefreshInterval": l.EvidenceRefreshInterval,
		"evidenceRefreshLookback": l.EvidenceRefreshLookback, "evidenceBatchLimit": l.EvidenceBatchLimit,
		"maxConcurrentSynthesis": l.MaxConcurrentSynthesis,
	}
	for k, want := range design {
		if got[k] != want {
			t.Errorf("%s = %v, want the design's %v", k, got[k], want)
		}
	}
	if d1, d2 := config.Default(), config.Default(); &d1.Kafka.Brokers[0] == &d2.Kafka.Brokers[0] {
		t.Error("Default shares slices between calls")
	}
}

func TestSecretNeverFormats(t *testing.T) {
	const raw = "hunter2"
	s := config.Secret(raw)
	type holder struct {
		Name   string
		Secret config.Secret
	}
	h := holder{Name: "n", Secret: s}
	c := config.Default()
	c.Lark.AppSecret = s
	c.Postgres.DSN = s

	var jsonBuf, textBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&jsonBuf, nil)).Info("m", "secret", s, "holder", h, "lark", c.Lark)
	slog.New(slog.NewTextHandler(&textBuf, nil)).Info("m", "secret", s, "holder", h)
	js, _ := json.Marshal(c)
	ys, _ := yaml.Marshal(c)

	outputs := map[string]string{
		"%v":         fmt.Sprintf("%v", s),
		"%s":         fmt.Sprintf("%s", s),
		"%q":         fmt.Sprintf("%q", s),
		"%x":         fmt.Sprintf("%x", s),
		"%#v":        fmt.Sprintf("%#v", s),
		"%+v struct": fmt.Sprintf("%+v", h),
		"%#v struct": fmt.Sprintf("%#v", h),
		"%v config":  fmt.Sprintf("%v", c),
		"slog json":  jsonBuf.String(),
		"slog text":  textBuf.String(),
		"json":       string(js),
		"yaml":       string(ys),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(out, raw) || strings.Contains(out, fmt.Sprintf("%x", raw)) {
				t.Errorf("secret printed: %s", out)
			}
		})
	}
	if s.Value() != raw || !s.IsSet() || config.Secret("").IsSet() || config.Secret("").String() != "" {
		t.Error("Value/IsSet/String of Secret")
	}
	if !strings.Contains(outputs["%v"], config.Redacted) {
		t.Errorf("set secret formats as %q, want %q", outputs["%v"], config.Redacted)
	}
}

func TestRedactedAndClone(t *testing.T) {
	c := config.Default()
	c.Lark.AppSecret = "a"
	c.Lark.EncryptKey = "b"
	c.Postgres.DSN = "postgres://u:p@h/db"
	c.Kafka.SASL.Password = "c"
	c.Synthesis.OpenAI.APIKey = "d"
	c.HTTP.APITokens = []config.APIToken{{Name: "ci", SHA256: hashA, Workspaces: []string{"ws-1"}}}

	r := c.Redacted()
	for name, s := range map[string]config.Secret{
		"appSecret": r.Lark.AppSecret, "encryptKey": r.Lark.EncryptKey, "dsn": r.Postgres.DSN,
		"sasl.password": r.Kafka.SASL.Password, "apiKey": r.Synthesis.OpenAI.APIKey,
	} {
		if s.Value() != config.Redacted {
			t.Errorf("Redacted %s = %q", name, s.Value())
		}
	}
	if r.Lark.VerificationToken.Value() != "" {
		t.Error("an unset secret should stay empty, showing it is unset")
	}
	if c.Lark.AppSecret.Value() != "a" {
		t.Error("Redacted changed the original")
	}
	if r.HTTP.APITokens[0].SHA256 != hashA || r.Kafka.Brokers[0] != c.Kafka.Brokers[0] {
		t.Error("Redacted lost non-secret values")
	}

	cl := c.Clone()
	cl.Kafka.Brokers[0] = "changed:1"
	cl.HTTP.APITokens[0].Workspaces[0] = "changed"
	cl.Services.Workspace.Timeline.Lark.WorkspaceTypes[0] = "changed"
	if c.Kafka.Brokers[0] == "changed:1" || c.HTTP.APITokens[0].Workspaces[0] == "changed" ||
		c.Services.Workspace.Timeline.Lark.WorkspaceTypes[0] == "changed" {
		t.Error("Clone shares slices with the original")
	}
}

func TestHelpers(t *testing.T) {
	tok := config.APIToken{Workspaces: []string{"ws-1", "ws-2"}}
	all := config.APIToken{Workspaces: []string{config.AllWorkspaces}}
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"scoped token allows its workspace", tok.Allows(ids.WorkspaceID("ws-2")), true},
		{"scoped token refuses another", tok.Allows(ids.WorkspaceID("ws-3")), false},
		{"star allows any", all.Allows(ids.WorkspaceID("ws-9")), true},
		{"no workspaces allows none", config.APIToken{}.Allows("ws-1"), false},
		{"applies to listed type", config.Default().Services.Workspace.Timeline.Lark.AppliesTo("incident"), true},
		{"not to others", config.Default().Services.Workspace.Timeline.Lark.AppliesTo("change"), false},
		{"ingestion needs master switch", config.LarkTimeline{EventIngestionEnabled: true}.EventIngestionActive(), false},
		{"ingestion with both", config.LarkTimeline{Enabled: true, EventIngestionEnabled: true}.EventIngestionActive(), true},
		{"reconciliation needs master switch", config.LarkTimeline{ReconciliationEnabled: true}.ReconciliationActive(), false},
		{"reconciliation with both", config.LarkTimeline{Enabled: true, ReconciliationEnabled: true}.ReconciliationActive(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	topics := config.Default().Kafka.Topics.All()
	if len(topics) != 5 || topics[0] != "larkline.evidence.v1" {
		t.Errorf("Topics.All = %v", topics)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := map[time.Duration]string{
		72 * time.Hour: "72h", 90 * time.Minute: "1h30m", 10 * time.Minute: "10m", 10 * time.Second: "10s",
		5 * time.Millisecond: "5ms", 0: "0s", time.Hour + time.Second: "1h0m1s", 90 * time.Second: "1m30s",
	}
	for d, want := range tests {
		t.Run(want, func(t *testing.T) {
			if got := config.FormatDuration(d); got != want {
				t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
			}
			if back, err := time.ParseDuration(want); err != nil || back != d {
				t.Errorf("%q does not parse back to %v", want, d)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	one := &config.Error{Problems: []config.Problem{{Field: "log.level", Value: `"loud"`, Source: "f.yaml:3", Message: "must be one of debug, info, warn, error"}}}
	if got, want := one.Error(), `invalid configuration: log.level = "loud" (f.yaml:3): must be one of debug, info, warn, error`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	two := &config.Error{Problems: []config.Problem{{Field: "a", Message: "x"}, {Field: "b", Message: "y"}}}
	if got, want := two.Error(), "invalid configuration (2 problems):\n  - a: x\n  - b: y"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
