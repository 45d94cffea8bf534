package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// TestEvidenceOffsetIsTheFirstVersions: a row keeps the evidence offset of the
// record that first carried its message through later versions (an edit, a recall),
// on both write paths (arrays and COPY); a range read bounded by an offset keeps the
// messages first carried below it, and rows without an offset; a negative offset is
// refused.
func TestEvidenceOffsetIsTheFirstVersions(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		rows int // at least copyEvidenceMinRows takes the COPY path
	}{
		{"arrays", 4},
		{"copy", copyEvidenceMinRows + 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := ids.WorkspaceID("ws-offset-" + tc.name)
			var batch []Evidence
			for i := range tc.rows {
				e := larkEvidence(ws, "oc_a", fmt.Sprintf("om_%04d", i), t0.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("text %d", i))
				e.Offset, e.HasOffset = int64(100+i), true
				batch = append(batch, e)
			}
			// the last message has no offset (written outside the sink)
			batch[tc.rows-1].HasOffset = false
			mustUpsert(t, s, batch...)
			// an edit of message 0 and a recall of message 1, carried at later offsets
			edit := batch[0]
			edit.Content, edit.ContentHash, edit.SourceUpdatedAt, edit.Offset = "edited", hashOf("edited", "live"), edit.SourceUpdatedAt.Add(time.Second), 900
			recall := batch[1]
			recall.Content, recall.ContentHash, recall.Deleted, recall.Offset = "", hashOf("", "deleted"), true, 901
			if out := mustUpsert(t, s, edit, recall); out[0].Result != EvidenceUpdated || out[1].Result != EvidenceRedacted {
				t.Fatalf("edit and recall: %v", out)
			}
			rows, err := s.EvidenceByKeys(ctx, ws, LarkMessageEvidence, []string{batch[0].SourceKey, batch[1].SourceKey, batch[tc.rows-1].SourceKey})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				switch r.SourceKey {
				case batch[0].SourceKey:
					if r.Content != "edited" || !r.HasOffset || r.Offset != 100 {
						t.Errorf("edited row: %q offset %d (%v), want the edit at the first version's offset 100", r.Content, r.Offset, r.HasOffset)
					}
				case batch[1].SourceKey:
					if !r.Deleted || !r.HasOffset || r.Offset != 101 {
						t.Errorf("recalled row: deleted %v offset %d (%v), want deleted at offset 101", r.Deleted, r.Offset, r.HasOffset)
					}
				default:
					if r.HasOffset {
						t.Errorf("a row written without an offset has offset %d", r.Offset)
					}
				}
			}
			// bounded reads: below 102 are messages 0 and 1 (1 recalled: not eligible)
			// and the one without an offset
			page, err := s.EvidenceInRange(ctx, RangeQuery{Workspace: ws, Chat: "oc_a", From: t0, To: t0.Add(time.Hour),
				Limit: MaxPageSize, BelowOffset: 102})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range page.Items {
				got = append(got, r.SourceKey)
			}
			want := []string{batch[0].SourceKey, batch[1].SourceKey, batch[tc.rows-1].SourceKey}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("rows first carried below offset 102: %v, want %v", got, want)
			}
			all, err := s.EvidenceInRange(ctx, RangeQuery{Workspace: ws, Chat: "oc_a", From: t0, To: t0.Add(time.Hour), Limit: MaxPageSize})
			if err != nil || len(all.Items) != tc.rows {
				t.Fatalf("unbounded read: %d rows (%v), want %d", len(all.Items), err, tc.rows)
			}
		})
	}
	bad := larkEvidence("ws-offset-bad", "oc_a", "om_1", t0, "x")
	bad.Offset, bad.HasOffset = -1, true
	if _, err := s.UpsertEvidence(ctx, []Evidence{bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative offset: %v, want ErrInvalid", err)
	}
}
