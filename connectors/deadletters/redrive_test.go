package deadletters

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// bindingsOf is a Bindings over a map of chat → bound workspaces.
type bindingsOf map[ids.ChatID][]ids.WorkspaceID

func (b bindingsOf) BindingsForChat(_ context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error) {
	var out []store.WorkspaceBinding
	for _, ws := range b[chat] {
		out = append(out, store.WorkspaceBinding{Chat: chat, Workspace: store.Workspace{ID: ws}})
	}
	return out, nil
}

// TestRedriveChecks (issue #29): a dead letter is re-driven only from and to its
// stage's input topic, and a record only with a workspace its chat is bound to; a
// redacted evidence version or a tombstone passes the binding check.
func TestRedriveChecks(t *testing.T) {
	codecs, err := schemas.NewCodecs(schemas.Topics{Evidence: "ev", DeadLetter: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	r := &Redriver{o: RedriverOptions{Codecs: codecs, DeadLetterTopic: "dlq",
		SourceTopics: map[ids.Stage]string{ids.StageSink: "ev", ids.StageSynthesis: "closed", ids.StageWorkspaces: "ws"},
		Bindings:     bindingsOf{"oc_bound": {"ws-1"}}}}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	evidence := func(t *testing.T, ws ids.WorkspaceID, chat ids.ChatID, deleted bool) *kgo.Record {
		rec := schemas.EvidenceRecord{WorkspaceID: ws, ChatID: chat, MessageID: "om_1", Source: ids.SourceLark,
			SourceType: ids.SourceTypeLarkMessage, SourceKey: ids.MessageSourceKey(chat, "om_1"), OccurredAt: at,
			SourceUpdatedAt: at, ObservedAt: at, MessageType: "text", Content: "text", ContentHash: schemas.RedactedContentHash("x"),
			SynthesisEligible: true, MetadataJSON: "{}", IngestPath: schemas.IngestEvent}
		if deleted {
			rec.Content, rec.Deleted, rec.SynthesisEligible, rec.IneligibleReason = "", true, false, schemas.IneligibleDeleted
		}
		v, err := codecs.Evidence.Encode(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: "ev", Key: []byte(rec.Key()), Value: v}
	}
	tests := []struct {
		name  string
		entry Entry
		src   func(t *testing.T) *kgo.Record
		want  string // "" passes
	}{
		{"evidence from the evidence topic, bound chat", Entry{Stage: ids.StageSink, SourceTopic: "ev"},
			func(t *testing.T) *kgo.Record { return evidence(t, "ws-1", "oc_bound", false) }, ""},
		{"evidence naming another topic", Entry{Stage: ids.StageSink, SourceTopic: "closed"},
			func(t *testing.T) *kgo.Record { return evidence(t, "ws-1", "oc_bound", false) }, RefusedWrongTopic},
		{"synthesis naming the workspaces topic", Entry{Stage: ids.StageSynthesis, SourceTopic: "ws"},
			func(t *testing.T) *kgo.Record { return &kgo.Record{Key: []byte("ws-1/oc_bound")} }, RefusedWrongTopic},
		{"evidence of a workspace its chat is not bound to", Entry{Stage: ids.StageSink, SourceTopic: "ev"},
			func(t *testing.T) *kgo.Record { return evidence(t, "ws-2", "oc_bound", false) }, RefusedNotBound},
		{"redacted evidence of an unbound chat passes", Entry{Stage: ids.StageSink, SourceTopic: "ev"},
			func(t *testing.T) *kgo.Record { return evidence(t, "ws-2", "oc_gone", true) }, ""},
		{"a tombstone of an unbound chat passes", Entry{Stage: ids.StageSink, SourceTopic: "ev"},
			func(t *testing.T) *kgo.Record { return &kgo.Record{Key: []byte("ws-2/oc_gone/om_1")} }, ""},
		{"closed window of a bound chat", Entry{Stage: ids.StageSynthesis, SourceTopic: "closed"},
			func(t *testing.T) *kgo.Record { return &kgo.Record{Key: []byte("ws-1/oc_bound"), Value: []byte("x")} }, ""},
		{"closed window of an unbound chat", Entry{Stage: ids.StageSynthesis, SourceTopic: "closed"},
			func(t *testing.T) *kgo.Record { return &kgo.Record{Key: []byte("ws-1/oc_other"), Value: []byte("x")} }, RefusedNotBound},
		{"closed window with a bad key", Entry{Stage: ids.StageSynthesis, SourceTopic: "closed"},
			func(t *testing.T) *kgo.Record { return &kgo.Record{Key: []byte("nochat"), Value: []byte("x")} }, RefusedBadKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.checkTopic(tc.entry)
			if got == "" {
				if got, err = r.checkBinding(context.Background(), tc.entry.Stage, tc.src(t)); err != nil {
					t.Fatal(err)
				}
			}
			if got != tc.want {
				t.Fatalf("check = %q, want %q", got, tc.want)
			}
		})
	}
}
