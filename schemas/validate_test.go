package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

type validateCase[T any] struct {
	name   string
	mutate func(*T)
	ok     bool
	idErr  bool // the error also wraps ids.ErrInvalidID
}

func runValidate[T any](t *testing.T, sample func() T, validate func(*T) error, cases []validateCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := sample()
			tc.mutate(&v)
			err := validate(&v)
			if tc.ok {
				if err != nil {
					t.Fatalf("valid record rejected: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("error %v, want ErrInvalidRecord", err)
			}
			if tc.idErr != errors.Is(err, ids.ErrInvalidID) {
				t.Fatalf("error %v: wraps ids.ErrInvalidID = %v, want %v", err, !tc.idErr, tc.idErr)
			}
		})
	}
}

const secretText = "the root password is hunter2"

func TestValidateEvidence(t *testing.T) {
	runValidate(t, sampleEvidence, (*EvidenceRecord).Validate, []validateCase[EvidenceRecord]{
		{"sample", func(*EvidenceRecord) {}, true, false},
		{"all nullable null", func(r *EvidenceRecord) { *r = sampleEvidenceNulls() }, true, false},
		{"deleted", func(r *EvidenceRecord) { *r = sampleEvidenceDeleted() }, true, false},
		{"no sender", func(r *EvidenceRecord) { r.ActorID = "" }, true, false},
		{"workspace with slash", func(r *EvidenceRecord) { r.WorkspaceID = "ws/1" }, false, true},
		{"chat without prefix", func(r *EvidenceRecord) { r.ChatID = "chat" }, false, true},
		{"empty message", func(r *EvidenceRecord) { r.MessageID = "" }, false, true},
		{"source jira", func(r *EvidenceRecord) { r.Source = "jira" }, false, false},
		{"source type", func(r *EvidenceRecord) { r.SourceType = ids.SourceTypeLarkMessages }, false, false},
		{"source key of another message", func(r *EvidenceRecord) { r.SourceKey = ids.MessageSourceKey(r.ChatID, "om_other") }, false, false},
		{"zero occurred_at", func(r *EvidenceRecord) { r.OccurredAt = time.Time{} }, false, false},
		{"zero observed_at", func(r *EvidenceRecord) { r.ObservedAt = time.Time{} }, false, false},
		{"actor with space", func(r *EvidenceRecord) { r.ActorID = "ou 1" }, false, false},
		{"display name too long", func(r *EvidenceRecord) { r.ActorDisplayName = strings.Repeat("x", MaxDisplayNameBytes+1) }, false, false},
		{"message type empty", func(r *EvidenceRecord) { r.MessageType = "" }, false, false},
		{"content too long", func(r *EvidenceRecord) { r.Content = strings.Repeat(secretText, MaxContentBytes/len(secretText)+1) }, false, false},
		{"content not utf-8", func(r *EvidenceRecord) { r.Content = secretText + "\xff" }, false, false},
		{"hash upper case", func(r *EvidenceRecord) { r.ContentHash = strings.ToUpper(r.ContentHash) }, false, false},
		{"hash short", func(r *EvidenceRecord) { r.ContentHash = r.ContentHash[:63] }, false, false},
		{"deleted with content", func(r *EvidenceRecord) { *r = sampleEvidenceDeleted(); r.Content = secretText }, false, false},
		{"deleted and eligible", func(r *EvidenceRecord) {
			*r = sampleEvidenceDeleted()
			r.SynthesisEligible, r.IneligibleReason = true, ""
		}, false, false},
		{"eligible with reason", func(r *EvidenceRecord) { r.IneligibleReason = IneligibleSystem }, false, false},
		{"reason with space", func(r *EvidenceRecord) { r.SynthesisEligible, r.IneligibleReason = false, "own app" }, false, false},
		{"thread with slash", func(r *EvidenceRecord) { r.ThreadID = "omt/1" }, false, false},
		{"root not a message", func(r *EvidenceRecord) { r.RootID = "oc_1" }, false, true},
		{"parent not a message", func(r *EvidenceRecord) { r.ParentID = "x" }, false, true},
		{"metadata empty", func(r *EvidenceRecord) { r.MetadataJSON = "" }, false, false},
		{"metadata array", func(r *EvidenceRecord) { r.MetadataJSON = "[]" }, false, false},
		{"metadata null", func(r *EvidenceRecord) { r.MetadataJSON = "null" }, false, false},
		{"metadata broken", func(r *EvidenceRecord) { r.MetadataJSON = `{"a":` }, false, false},
		{"metadata too big", func(r *EvidenceRecord) { r.MetadataJSON = `{"a":"` + strings.Repeat("x", MaxMetadataBytes) + `"}` }, false, false},
		{"ingest path unknown", func(r *EvidenceRecord) { r.IngestPath = "backfill" }, false, false},
		{"ingest path empty", func(r *EvidenceRecord) { r.IngestPath = "" }, false, false},
	})
}

// TestValidationErrorsCarryNoText: errors about free text never quote it, so they
// are safe to log and to park in a dead letter.
func TestValidationErrorsCarryNoText(t *testing.T) {
	for _, mutate := range []func(*EvidenceRecord){
		func(r *EvidenceRecord) { r.Content = secretText + "\xff" },
		func(r *EvidenceRecord) { r.Deleted, r.Content = true, secretText },
		func(r *EvidenceRecord) { r.ActorDisplayName = secretText + strings.Repeat("!", MaxDisplayNameBytes) },
		func(r *EvidenceRecord) { r.MetadataJSON = `{"note":"` + secretText + `"` },
	} {
		r := sampleEvidence()
		mutate(&r)
		err := r.Validate()
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("error %v quotes the text", err)
		}
	}
}

func TestValidateClosedWindow(t *testing.T) {
	runValidate(t, sampleWindow, (*ClosedWindow).Validate, []validateCase[ClosedWindow]{
		{"sample", func(*ClosedWindow) {}, true, false},
		{"bad workspace", func(w *ClosedWindow) { w.WorkspaceID = "" }, false, true},
		{"end before start", func(w *ClosedWindow) { w.WindowEnd = w.WindowStart }, false, false},
		{"zero start", func(w *ClosedWindow) { w.WindowStart = time.Time{} }, false, false},
		{"processor version with slash", func(w *ClosedWindow) { w.ProcessorVersion = "v/2" }, false, true},
		{"negative partition", func(w *ClosedWindow) { w.EvidencePartition = -1 }, false, false},
		{"negative low offset", func(w *ClosedWindow) { w.EvidenceLowOffset = -1 }, false, false},
		{"empty range", func(w *ClosedWindow) { w.EvidenceEndOffset = w.EvidenceLowOffset }, false, false},
		{"no evidence", func(w *ClosedWindow) { w.EvidenceCount = 0 }, false, false},
		{"more evidence than offsets", func(w *ClosedWindow) { w.EvidenceCount = 18 }, false, false},
		{"as many evidence versions as offsets", func(w *ClosedWindow) { w.EvidenceCount = 17 }, true, false},
		{"first occurred before the window", func(w *ClosedWindow) { w.FirstOccurredAt = w.WindowStart.Add(-time.Millisecond) }, false, false},
		{"last occurred at the window end", func(w *ClosedWindow) { w.LastOccurredAt = w.WindowEnd }, false, false},
		{"last before first", func(w *ClosedWindow) { w.LastOccurredAt = w.FirstOccurredAt.Add(-time.Millisecond) }, false, false},
		{"first and last at the window start", func(w *ClosedWindow) { w.FirstOccurredAt, w.LastOccurredAt = w.WindowStart, w.WindowStart }, true, false},
		{"zero closed_at", func(w *ClosedWindow) { w.ClosedAt = time.Time{} }, false, false},
		{"empty reason", func(w *ClosedWindow) { w.Reason = "" }, false, false},
	})
}

func TestValidateCheckpoint(t *testing.T) {
	runValidate(t, sampleCheckpoint, (*CollectionCheckpoint).Validate, []validateCase[CollectionCheckpoint]{
		{"sample", func(*CollectionCheckpoint) {}, true, false},
		{"no cursor yet", func(p *CollectionCheckpoint) { *p = sampleCheckpointEmpty() }, true, false},
		{"bad chat", func(p *CollectionCheckpoint) { p.ChatID = "om_1" }, false, true},
		{"time without message", func(p *CollectionCheckpoint) { p.CursorMessageID = "" }, false, false},
		{"negative time", func(p *CollectionCheckpoint) { p.CursorCreateTimeMS = -1 }, false, false},
		{"bad message", func(p *CollectionCheckpoint) { p.CursorMessageID = "oc_1" }, false, true},
		{"zero covered_until", func(p *CollectionCheckpoint) { p.CoveredUntil = time.Time{} }, false, false},
		{"zero updated_at", func(p *CollectionCheckpoint) { p.UpdatedAt = time.Time{} }, false, false},
		{"empty reconcile version", func(p *CollectionCheckpoint) { p.ReconcileVersion = "" }, false, false},
		{"negative evidence end offset", func(p *CollectionCheckpoint) { p.EvidenceEndOffset = -1 }, false, false},
		{"no evidence barrier", func(p *CollectionCheckpoint) { p.EvidenceEndOffset = 0 }, true, false},
	})
}

func TestValidateWorkspace(t *testing.T) {
	runValidate(t, sampleWorkspace, (*WorkspaceRecord).Validate, []validateCase[WorkspaceRecord]{
		{"sample", func(*WorkspaceRecord) {}, true, false},
		{"no chats", func(w *WorkspaceRecord) { w.Chats = nil }, true, false},
		{"bad id", func(w *WorkspaceRecord) { w.ID = "a b" }, false, true},
		{"empty type", func(w *WorkspaceRecord) { w.Type = "" }, false, false},
		{"status with space", func(w *WorkspaceRecord) { w.Status = "on fire" }, false, false},
		{"version zero", func(w *WorkspaceRecord) { w.Version = 0 }, false, false},
		{"duplicate chat", func(w *WorkspaceRecord) { w.Chats = append(w.Chats, w.Chats[0]) }, false, false},
		{"bad chat", func(w *WorkspaceRecord) { w.Chats = append(w.Chats, "om_1") }, false, true},
		{"too many chats", func(w *WorkspaceRecord) { w.Chats = make([]ids.ChatID, MaxWorkspaceChats+1) }, false, false},
		{"zero created_at", func(w *WorkspaceRecord) { w.CreatedAt = time.Time{} }, false, false},
	})
}

func TestWorkspaceSupersedes(t *testing.T) {
	old := sampleWorkspace()
	newer, same, older := old, old, old
	newer.Version, older.Version = old.Version+1, old.Version-1
	cases := []struct {
		name string
		w    *WorkspaceRecord
		held *WorkspaceRecord
		want bool
	}{
		{"nothing held", &old, nil, true},
		{"newer", &newer, &old, true},
		{"same", &same, &old, false},
		{"older", &older, &old, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.Supersedes(tc.held); got != tc.want {
				t.Fatalf("Supersedes = %v", got)
			}
		})
	}
}

func TestValidateDeadLetter(t *testing.T) {
	runValidate(t, sampleDeadLetter, (*DeadLetter).Validate, []validateCase[DeadLetter]{
		{"sample", func(*DeadLetter) {}, true, false},
		{"unknown location", func(d *DeadLetter) { d.Partition, d.Offset = -1, -1 }, true, false},
		{"empty stage", func(d *DeadLetter) { d.Stage = "" }, false, false},
		{"empty reason", func(d *DeadLetter) { d.Reason = "" }, false, false},
		{"error too long", func(d *DeadLetter) { d.Error = strings.Repeat("e", MaxDeadLetterErrorBytes+1) }, false, false},
		{"error not utf-8", func(d *DeadLetter) { d.Error = "\xff" }, false, false},
		{"bad topic", func(d *DeadLetter) { d.Topic = "a b" }, false, false},
		{"empty topic", func(d *DeadLetter) { d.Topic = "" }, false, false},
		{"partition -2", func(d *DeadLetter) { d.Partition = -2 }, false, false},
		{"offset -2", func(d *DeadLetter) { d.Offset = -2 }, false, false},
		{"zero failed_at", func(d *DeadLetter) { d.FailedAt = time.Time{} }, false, false},
		{"schema ref with space", func(d *DeadLetter) { d.OriginalSchema = "avro crc" }, false, false},
	})
}

func TestKeys(t *testing.T) {
	e, w, p, k := sampleEvidence(), sampleWindow(), sampleCheckpoint(), sampleWorkspace()
	cases := []struct{ name, got, want string }{
		{"evidence", e.Key(), "ws-incident-42/oc_a0553eda9014c201e6969b478895c230/om_dc13264520392913993dd051dba21dcf"},
		{"window", w.Key(), "ws-incident-42/oc_a0553eda9014c201e6969b478895c230"},
		{"checkpoint", p.Key(), "ws-incident-42/oc_a0553eda9014c201e6969b478895c230"},
		{"workspace", k.Key(), "ws-incident-42"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("key %q, want %q", tc.got, tc.want)
			}
		})
	}
}
