package workspaces

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeRecordJSON(t *testing.T) {
	t.Parallel()
	const full = `{"id":"INC-1","type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z",
		"version":3,"chats":["oc_a","oc_b"],"updated_at":"2025-03-04T10:00:00+01:00"}`
	r, err := DecodeRecordJSON(strings.NewReader(full))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "INC-1" || r.Type != "incident" || r.Status != "firing" || r.Version != 3 || len(r.Chats) != 2 ||
		!r.CreatedAt.Equal(t0.Add(-time.Hour)) || !r.UpdatedAt.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("decoded %+v", r)
	}
	if err := ValidateRecord(&r, t0, DefaultClockSkew); err != nil {
		t.Fatalf("decoded record is invalid: %v", err)
	}
	for _, tc := range []struct {
		name, in, field string
	}{
		{"empty", ``, "record"},
		{"not an object", `[1]`, "record"},
		{"unknown field", `{"id":"a","owner":"x"}`, "record"},
		{"trailing data", `{"id":"INC-1","type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z","version":3} x`, "record"},
		{"missing id", `{"type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z","version":3}`, "id"},
		{"missing version", `{"id":"INC-1","type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z"}`, "version"},
		{"bad created_at", `{"id":"INC-1","type":"incident","status":"firing","created_at":"yesterday","version":3}`, "created_at"},
		{"bad updated_at", `{"id":"INC-1","type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z","version":3,"updated_at":"1"}`, "updated_at"},
		{"too large", `{"id":"` + strings.Repeat("x", MaxRecordJSONBytes) + `"}`, "record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeRecordJSON(strings.NewReader(tc.in))
			var fe *FieldError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("DecodeRecordJSON = %v, want a FieldError for %s", err, tc.field)
			}
		})
	}
}
