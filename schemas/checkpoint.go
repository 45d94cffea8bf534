package schemas

import (
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// DefaultCheckpointTopic is the compacted topic of CollectionCheckpoint values.
const DefaultCheckpointTopic = "larkline.checkpoints.v1"

// CollectionCheckpoint says how far the history of one chat has been collected for
// one workspace (schema io.larkline.CollectionCheckpoint). Its record key is Key().
// The reconciler publishes it only after Kafka acknowledged every page it covers.
type CollectionCheckpoint struct {
	WorkspaceID ids.WorkspaceID
	ChatID      ids.ChatID
	// CoveredUntil: chat history is complete up to this instant.
	CoveredUntil time.Time
	// CursorCreateTimeMS and CursorMessageID are the durable high-water mark: the
	// creation time (Unix ms, as Lark reports it) and id of the last collected
	// message. Both are zero ("" is null on the wire) until a message is collected.
	CursorCreateTimeMS int64
	CursorMessageID    ids.MessageID
	UpdatedAt          time.Time
	// ReconcileVersion identifies the reconciliation logic that wrote the checkpoint.
	ReconcileVersion string
	// EvidenceEndOffset is one past the highest offset of the evidence records the
	// reconciler produced for this chat up to this checkpoint, on the chat's
	// partition of the evidence topic (which the checkpoint topic shares: same
	// partitioner, same partition count). It follows Kafka's committed-offset
	// convention, so a consumer of both topics holds all of that evidence once it has
	// processed the evidence partition up to here or its group committed at least
	// this offset there: the read-your-writes barrier of coverage gating. 0 means no
	// barrier (the reconciler produced nothing for the chat since it started). Never
	// negative.
	EvidenceEndOffset int64
}

// Key returns the record key <workspace>/<chat>.
func (p *CollectionCheckpoint) Key() string { return ids.ChatKey(p.WorkspaceID, p.ChatID) }

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (p *CollectionCheckpoint) Validate() error {
	c := checker{rec: NameCollectionCheckpoint}
	_, err := ids.ParseWorkspaceID(string(p.WorkspaceID))
	c.wrap("workspace_id", err)
	_, err = ids.ParseChatID(string(p.ChatID))
	c.wrap("chat_id", err)
	c.time("covered_until", p.CoveredUntil)
	switch {
	case p.CursorCreateTimeMS < 0:
		c.fail("cursor_create_time_ms %d is negative", p.CursorCreateTimeMS)
	case p.CursorMessageID == "" && p.CursorCreateTimeMS != 0:
		c.fail("cursor_create_time_ms is set without cursor_message_id")
	case p.CursorMessageID != "":
		_, err := ids.ParseMessageID(string(p.CursorMessageID))
		c.wrap("cursor_message_id", err)
	}
	c.time("updated_at", p.UpdatedAt)
	c.token("reconcile_version", p.ReconcileVersion, MaxTokenLen)
	if p.EvidenceEndOffset < 0 {
		c.fail("evidence_end_offset %d is negative", p.EvidenceEndOffset)
	}
	return c.err
}

var checkpointType = &recordType[CollectionCheckpoint]{
	name:     NameCollectionCheckpoint,
	topic:    DefaultCheckpointTopic,
	validate: (*CollectionCheckpoint).Validate,
	toNative: func(p *CollectionCheckpoint) map[string]any {
		return map[string]any{
			"workspace_id":          string(p.WorkspaceID),
			"chat_id":               string(p.ChatID),
			"covered_until":         millis(p.CoveredUntil),
			"cursor_create_time_ms": p.CursorCreateTimeMS,
			"cursor_message_id":     nullableString(string(p.CursorMessageID)),
			"updated_at":            millis(p.UpdatedAt),
			"reconcile_version":     p.ReconcileVersion,
			"evidence_end_offset":   p.EvidenceEndOffset,
		}
	},
	fromNative: func(f *fieldReader) (CollectionCheckpoint, error) {
		p := CollectionCheckpoint{
			WorkspaceID:        ids.WorkspaceID(f.str("workspace_id")),
			ChatID:             ids.ChatID(f.str("chat_id")),
			CoveredUntil:       f.timestamp("covered_until"),
			CursorCreateTimeMS: f.long("cursor_create_time_ms"),
			CursorMessageID:    ids.MessageID(f.optStr("cursor_message_id")),
			UpdatedAt:          f.timestamp("updated_at"),
			ReconcileVersion:   f.str("reconcile_version"),
			EvidenceEndOffset:  f.long("evidence_end_offset"),
		}
		return p, f.err
	},
}

// NewCheckpointCodec returns the codec of CollectionCheckpoint values.
func NewCheckpointCodec(opts ...Option) (*Codec[CollectionCheckpoint], error) {
	return newCodec(checkpointType, opts)
}
