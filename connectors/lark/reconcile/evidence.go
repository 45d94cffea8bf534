package reconcile

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

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

// produceEvidence encodes msgs as evidence of ws and waits until Kafka
// acknowledged every record.
func (r *Reconciler) produceEvidence(ctx context.Context, ws ids.WorkspaceID, msgs []normalize.Message, path schemas.IngestPath) error {
	if len(msgs) == 0 {
		return nil
	}
	observed := r.opts.Clock().UTC()
	recs := make([]*kgo.Record, 0, len(msgs))
	for i := range msgs {
		var name string
		if n := r.opts.Names; n != nil && msgs[i].SenderType == normalize.SenderUser && msgs[i].SenderOpenID != "" {
			name, _ = n.Name(msgs[i].SenderOpenID)
		}
		rec, err := msgs[i].Evidence(ws, name, observed, path) // the builder the event path uses too
		if err != nil {
			return fail(reasonEncode, err)
		}
		value, err := r.opts.EvidenceCodec.Encode(ctx, rec)
		if err != nil {
			return fail(reasonEncode, fmt.Errorf("evidence of message %s for workspace %s: %w", rec.MessageID, ws, err))
		}
		// Stamped with the observed time: franz-go measures a delivery timeout
		// from the record timestamp, and a backfilled message may be days old.
		recs = append(recs, &kgo.Record{Topic: r.opts.EvidenceTopic, Key: []byte(rec.Key()), Value: value, Timestamp: observed})
	}
	res, err := r.produce(ctx, recs, "evidence")
	r.noteEvidenceOffsets(ws, res) // acknowledged records count even when others failed
	if err != nil {
		return fail(reasonKafka, err)
	}
	return nil
}

// noteEvidenceOffsets remembers, per chat, one past the highest offset of the
// evidence Kafka acknowledged: the barrier the chat's next checkpoints carry
// (schemas.CollectionCheckpoint.EvidenceEndOffset). Every record of a chat goes to
// the chat's partition, so one offset per chat says it all.
func (r *Reconciler) noteEvidenceOffsets(ws ids.WorkspaceID, res kgo.ProduceResults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pr := range res {
		if pr.Err != nil || pr.Record == nil {
			continue
		}
		_, chat, _, err := ids.ParseEvidenceKey(string(pr.Record.Key))
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

// produce writes recs, waits for every acknowledgement and returns the results.
func (r *Reconciler) produce(ctx context.Context, recs []*kgo.Record, what string) (kgo.ProduceResults, error) {
	var (
		errs   []error
		failed int
	)
	res := r.opts.Producer.ProduceSync(ctx, recs...)
	for _, pr := range res {
		if pr.Err != nil {
			failed++
			if len(errs) == 0 {
				errs = append(errs, pr.Err)
			}
		}
	}
	if failed == 0 {
		return res, nil
	}
	return res, fmt.Errorf("%d of %d %s records not acknowledged by Kafka: %w", failed, len(recs), what, errs[0])
}

// observeMentions offers the names Lark sent with mentions to the name cache, as
// the event path does.
func (r *Reconciler) observeMentions(in normalize.Input) {
	if r.opts.Names == nil {
		return
	}
	for _, mn := range in.Mentions {
		if mn.OpenID != "" && mn.Name != "" {
			r.opts.Names.Observe(mn.OpenID, mn.Name)
		}
	}
}
