package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Republish (issue #29). Compaction keeps the record at a key's latest offset. When
// a lower-ranked version lands after a redaction (a webhook redelivery of the live
// message after its recall: the ingester's replay guard is per process), Postgres
// keeps the redaction (the store's version rule) but compaction would keep the text.
// So the sink, which sees every version of a key in offset order and knows the stored
// winner, publishes the stored redaction again after such a version: the latest
// offset of the key carries the highest-ranked version again, and reading the
// republished record back changes nothing (the same content hash).

// outranked returns, per key of the batch, its last version when the store ranked it
// below the stored row (EvidenceStale): the topic's latest record of that key is not
// the winner. A last version left out as a redelivery takes the result of the
// version it repeats.
func (b *batch) outranked() []*version {
	var out []*version
	for _, k := range b.order {
		last := k.chain[len(k.chain)-1]
		if last.tombstone || last.parked || last.republished {
			continue
		}
		res, ok := last.result, last.counted
		for i := len(k.chain) - 2; !ok && i >= 0; i-- {
			if u := k.chain[i]; u.counted && !u.tombstone && sameVersion(u, last) {
				res, ok = u.result, true
			}
		}
		if ok && res == store.EvidenceStale {
			out = append(out, last)
		}
	}
	return out
}

// republishStep publishes again the stored redaction of every key whose latest
// record in the batch is outranked, and waits for the acknowledgements, before the
// batch's offsets are committed (a crash in between reads the batch again and does
// it again). A stored winner that is not a redaction is left alone: the text it
// carries is the current text, and the rank rule keeps it in Postgres.
func (s *Sink) republishStep(ctx context.Context, b *batch) (bool, error) {
	losers := b.outranked()
	if len(losers) == 0 {
		return true, nil
	}
	byWS := map[ids.WorkspaceID][]*version{}
	var wsOrder []ids.WorkspaceID
	for _, v := range losers {
		if _, ok := byWS[v.ws]; !ok {
			wsOrder = append(wsOrder, v.ws)
		}
		byWS[v.ws] = append(byWS[v.ws], v)
	}
	var (
		recs []*kgo.Record
		of   []*version
	)
	for _, ws := range wsOrder {
		vs := byWS[ws]
		keys := make([]string, len(vs))
		for i, v := range vs {
			keys[i] = v.sourceKey
		}
		rows, err := s.store.EvidenceByKeys(ctx, ws, store.LarkMessageEvidence, keys)
		if err != nil {
			if store.IsRetryable(err) || ctx.Err() != nil {
				return false, &retryError{fmt.Errorf("reading the stored winners of workspace %s: %w", ws, err)}
			}
			return false, fmt.Errorf("%w: reading the stored winners of workspace %s: %w", ErrFatal, ws, err)
		}
		stored := make(map[string]*store.Evidence, len(rows))
		for i := range rows {
			stored[rows[i].SourceKey] = &rows[i]
		}
		for _, v := range vs {
			row := stored[v.sourceKey]
			if row == nil || !row.Deleted {
				v.republished = true // nothing to restore
				continue
			}
			rec, ok := winnerRecord(row, v.key)
			if !ok {
				v.republished = true
				s.log.Warn("stored redaction does not make a valid record; not republished", "key_hash", logging.HashID(v.key))
				continue
			}
			val, err := s.codec.Encode(ctx, *rec)
			if err != nil {
				if schemas.IsRetryable(err) || ctx.Err() != nil {
					return false, &retryError{fmt.Errorf("encoding a republished redaction: %w", err)}
				}
				return false, fmt.Errorf("%w: encoding a republished redaction: %w", ErrFatal, err)
			}
			recs = append(recs, &kgo.Record{Topic: v.rec.Topic, Key: v.rec.Key, Value: val})
			of = append(of, v)
		}
	}
	if len(recs) == 0 {
		return true, nil
	}
	var retry error
	for i, res := range s.cl.ProduceSync(ctx, recs...) {
		switch err := res.Err; {
		case err == nil:
			of[i].republished = true
			s.m.republished.Inc()
			s.log.Info("republished a stored redaction above a lower-ranked version", "key_hash", logging.HashID(of[i].key),
				"partition", res.Record.Partition, "offset", res.Record.Offset, "after_offset", of[i].rec.Offset)
		case retryableKafka(err) || ctx.Err() != nil:
			retry = err
		default:
			return false, fmt.Errorf("%w: republishing a redaction to %s: %w", ErrFatal, of[i].rec.Topic, err)
		}
	}
	if retry != nil {
		return false, &retryError{fmt.Errorf("republishing redactions: %w", retry)}
	}
	return true, nil
}

// winnerRecord is the evidence record of a stored redacted row, equal to it in
// content hash, rank and metadata, so that reading it back changes nothing.
func winnerRecord(row *store.Evidence, key string) (*schemas.EvidenceRecord, bool) {
	ws, chat, msg, err := ids.ParseEvidenceKey(key)
	if err != nil || ws != row.WorkspaceID || row.SourceKey != ids.MessageSourceKey(chat, msg) {
		return nil, false
	}
	var md map[string]any
	_ = json.Unmarshal(row.Metadata, &md) // a jsonb object; a bad one leaves fields empty and fails Validate
	str := func(k string) string { s, _ := md[k].(string); return s }
	rec := &schemas.EvidenceRecord{
		WorkspaceID: ws, ChatID: chat, MessageID: msg,
		Source: row.Source, SourceType: row.SourceType, SourceKey: row.SourceKey,
		OccurredAt: row.OccurredAt.UTC(), SourceUpdatedAt: row.SourceUpdatedAt.UTC(), ObservedAt: row.ObservedAt.UTC(),
		ActorID: row.ActorID, ActorDisplayName: row.ActorDisplayName,
		MessageType: str(schemas.MetaMessageType), ContentHash: row.ContentHash,
		Deleted: true, IneligibleReason: schemas.IneligibleDeleted,
		ThreadID: str(schemas.MetaThreadID), RootID: ids.MessageID(str(schemas.MetaRootID)), ParentID: ids.MessageID(str(schemas.MetaParentID)),
		MetadataJSON: string(row.Metadata),
		// The schema has no republish path; like retention's redactions, a version the
		// system writes on its own is "manual".
		IngestPath: schemas.IngestManual,
	}
	if rec.Validate() != nil {
		return nil, false
	}
	return rec, true
}
