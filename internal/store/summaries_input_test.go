package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/larkline/larkline/schemas/ids"
)

// TestVersionSummaryInput: the pipelined read answers what VersionSummary and
// VersionVisibleEntries answer, in one round trip.
func TestVersionSummaryInput(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(t *testing.T, ws ids.WorkspaceID)
		entries bool
	}{
		{name: "nothing yet", entries: true},
		{name: "an AI summary and drafts", entries: true, setup: func(t *testing.T, ws ids.WorkspaceID) {
			ev := evidenceIDs(mustUpsert(t, s, larkEvidence(ws, "oc_a", "om_1", t0, "one")))
			if _, err := s.UpsertDraftEntries(ctx, []EntryDraft{draft(ws, "fp-1", "One", ev[0]), draft(ws, "fp-2", "Two", ev[0])}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutAISummaryIfNotHuman(ctx, ws, "ai", []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a human summary, entries not asked", setup: func(t *testing.T, ws ids.WorkspaceID) {
			if err := s.PutHumanSummary(ctx, ws, "human"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := ids.WorkspaceID(fmt.Sprintf("ws-input-%d", i))
			if tt.setup != nil {
				tt.setup(t, ws)
			}
			got, err := s.VersionSummaryInput(ctx, ws, "", tt.entries)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := s.VersionSummary(ctx, ws, "")
			if found := err == nil; found != got.Found || (err != nil && !errors.Is(err, ErrNotFound)) {
				t.Fatalf("found %v, VersionSummary says %v", got.Found, err)
			}
			if !reflect.DeepEqual(got.Summary, sum) {
				t.Errorf("summary %+v, VersionSummary %+v", got.Summary, sum)
			}
			var want []Entry
			if tt.entries {
				if want, err = s.VersionVisibleEntries(ctx, ws, ""); err != nil {
					t.Fatal(err)
				}
			}
			if len(got.Entries) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got.Entries, want)) {
				t.Errorf("entries %+v, VersionVisibleEntries %+v", got.Entries, want)
			}
		})
	}
}
