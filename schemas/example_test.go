package schemas_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func Example() {
	ctx := context.Background()
	codec, err := schemas.NewEvidenceCodec() // no registry: single-object encoding
	if err != nil {
		panic(err)
	}
	at := time.Date(2026, 11, 30, 2, 13, 7, 0, time.UTC)
	chat, msg := ids.ChatID("oc_1"), ids.MessageID("om_1")
	rec := schemas.EvidenceRecord{
		WorkspaceID: "ws-1", ChatID: chat, MessageID: msg,
		Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
		SourceKey:  ids.MessageSourceKey(chat, msg),
		OccurredAt: at, SourceUpdatedAt: at, ObservedAt: at,
		ActorID: "ou_1", MessageType: "text", Content: "failover started",
		ContentHash:       "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		SynthesisEligible: true, MetadataJSON: "{}", IngestPath: schemas.IngestEvent,
	}
	value, err := codec.Encode(ctx, rec)
	if err != nil {
		panic(err)
	}
	got, err := codec.Decode(ctx, value)
	fmt.Println(rec.Key(), got.OccurredAt, err)

	// Bytes written with a schema this binary does not know are parked, not dropped.
	unknown := append([]byte{0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, value[10:]...)
	_, err = codec.Decode(ctx, unknown)
	if schemas.IsUnknownSchema(err) {
		dl := schemas.NewDeadLetter("example", err, schemas.DefaultEvidenceTopic, 0, 42, []byte(rec.Key()), unknown, at)
		fmt.Println(dl.Reason, dl.OriginalSchema)
	}

	// A nil value is a tombstone: the caller's to handle before decoding.
	_, err = codec.Decode(ctx, nil)
	fmt.Println(errors.Is(err, schemas.ErrTombstone))
	// Output:
	// ws-1/oc_1/om_1 2026-11-30 02:13:07 +0000 UTC <nil>
	// unknown_schema avro-crc64:0807060504030201
	// true
}
