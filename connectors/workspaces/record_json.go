package workspaces

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// MaxRecordJSONBytes bounds the JSON of one record read by DecodeRecordJSON (room for
// MaxChats chat ids).
const MaxRecordJSONBytes = 2 << 20

type recordJSON struct {
	ID        *string  `json:"id"`
	Type      *string  `json:"type"`
	Status    *string  `json:"status"`
	CreatedAt *string  `json:"created_at"`
	Version   *int64   `json:"version"`
	Chats     []string `json:"chats"`
	UpdatedAt *string  `json:"updated_at"`
}

// DecodeRecordJSON reads one feed record written as JSON, the form `larkline
// workspaces publish` and scripts use:
//
//	{"id":"INC-1","type":"incident","status":"firing","created_at":"2025-01-02T15:04:05Z",
//	 "version":1717000000000,"chats":["oc_a","oc_b"],"updated_at":"2025-01-02T15:05:00Z"}
//
// id, type, status, created_at and version are required; chats defaults to none and
// updated_at to the time of publishing. Unknown fields are rejected. It checks the
// form only; Publish validates the record. Errors wrap ErrInvalid and name the field.
func DecodeRecordJSON(r io.Reader) (schemas.WorkspaceRecord, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxRecordJSONBytes+1))
	if err != nil {
		return schemas.WorkspaceRecord{}, fmt.Errorf("read workspace record JSON: %w", err)
	}
	if len(b) > MaxRecordJSONBytes {
		return schemas.WorkspaceRecord{}, fieldErr("record", fmt.Sprintf("larger than %d bytes", MaxRecordJSONBytes), nil)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var in recordJSON
	if err := dec.Decode(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return schemas.WorkspaceRecord{}, fieldErr("record", "no JSON object given", nil)
		}
		return schemas.WorkspaceRecord{}, fieldErr("record", "not a workspace record JSON object: "+jsonProblem(err), nil)
	}
	if _, err := dec.Token(); err != io.EOF {
		return schemas.WorkspaceRecord{}, fieldErr("record", "unexpected data after the JSON object", nil)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"id", in.ID != nil}, {"type", in.Type != nil}, {"status", in.Status != nil},
		{"created_at", in.CreatedAt != nil}, {"version", in.Version != nil}} {
		if !f.set {
			return schemas.WorkspaceRecord{}, fieldErr(f.name, "is required", nil)
		}
	}
	rec := schemas.WorkspaceRecord{ID: ids.WorkspaceID(*in.ID), Type: *in.Type, Status: *in.Status, Version: *in.Version}
	if rec.CreatedAt, err = parseTime("created_at", *in.CreatedAt); err != nil {
		return schemas.WorkspaceRecord{}, err
	}
	if in.UpdatedAt != nil {
		if rec.UpdatedAt, err = parseTime("updated_at", *in.UpdatedAt); err != nil {
			return schemas.WorkspaceRecord{}, err
		}
	}
	if len(in.Chats) > 0 {
		rec.Chats = make([]ids.ChatID, len(in.Chats))
		for i, c := range in.Chats {
			rec.Chats[i] = ids.ChatID(c)
		}
	}
	return rec, nil
}
