package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/larkline/larkline/internal/logging"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name, level, format string
		wantErr             []error
		logAt               slog.Level
		wantOutput          bool
		wantJSON            bool
	}{
		{name: "json info logs info", level: "info", format: "json", logAt: slog.LevelInfo, wantOutput: true, wantJSON: true},
		{name: "json info drops debug", level: "info", format: "json", logAt: slog.LevelDebug},
		{name: "text debug logs debug", level: "debug", format: "text", logAt: slog.LevelDebug, wantOutput: true},
		{name: "upper case accepted", level: "WARN", format: "JSON", logAt: slog.LevelWarn, wantOutput: true, wantJSON: true},
		{name: "error drops warn", level: "error", format: "text", logAt: slog.LevelWarn},
		{name: "bad level", level: "verbose", format: "json", wantErr: []error{logging.ErrInvalidLevel}},
		{name: "bad format", level: "info", format: "xml", wantErr: []error{logging.ErrInvalidFormat}},
		{name: "both bad reported together", level: "loud", format: "xml", wantErr: []error{logging.ErrInvalidLevel, logging.ErrInvalidFormat}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := logging.New(&buf, tt.level, tt.format)
			if len(tt.wantErr) > 0 {
				if l != nil {
					t.Errorf("New returned a logger with error %v", err)
				}
				for _, want := range tt.wantErr {
					if !errors.Is(err, want) {
						t.Errorf("New error = %v, want it to wrap %v", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			l.Log(t.Context(), tt.logAt, "hello", "workspace_id", "ws-1")
			out := buf.String()
			if got := out != ""; got != tt.wantOutput {
				t.Fatalf("output present = %v, want %v (output %q)", got, tt.wantOutput, out)
			}
			if !tt.wantOutput {
				return
			}
			var obj map[string]any
			isJSON := json.Unmarshal([]byte(out), &obj) == nil
			if isJSON != tt.wantJSON {
				t.Errorf("output is JSON = %v, want %v: %q", isJSON, tt.wantJSON, out)
			}
			if !strings.Contains(out, "ws-1") {
				t.Errorf("output %q lacks the attribute", out)
			}
		})
	}
}

func TestNewNilWriter(t *testing.T) {
	if _, err := logging.New(nil, "info", "json"); !errors.Is(err, logging.ErrNilWriter) {
		t.Fatalf("New(nil) error = %v, want ErrNilWriter", err)
	}
}

func TestOrDiscard(t *testing.T) {
	l := logging.OrDiscard(nil)
	if l == nil {
		t.Fatal("OrDiscard(nil) = nil")
	}
	if l.Enabled(t.Context(), slog.LevelError) {
		t.Error("discard logger reports error level enabled")
	}
	l.Error("dropped") // must not panic

	var buf bytes.Buffer
	own := slog.New(slog.NewTextHandler(&buf, nil))
	if got := logging.OrDiscard(own); got != own {
		t.Error("OrDiscard replaced a non-nil logger")
	}
}

func TestHashID(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "empty stays empty", in: "", want: ""},
		// printf oc_abc | sha256sum → 32c92896ffd8b40d…
		{name: "chat id", in: "oc_abc", want: "32c92896ffd8b40d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := logging.HashID(tt.in); got != tt.want {
				t.Errorf("HashID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	t.Run("distinct inputs differ", func(t *testing.T) {
		if logging.HashID("oc_a") == logging.HashID("oc_b") {
			t.Error("different ids hash alike")
		}
	})
	t.Run("length and no leak", func(t *testing.T) {
		h := logging.HashID("oc_secretchat")
		if len(h) != logging.HashIDLen || strings.Contains(h, "secret") {
			t.Errorf("HashID = %q", h)
		}
	})
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in   string
		want slog.Level
		ok   bool
	}{
		{"debug", slog.LevelDebug, true}, {"info", slog.LevelInfo, true}, {"warn", slog.LevelWarn, true},
		{"error", slog.LevelError, true}, {" Info ", slog.LevelInfo, true}, {"warning", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := logging.ParseLevel(tt.in)
			if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
				t.Errorf("ParseLevel(%q) = %v, %v", tt.in, got, err)
			}
		})
	}
}
