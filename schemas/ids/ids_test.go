package ids

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		parse func(string) error
		in    string
		ok    bool
	}{
		{"workspace ok", func(s string) error { _, err := ParseWorkspaceID(s); return err }, "ws-1", true},
		{"workspace empty", func(s string) error { _, err := ParseWorkspaceID(s); return err }, "", false},
		{"workspace slash", func(s string) error { _, err := ParseWorkspaceID(s); return err }, "ws/1", false},
		{"workspace too long", func(s string) error { _, err := ParseWorkspaceID(s); return err }, string(make([]byte, 129)), false},
		{"chat ok", func(s string) error { _, err := ParseChatID(s); return err }, "oc_a0553eda9014c201e6969b478895c230", true},
		{"chat wrong prefix", func(s string) error { _, err := ParseChatID(s); return err }, "ou_abc", false},
		{"message ok", func(s string) error { _, err := ParseMessageID(s); return err }, "om_dc13264520392913993dd051dba21dcf", true},
		{"message wrong prefix", func(s string) error { _, err := ParseMessageID(s); return err }, "oc_abc", false},
		{"version ok", func(s string) error { _, err := ParseProcessorVersion(s); return err }, "v2", true},
		{"version slash", func(s string) error { _, err := ParseProcessorVersion(s); return err }, "v/2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse(tt.in)
			if tt.ok && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidID) {
				t.Fatalf("want ErrInvalidID, got %v", err)
			}
		})
	}
}

func TestKeysRoundTrip(t *testing.T) {
	w, c, m := WorkspaceID("ws-1"), ChatID("oc_1"), MessageID("om_1")
	key := EvidenceKey(w, c, m)
	if key != "ws-1/oc_1/om_1" {
		t.Fatalf("evidence key %q", key)
	}
	gw, gc, gm, err := ParseEvidenceKey(key)
	if err != nil || gw != w || gc != c || gm != m {
		t.Fatalf("round trip: %v %v %v %v", gw, gc, gm, err)
	}
	if got := string(PartitionKey([]byte(key))); got != ChatKey(w, c) {
		t.Fatalf("partition key of evidence key = %q", got)
	}
	if got := string(PartitionKey([]byte(ChatKey(w, c)))); got != ChatKey(w, c) {
		t.Fatalf("partition key of chat key = %q", got)
	}
	if _, _, _, err := ParseEvidenceKey("ws-1/oc_1"); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("short key accepted: %v", err)
	}
	if gw, gc, err := ParseChatKey("ws-1/oc_1"); err != nil || gw != w || gc != c {
		t.Fatalf("chat key: %v", err)
	}
}

func TestSourceKeys(t *testing.T) {
	start := time.Date(2026, 11, 30, 2, 10, 0, 0, time.UTC)
	tests := []struct{ name, got, want string }{
		{"message", MessageSourceKey("oc_1", "om_1"), "chat/oc_1/message/om_1"},
		{"checkpoint", CheckpointSourceKey("oc_1"), "chat/oc_1"},
		{"window default", WindowSourceKey("oc_1", "v1", start), "chat/oc_1/window/2026-11-30T02:10:00Z"},
		{"window empty version", WindowSourceKey("oc_1", "", start), "chat/oc_1/window/2026-11-30T02:10:00Z"},
		{"window versioned", WindowSourceKey("oc_1", "v2", start), "chat/oc_1/processor/v2/window/2026-11-30T02:10:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q want %q", tt.got, tt.want)
			}
		})
	}
}

func TestWindowStart(t *testing.T) {
	tests := []struct {
		in     time.Time
		length time.Duration
		want   time.Time
	}{
		{time.Date(2026, 1, 1, 10, 9, 59, 999, time.UTC), 10 * time.Minute, time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)},
		{time.Date(2026, 1, 1, 10, 10, 0, 0, time.UTC), 10 * time.Minute, time.Date(2026, 1, 1, 10, 10, 0, 0, time.UTC)},
		{time.Date(2026, 1, 1, 18, 59, 0, 0, time.FixedZone("CST", 8*3600)), 10 * time.Minute, time.Date(2026, 1, 1, 10, 50, 0, 0, time.UTC)},
		{time.Date(2026, 1, 1, 10, 14, 0, 0, time.UTC), 15 * time.Minute, time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)},
		{time.Date(1969, 12, 31, 23, 55, 0, 0, time.UTC), 10 * time.Minute, time.Date(1969, 12, 31, 23, 50, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.in.String(), func(t *testing.T) {
			if got := WindowStart(tt.in, tt.length); !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Fatalf("WindowStart(%v, %v) = %v, want %v", tt.in, tt.length, got, tt.want)
			}
		})
	}
}

func TestParseStage(t *testing.T) {
	tests := []struct {
		in   string
		want Stage
		ok   bool
	}{
		{"sink", StageSink, true},
		{"synthesis", StageSynthesis, true},
		{"evidence_sink", StageSink, true},        // dead letters parked before D30
		{"workspace_feed", StageWorkspaces, true}, // dead letters parked before D30
		{"synthesize", "", false},                 // a role name that never was a stage
		{"", "", false},
	}
	for _, tt := range tests {
		got, err := ParseStage(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseStage(%q) = %q, %v; want %q (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseStage(%q) error %v is not ErrInvalidID", tt.in, err)
		}
	}
}
