package retention

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestRedactMatchesRecall: the redaction of a stored row is the very version a recall
// of that message produces (normalize.Redact), for every kind of message.
func TestRedactMatchesRecall(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	observed := at.Add(time.Hour)
	for _, kind := range []string{"text", "image", "file", "recalled"} {
		t.Run(kind, func(t *testing.T) {
			m := message{ws: "ws-1", chat: "oc_1", msg: ids.MessageID("om_msg_" + kind), at: at, kind: kind, name: "Alice"}
			ev := evidenceOf(t, m)
			row := evidenceRow{ID: 7, Workspace: ev.WorkspaceID, SourceKey: ev.SourceKey, OccurredAt: ev.OccurredAt,
				SourceUpdatedAt: ev.SourceUpdatedAt, ActorID: ev.ActorID, ActorName: ev.ActorDisplayName, Content: ev.Content,
				ContentHash: ev.ContentHash, Metadata: ev.Metadata, Deleted: ev.Deleted, Eligible: ev.SynthesisEligible}

			var md map[string]any
			if err := json.Unmarshal(ev.Metadata, &md); err != nil {
				t.Fatal(err)
			}
			recall := normalize.Redact(normalize.Message{MessageType: md[schemas.MetaMessageType].(string), Metadata: md}, time.Time{})
			recall.Metadata[schemas.MetaRetention] = true // retention marks its redactions (decisions D12)
			wantMeta, _ := json.Marshal(recall.Metadata)

			red := redact(row, observed)
			if red.hash != recall.ContentHash || !jsonEqual(red.metadata, wantMeta) {
				t.Fatalf("redaction hash %s meta %s, want the recall's %s %s", red.hash, red.metadata, recall.ContentHash, wantMeta)
			}
			if red.record == nil {
				t.Fatal("no record for a valid row")
			}
			r := red.record
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
			if r.Key() != "ws-1/oc_1/"+string(m.msg) || !r.Deleted || r.Content != "" || r.SynthesisEligible ||
				r.ContentHash != red.hash || r.MetadataJSON != string(red.metadata) || !r.ObservedAt.Equal(observed) ||
				r.ActorDisplayName != "" || r.ActorID != ev.ActorID || r.IngestPath != schemas.IngestManual {
				t.Fatalf("record %+v", r)
			}
			// A row is "already redacted" only in exactly that form, retention's marker
			// included: a recall's redaction merely looks redacted (issue #29).
			if kind == "recalled" {
				row.ActorName = ""
				if alreadyRedacted(row, red) {
					t.Fatal("a recalled row without retention's marker counts as retention's redaction")
				}
				marked := row
				marked.Metadata = red.metadata
				if !alreadyRedacted(marked, red) {
					t.Fatal("retention's own redaction is not recognised")
				}
				row.ActorName = "Alice"
			}
			if alreadyRedacted(row, red) {
				t.Fatal("a row with content or a display name counts as redacted")
			}
		})
	}
}

// TestRedactOddRows: rows the sink would never write still get a valid redaction, or
// a redaction for Postgres only when there is no key to publish under.
func TestRedactOddRows(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := evidenceRow{ID: 1, Workspace: "ws-1", SourceKey: "chat/oc_1/message/om_1", OccurredAt: at, SourceUpdatedAt: at,
		ActorID: "ou_1", Content: "text", ContentHash: "h", Metadata: []byte(`{"message_type":"text","image_key":"img_1"}`), Eligible: true}
	tests := []struct {
		name        string
		mutate      func(*evidenceRow)
		publishable bool
		check       func(t *testing.T, red redaction)
	}{
		{"no message type", func(r *evidenceRow) { r.Metadata = []byte(`{"file_name":"x.pdf"}`) }, true, func(t *testing.T, red redaction) {
			if red.record.MessageType != unknownMessageType || strings.Contains(string(red.metadata), "file_name") {
				t.Fatalf("record type %q metadata %s", red.record.MessageType, red.metadata)
			}
		}},
		{"empty metadata", func(r *evidenceRow) { r.Metadata = nil }, true, nil},
		{"invalid actor id", func(r *evidenceRow) { r.ActorID = "ou 1/x" }, true, func(t *testing.T, red redaction) {
			if red.record.ActorID != "" {
				t.Fatalf("actor id %q kept", red.record.ActorID)
			}
		}},
		{"invalid reply ids", func(r *evidenceRow) {
			r.Metadata = []byte(`{"message_type":"text","root_id":"not-a-message","parent_id":"om_2","thread_id":"bad id"}`)
		}, true, func(t *testing.T, red redaction) {
			if red.record.RootID != "" || red.record.ParentID != "om_2" || red.record.ThreadID != "" {
				t.Fatalf("record root %q parent %q thread %q", red.record.RootID, red.record.ParentID, red.record.ThreadID)
			}
		}},
		{"source key without message", func(r *evidenceRow) { r.SourceKey = "chat/oc_1" }, false, nil},
		{"source key with a bad chat", func(r *evidenceRow) { r.SourceKey = "chat/xx_1/message/om_1" }, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := base
			tt.mutate(&row)
			red := redact(row, at)
			if (red.record != nil) != tt.publishable {
				t.Fatalf("publishable = %v, want %v", red.record != nil, tt.publishable)
			}
			if red.hash == "" || !json.Valid(red.metadata) || !strings.Contains(string(red.metadata), `"deleted":true`) {
				t.Fatalf("redaction %+v", red)
			}
			if _, ok := row.topicKey(); ok != tt.publishable {
				t.Fatalf("topic key ok = %v", ok)
			}
			if tt.check != nil {
				tt.check(t, red)
			}
		})
	}
}

func TestKeptMetadataKeys(t *testing.T) {
	for _, k := range []string{schemas.MetaChatID, schemas.MetaMessageType, schemas.MetaThreadID, schemas.MetaDeleted, schemas.MetaRetention} {
		if !slices.Contains(keptMetadataKeys, k) {
			t.Errorf("kept keys %v lack %s", keptMetadataKeys, k)
		}
	}
	for _, k := range []string{schemas.MetaImageKey, schemas.MetaFileName, schemas.MetaFileKey, schemas.MetaMentionOpenIDs} {
		if slices.Contains(keptMetadataKeys, k) {
			t.Errorf("kept keys %v include attachment or mention key %s", keptMetadataKeys, k)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	codecs, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	valid := func() Options {
		return Options{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9092"}}, Codecs: codecs, Retention: time.Hour}
	}
	// valid() has no pool, so every case also reports Pool; each case checks that
	// its own option is named too.
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"no pool", func(*Options) {}, "Pool"},
		{"no codecs", func(o *Options) { o.Codecs = nil }, "Codecs"},
		{"no retention", func(o *Options) { o.Retention = 0 }, "Retention"},
		{"bad mode", func(o *Options) { o.Mode = "shred" }, "Mode"},
		{"acks leader", func(o *Options) { o.Kafka.Producer.Acks = kafka.AcksLeader; o.Kafka.Producer.DisableIdempotence = true }, "Kafka.Producer.Acks"},
		{"same topics", func(o *Options) { o.EvidenceTopic, o.CheckpointTopic = "t", "t" }, "CheckpointTopic"},
		{"interval", func(o *Options) { o.Interval = time.Millisecond }, "Interval"},
		{"batch size", func(o *Options) { o.BatchSize = MaxBatchSize + 1 }, "BatchSize"},
		{"negative batch size", func(o *Options) { o.BatchSize = -1 }, "BatchSize"},
		{"run time", func(o *Options) { o.MaxRunTime = -time.Second }, "MaxRunTime"},
		{"produce timeout", func(o *Options) { o.ProduceTimeout = 48 * time.Hour }, "ProduceTimeout"},
		{"db timeout", func(o *Options) { o.DBTimeout = -1 }, "DBTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mutate(&o)
			_, err := New(o)
			if !errors.Is(err, ErrInvalidOptions) || !hasProblem(err, tt.want) {
				t.Fatalf("New: %v, want ErrInvalidOptions naming %s", err, tt.want)
			}
		})
	}
}

// TestNewRegistersOnce: defaults are applied, and a second job on the same registry
// is refused without disturbing the first one's metrics.
func TestNewRegistersOnce(t *testing.T) {
	e := newEnv(t)
	j, reg := e.job(t, "", func(o *Options) { o.BatchSize = 0 })
	if j.o.Mode != ModeRedact || j.o.BatchSize != DefaultBatchSize || j.o.Interval != DefaultInterval ||
		j.o.MaxRunTime != DefaultMaxRunTime {
		t.Fatalf("defaults not applied: %+v", j.o)
	}
	_, err := New(Options{Kafka: kafka.Options{Brokers: e.brokers}, Pool: e.pool, Codecs: e.codecs, Retention: time.Hour, Registry: reg})
	if err == nil {
		t.Fatal("a second job on one registry was accepted")
	}
	if got := counter(t, reg, "larkline_retention_rows_total", "action", actionRedacted); got != 0 {
		t.Fatalf("first job's metrics disturbed: %v", got)
	}
}

// hasProblem reports whether err names field among its option problems.
func hasProblem(err error, field string) bool {
	for _, p := range options.ProblemsOf(err) {
		if p.Field == field {
			return true
		}
	}
	return false
}
