package reconcile

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// versionDecision says whether a message read from history must be produced,
// given the version stored for it (nil: none).
func versionDecision(msg *normalize.Message, stored *store.Evidence) string {
	switch {
	case stored == nil:
		return msgProduced
	case stored.ContentHash == msg.ContentHash:
		return msgUnchanged
	case stored.Deleted && !msg.Deleted:
		// A recall already stored (from the event path) outranks a history copy
		// that does not show it yet: never un-redact.
		return msgStale
	case stored.SourceUpdatedAt.After(msg.UpdatedAt):
		return msgStale
	}
	return msgProduced
}

// changed returns the messages of msgs whose version is not stored yet for ws, and
// counts the others by outcome.
func (r *Reconciler) changed(ctx context.Context, ws ids.WorkspaceID, msgs []normalize.Message, counts map[string]int) ([]normalize.Message, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	keys := make([]string, len(msgs))
	for i := range msgs {
		keys[i] = ids.MessageSourceKey(msgs[i].ChatID, msgs[i].MessageID)
	}
	stored, err := r.opts.Store.EvidenceByKeys(ctx, ws, store.LarkMessageEvidence, keys)
	if err != nil {
		return nil, fail(reasonStore, fmt.Errorf("read stored evidence versions: %w", err))
	}
	byKey := make(map[string]*store.Evidence, len(stored))
	for i := range stored {
		byKey[stored[i].SourceKey] = &stored[i]
	}
	out := msgs[:0:0]
	for i := range msgs {
		d := versionDecision(&msgs[i], byKey[keys[i]])
		counts[d]++
		if d == msgProduced {
			out = append(out, msgs[i])
		}
	}
	return out, nil
}

// produceEvidence encodes msgs as evidence of ws (evidence.Writer, the builder the
// event path uses too) and waits until Kafka answered every record.
func (r *Reconciler) produceEvidence(ctx context.Context, ws ids.WorkspaceID, msgs []normalize.Message, path schemas.IngestPath) error {
	if len(msgs) == 0 {
		return nil
	}
	observed := r.opts.Clock()
	recs := make([]*kgo.Record, 0, len(msgs))
	for i := range msgs {
		to, err := r.targets(ctx, ws, &msgs[i])
		if err != nil {
			return err
		}
		rs, err := r.writer.Records(ctx, &msgs[i], to, observed, path)
		if err != nil {
			return fail(reasonEncode, err)
		}
		recs = append(recs, rs...)
	}
	res, err := evidence.ProduceAll(ctx, r.opts.Producer, "evidence", recs)
	r.noteEvidenceOffsets(res) // acknowledged records count even when others failed
	if err != nil {
		return fail(reasonKafka, err)
	}
	return nil
}

// targets are the workspaces msg's new version goes to: ws, and for a deletion every
// other workspace that holds the message too, whatever its state or bindings (issue
// #29: a recall reaches every place the text went). The redacted version is the same
// in each, so a holder that has it already stores nothing new.
func (r *Reconciler) targets(ctx context.Context, ws ids.WorkspaceID, msg *normalize.Message) ([]ids.WorkspaceID, error) {
	if !msg.Deleted {
		return []ids.WorkspaceID{ws}, nil
	}
	held, err := r.opts.Store.WorkspacesHoldingMessage(ctx, msg.ChatID, msg.MessageID)
	if err != nil {
		return nil, fail(reasonStore, fmt.Errorf("find the workspaces holding deleted message %s: %w", msg.MessageID, err))
	}
	out := append([]ids.WorkspaceID{ws}, held...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// noteEvidenceOffsets remembers, per chat, one past the highest offset of the
// evidence Kafka acknowledged: the barrier the chat's next checkpoints carry
// (schemas.CollectionCheckpoint.EvidenceEndOffset). Every record of a chat goes to
// the chat's partition, so one offset per chat says it all.
func (r *Reconciler) noteEvidenceOffsets(res kgo.ProduceResults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pr := range res {
		if pr.Err != nil || pr.Record == nil {
			continue
		}
		ws, chat, _, err := ids.ParseEvidenceKey(string(pr.Record.Key))
		if err != nil {
			continue // our own keys always parse
		}
		key := ids.ChatKey(ws, chat)
		if end := pr.Record.Offset + 1; end > r.evidenceEnd[key] {
			r.evidenceEnd[key] = end
		}
	}
}

// evidenceEndOffset is the barrier of the chat's next checkpoint, 0 when this
// reconciler produced no evidence for the chat.
func (r *Reconciler) evidenceEndOffset(key string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.evidenceEnd[key]
}
