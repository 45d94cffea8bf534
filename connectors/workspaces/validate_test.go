package workspaces

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func validRecord() schemas.WorkspaceRecord {
	return schemas.WorkspaceRecord{
		ID:        "INC-1",
		Type:      "incident",
		Status:    "firing",
		CreatedAt: t0.Add(-time.Hour),
		Version:   3,
		Chats:     []ids.ChatID{"oc_a", "oc_b"},
		UpdatedAt: t0,
	}
}

func TestValidateRecord(t *testing.T) {
	t.Parallel()
	many := make([]ids.ChatID, MaxChats+1)
	for i := range many {
		many[i] = ids.ChatID(fmt.Sprintf("oc_%d", i))
	}
	cases := []struct {
		name   string
		mutate func(*schemas.WorkspaceRecord)
		field  string // "" means valid
		cause  error
	}{
		{"valid", func(*schemas.WorkspaceRecord) {}, "", nil},
		{"no chats is valid", func(r *schemas.WorkspaceRecord) { r.Chats = nil }, "", nil},
		{"created within the clock skew is valid", func(r *schemas.WorkspaceRecord) { r.CreatedAt = t0.Add(DefaultClockSkew) }, "", nil},
		{"every known status is valid", func(r *schemas.WorkspaceRecord) { r.Status = "archived" }, "", nil},
		{"unknown status", func(r *schemas.WorkspaceRecord) { r.Status = "open" }, "status", nil},
		{"status is case-sensitive", func(r *schemas.WorkspaceRecord) { r.Status = "Firing" }, "status", nil},
		{"chat id that is not a Lark chat id", func(r *schemas.WorkspaceRecord) { r.Chats = []ids.ChatID{"oc_a", "chat_1"} }, "chats[1]", ids.ErrInvalidID},
		{"chat id with a slash", func(r *schemas.WorkspaceRecord) { r.Chats = []ids.ChatID{"oc_a/b"} }, "chats[0]", ids.ErrInvalidID},
		{"duplicate chat", func(r *schemas.WorkspaceRecord) { r.Chats = []ids.ChatID{"oc_a", "oc_a"} }, "chats[1]", nil},
		{"too many chats", func(r *schemas.WorkspaceRecord) { r.Chats = many }, "chats", nil},
		{"creation time in the future", func(r *schemas.WorkspaceRecord) { r.CreatedAt = t0.Add(DefaultClockSkew + time.Second) }, "created_at", nil},
		{"zero creation time", func(r *schemas.WorkspaceRecord) { r.CreatedAt = time.Time{} }, "created_at", nil},
		{"empty type", func(r *schemas.WorkspaceRecord) { r.Type = "" }, "type", nil},
		{"type with spaces", func(r *schemas.WorkspaceRecord) { r.Type = "major incident" }, "type", nil},
		{"type too long", func(r *schemas.WorkspaceRecord) { r.Type = strings.Repeat("t", MaxTypeLen+1) }, "type", nil},
		{"bad workspace id", func(r *schemas.WorkspaceRecord) { r.ID = "a/b" }, "id", ids.ErrInvalidID},
		{"empty workspace id", func(r *schemas.WorkspaceRecord) { r.ID = "" }, "id", ids.ErrInvalidID},
		{"zero version", func(r *schemas.WorkspaceRecord) { r.Version = 0 }, "version", nil},
		{"zero updated_at", func(r *schemas.WorkspaceRecord) { r.UpdatedAt = time.Time{} }, "updated_at", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := validRecord()
			tc.mutate(&rec)
			err := ValidateRecord(&rec, t0, DefaultClockSkew)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("ValidateRecord = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ValidateRecord = %v, want ErrInvalid", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("ValidateRecord = %v, want a FieldError for %q", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("message %q does not name the field %q", err, tc.field)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("ValidateRecord = %v, want it to wrap %v", err, tc.cause)
			}
		})
	}
	if err := ValidateRecord(nil, t0, DefaultClockSkew); !errors.Is(err, ErrInvalid) {
		t.Errorf("ValidateRecord(nil) = %v, want ErrInvalid", err)
	}
}

func TestValidateWorkspaceSkewIsConfigurable(t *testing.T) {
	t.Parallel()
	w := store.Workspace{ID: "INC-1", Type: "incident", Status: store.WorkspaceFiring, CreatedAt: t0.Add(time.Minute)}
	for _, tc := range []struct {
		skew time.Duration
		ok   bool
	}{{0, false}, {time.Minute, true}, {time.Hour, true}} {
		t.Run(tc.skew.String(), func(t *testing.T) {
			t.Parallel()
			err := ValidateWorkspace(w, t0, tc.skew)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateWorkspace with skew %s = %v, want ok=%t", tc.skew, err, tc.ok)
			}
		})
	}
}

func TestParseStatusAndIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want store.WorkspaceStatus
	}{{"firing", store.WorkspaceFiring}, {"recovered", store.WorkspaceRecovered}, {"archived", store.WorkspaceArchived}, {"closed", ""}, {"", ""}} {
		t.Run("status "+tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseStatus(tc.in)
			if tc.want == "" {
				mustIs(t, err, ErrInvalid)
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseStatus(%q) = %q, %v", tc.in, got, err)
			}
		})
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"oc_abc", true}, {"oc_", true}, {"om_abc", false}, {"abc", false}, {"oc_a b", false}, {"", false}} {
		t.Run("chat "+tc.in, func(t *testing.T) {
			t.Parallel()
			_, err := ParseChatID(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("ParseChatID(%q) = %v, want ok=%t", tc.in, err, tc.ok)
			}
			if err != nil {
				mustIs(t, err, ErrInvalid, ids.ErrInvalidID)
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != "chat_id" {
					t.Fatalf("ParseChatID(%q) = %v, want a FieldError for chat_id", tc.in, err)
				}
			}
		})
	}
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"invalid", fieldErr("status", "x", nil), false},
		{"not found", ErrWorkspaceNotFound, false},
		{"stale", ErrStaleVersion, false},
		{"deadline", fmt.Errorf("x: %w", errDeadline{}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := IsRetryable(tc.err); got != tc.want {
				t.Fatalf("IsRetryable(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}

// errDeadline is a net.Error-like timeout.
type errDeadline struct{}

func (errDeadline) Error() string   { return "i/o timeout" }
func (errDeadline) Timeout() bool   { return true }
func (errDeadline) Temporary() bool { return true }
