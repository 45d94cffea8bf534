package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/schemas/ids"
)

// TestRetentionWarnings (issue #29): a process warns at start when retention is off,
// and when it is on but the process runs no retention role; a process that runs it
// says nothing.
func TestRetentionWarnings(t *testing.T) {
	tests := []struct {
		name    string
		enabled bool
		roles   []ids.Stage
		want    string // "" for no warning
	}{
		{"off", false, []ids.Stage{"retention"}, "evidence retention is turned off"},
		{"on, no retention role", true, []ids.Stage{"ingest", "sink"}, "runs no retention role"},
		{"on, with the retention role", true, []ids.Stage{"sink", "retention"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Services.Workspace.Timeline.Lark.Retention.Enabled = tc.enabled
			var buf bytes.Buffer
			logRetentionDecision(cfg, tc.roles, slog.New(slog.NewTextHandler(&buf, nil)))
			got := buf.String()
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("logged %q, want nothing", got)
			case tc.want != "" && (!strings.Contains(got, tc.want) || !strings.Contains(got, "level=WARN")):
				t.Fatalf("logged %q, want a warning with %q", got, tc.want)
			}
		})
	}
}
