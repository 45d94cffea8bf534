package normalize

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Evidence is the evidence record of m in workspace ws: the one builder both the event
// path (ingest) and history reconciliation (reconcile) use, so a message's evidence is
// identical whichever path produced it, apart from path and observed. displayName is
// the sender's cached name ("" when unknown).
func (m Message) Evidence(ws ids.WorkspaceID, displayName string, observed time.Time, path schemas.IngestPath) (schemas.EvidenceRecord, error) {
	meta := []byte("{}")
	if m.Metadata != nil {
		var err error
		if meta, err = json.Marshal(m.Metadata); err != nil {
			return schemas.EvidenceRecord{}, fmt.Errorf("evidence metadata of message %s: %w", m.MessageID, err)
		}
	}
	return schemas.EvidenceRecord{
		WorkspaceID:       ws,
		ChatID:            m.ChatID,
		MessageID:         m.MessageID,
		Source:            ids.SourceLark,
		SourceType:        ids.SourceTypeLarkMessage,
		SourceKey:         ids.MessageSourceKey(m.ChatID, m.MessageID),
		OccurredAt:        m.CreatedAt,
		SourceUpdatedAt:   m.UpdatedAt,
		ObservedAt:        observed.UTC(),
		ActorID:           m.SenderOpenID,
		ActorDisplayName:  displayName,
		MessageType:       m.MessageType,
		Content:           m.Text,
		ContentHash:       m.ContentHash,
		Deleted:           m.Deleted,
		SynthesisEligible: m.SynthesisEligible,
		IneligibleReason:  m.IneligibleReason,
		ThreadID:          m.ThreadID,
		RootID:            m.RootID,
		ParentID:          m.ParentID,
		MetadataJSON:      string(meta),
		IngestPath:        path,
	}, nil
}
