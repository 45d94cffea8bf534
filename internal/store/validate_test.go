package store

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCursorRoundTripAndOrder(t *testing.T) {
	t.Parallel()
	c := Cursor{OccurredAt: time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC), ID: 42}
	got, err := ParseCursor(c.String())
	if err != nil || !got.OccurredAt.Equal(c.OccurredAt) || got.ID != c.ID {
		t.Fatalf("ParseCursor(%q) = %+v, %v", c.String(), got, err)
	}
	later := Cursor{OccurredAt: c.OccurredAt, ID: 43}
	if !c.Less(later) || later.Less(c) || c.Less(c) {
		t.Fatal("Less does not order by id at equal times")
	}
	if !(Cursor{OccurredAt: c.OccurredAt.Add(-time.Microsecond), ID: 99}).Less(c) {
		t.Fatal("Less does not order by time first")
	}
	for _, bad := range []string{"", "12", "x:1", "1:x", "1:-1", "1:2:3"} {
		if _, err := ParseCursor(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseCursor(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestPageLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want int
		err      bool
	}{{0, 0, true}, {-1, 0, true}, {1, 1, false}, {MaxPageSize, MaxPageSize, false}, {MaxPageSize + 1, MaxPageSize, false}}
	for _, c := range cases {
		got, err := pageLimit(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("pageLimit(%d) = %d, %v", c.in, got, err)
		}
	}
}

func TestEvidenceValidate(t *testing.T) {
	t.Parallel()
	ok := larkEvidence("ws-1", "oc_chat", "om_1", t0, "hello")
	cases := []struct {
		name   string
		mutate func(*Evidence)
		valid  bool
	}{
		{"valid", func(*Evidence) {}, true},
		{"empty metadata means {}", func(e *Evidence) { e.Metadata = nil }, true},
		{"other kind with free key", func(e *Evidence) { e.Source, e.SourceType, e.SourceKey = "jira", "issue", "PROJ-1" }, true},
		{"bad workspace", func(e *Evidence) { e.WorkspaceID = "ws 1" }, false},
		{"empty source", func(e *Evidence) { e.Source = "" }, false},
		{"empty key", func(e *Evidence) { e.SourceKey = "" }, false},
		{"lark key of wrong shape", func(e *Evidence) { e.SourceKey = "chat/oc_chat/om_1" }, false},
		{"lark key with bad chat", func(e *Evidence) { e.SourceKey = "chat/xx/message/om_1" }, false},
		{"lark key with bad message", func(e *Evidence) { e.SourceKey = "chat/oc_chat/message/1" }, false},
		{"zero occurred_at", func(e *Evidence) { e.OccurredAt = time.Time{} }, false},
		{"empty hash", func(e *Evidence) { e.ContentHash = "" }, false},
		{"NUL in content", func(e *Evidence) { e.Content = "a\x00b" }, false},
		{"invalid UTF-8 in content", func(e *Evidence) { e.Content = "a\xffb" }, false},
		{"content too large", func(e *Evidence) { e.Content = strings.Repeat("x", MaxContentBytes+1) }, false},
		{"actor too long", func(e *Evidence) { e.ActorDisplayName = strings.Repeat("x", MaxActorLen+1) }, false},
		{"metadata not JSON", func(e *Evidence) { e.Metadata = []byte(`{`) }, false},
		{"metadata an array", func(e *Evidence) { e.Metadata = []byte(`[1]`) }, false},
		{"metadata with \\u0000", func(e *Evidence) { e.Metadata = []byte(`{"a":"\u0000"}`) }, false},
		{"metadata too large", func(e *Evidence) {
			e.Metadata = []byte(`{"a":"` + strings.Repeat("x", MaxMetadataBytes) + `"}`)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := ok
			c.mutate(&e)
			err := e.Validate()
			if c.valid && err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
			if !c.valid && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestTruncateUTF8(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 600) // 2 bytes each
	got := truncateUTF8(s, MaxDiagnosticBytes+1)
	if len(got) > MaxDiagnosticBytes+1 || !utf8.ValidString(got) || len(got) != MaxDiagnosticBytes {
		t.Fatalf("truncateUTF8 gave %d bytes, valid=%v", len(got), utf8.ValidString(got))
	}
	if truncateUTF8("short", 10) != "short" {
		t.Fatal("short string changed")
	}
}
