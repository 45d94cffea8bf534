package synthesis

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// The metadata keys read here are the normalizer's whitelist.
func TestMetadataKeysMatchTheNormalizer(t *testing.T) {
	for _, k := range []struct{ ours, theirs string }{
		{metaThreadID, schemas.MetaThreadID},
		{metaRootID, schemas.MetaRootID},
		{metaParentID, schemas.MetaParentID},
		{metaMessageType, schemas.MetaMessageType},
		{metaSenderType, schemas.MetaSenderType},
		{senderTypeApp, normalize.SenderApp},
	} {
		if k.ours != k.theirs {
			t.Errorf("key %q here, %q in the normalizer", k.ours, k.theirs)
		}
	}
}

func TestToMessage(t *testing.T) {
	at := time.Date(2024, 5, 1, 14, 3, 0, 0, time.FixedZone("CST", 8*3600))
	base := store.Evidence{ID: 42, WorkspaceID: "ws-1", SourceKey: ids.MessageSourceKey("oc_1", "om_42"),
		OccurredAt: at, ActorID: "ou_bob", ActorDisplayName: "Bob", Content: "rolled back"}
	for _, tc := range []struct {
		name    string
		meta    string
		key     string
		deleted bool
		want    synth.Message
		wantErr bool
	}{
		{
			name: "full metadata",
			meta: `{"chat_id":"oc_1","thread_id":"omt_1","root_id":"om_1","parent_id":"om_2","message_type":"post","sender_type":"user","mention_all":true}`,
			want: synth.Message{ThreadID: "omt_1", RootID: "om_1", ParentID: "om_2", MessageType: "post"},
		},
		{name: "bot sender", meta: `{"message_type":"text","sender_type":"app"}`, want: synth.Message{MessageType: "text", FromBot: true}},
		{name: "no metadata: text, no links", meta: `{}`, want: synth.Message{MessageType: "text"}},
		{name: "wrong types are ignored field by field", meta: `{"thread_id":7,"root_id":["x"],"message_type":"post"}`,
			want: synth.Message{MessageType: "post"}},
		{name: "self references and bad ids link nothing", meta: `{"root_id":"om_42","parent_id":"not an id!"}`,
			want: synth.Message{MessageType: "text"}},
		{name: "deleted is carried", meta: `{}`, deleted: true, want: synth.Message{MessageType: "text", Deleted: true}},
		{name: "source key of another chat", meta: `{}`, key: ids.MessageSourceKey("oc_2", "om_42"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := base
			e.Metadata = []byte(tc.meta)
			e.Deleted = tc.deleted
			if tc.key != "" {
				e.SourceKey = tc.key
			}
			got, err := toMessage("oc_1", e, true)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.EvidenceID, want.MessageID, want.SenderOpenID, want.SenderName = 42, "om_42", "ou_bob", "Bob"
			want.OccurredAt, want.Text, want.Context = at.UTC(), "rolled back", true
			if got != want {
				t.Fatalf("message =\n%+v\nwant\n%+v", got, want)
			}
			if got.OccurredAt.Location() != time.UTC {
				t.Fatal("time not in UTC")
			}
		})
	}
}

func TestAggregateHash(t *testing.T) {
	rows := []store.Evidence{{ID: 7, ContentHash: "aa"}, {ID: 12, ContentHash: "bb"}}
	sum := sha256.Sum256([]byte("7\naa\n12\nbb\n"))
	if got, want := AggregateHash(rows), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("AggregateHash = %s, want %s", got, want)
	}
	swapped := []store.Evidence{rows[1], rows[0]}
	if AggregateHash(swapped) == AggregateHash(rows) {
		t.Fatal("the aggregate ignores order")
	}
}
