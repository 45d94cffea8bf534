package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/ids"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// version is one decoded record of a batch: an evidence version to upsert, or a
// tombstone to delete.
type version struct {
	rec       *kgo.Record
	key       string // the Kafka key, <workspace>/<chat>/<message>
	ws        ids.WorkspaceID
	sourceKey string // chat/<chat>/message/<message>
	tombstone bool
	row       store.Evidence // when !tombstone
	// prev is the previous version of the same key in this batch, or nil. Only the
	// last version of a key is written; if it has to be parked, prev takes its place,
	// exactly as if the records had been written one by one.
	prev *version
}

// parked is a record headed for the dead-letter topic.
type parked struct {
	rec    *kgo.Record
	cause  error
	reason string // overrides schemas.ReasonOf(cause) when set
	// omitValue: the dead letter with the original value was too large for the
	// dead-letter topic; it is sent without it (topic, partition and offset still
	// locate the original).
	omitValue bool
	acked     bool
}

// call is one store call of a batch: upserts of distinct keys, or the tombstones of
// one workspace.
type call struct {
	tombstones bool
	ws         ids.WorkspaceID // tombstones only
	vs         []*version
}

// batch is the work of one poll: records in poll order (per-partition offset order),
// the versions decoded from them, the records parked, and what remains to be written.
type batch struct {
	records  []*kgo.Record
	decoded  int // records[:decoded] are decoded or parked
	versions []*version
	last     map[string]*version // the newest version of each key
	parked   []*parked
	pending  []*call // store calls not yet done; nil until planned
	planned  bool
	outcomes map[string]int
	start    time.Time // when it was polled
	timing   struct{ decode, write, deadLetter, commit time.Duration }
}

func newBatch(records []*kgo.Record) *batch {
	return &batch{
		records:  records,
		last:     make(map[string]*version, len(records)),
		outcomes: make(map[string]int, 8),
	}
}

// reasonCode is the dead letter's reason.
func (p *parked) reasonCode() string {
	if p.reason != "" {
		return p.reason
	}
	return schemas.ReasonOf(p.cause)
}

func (b *batch) park(p *parked) { b.parked = append(b.parked, p) }

// add appends a decoded version; a later version of a key supersedes the earlier one.
func (b *batch) add(v *version) {
	if prev, ok := b.last[v.key]; ok {
		v.prev = prev
	}
	b.last[v.key] = v
	b.versions = append(b.versions, v)
}

// decodeRecord turns one record into a version, or says why it must be parked. The
// error is non-nil only when the record is not to blame: the schema registry failed
// (retryable or not) or ctx ended.
func decodeRecord(ctx context.Context, codec *schemas.Codec[schemas.EvidenceRecord], r *kgo.Record) (*version, *parked, error) {
	key := string(r.Key)
	if len(r.Value) == 0 {
		// A null value is a tombstone: the key is all there is.
		w, c, m, err := ids.ParseEvidenceKey(key)
		if err != nil {
			return nil, &parked{rec: r, cause: fmt.Errorf("tombstone: %w", err), reason: ReasonInvalidKey}, nil
		}
		return &version{rec: r, key: key, ws: w, sourceKey: ids.MessageSourceKey(c, m), tombstone: true}, nil, nil
	}
	rec, err := codec.Decode(ctx, r.Value)
	if err != nil {
		if retryableDecode(err) || errors.Is(err, schemas.ErrRegistry) || ctx.Err() != nil {
			return nil, nil, err
		}
		return nil, &parked{rec: r, cause: err}, nil
	}
	if rec.Key() != key {
		return nil, &parked{rec: r, reason: ReasonKeyMismatch,
			cause: fmt.Errorf("record key does not match the value's workspace/chat/message (value names workspace %s, message %s)", rec.WorkspaceID, rec.MessageID)}, nil
	}
	row := evidenceRow(&rec)
	if err := row.Validate(); err != nil {
		return nil, &parked{rec: r, cause: err, reason: ReasonStoreInvalid}, nil
	}
	return &version{rec: r, key: key, ws: rec.WorkspaceID, sourceKey: rec.SourceKey, row: row}, nil, nil
}

// evidenceRow maps an evidence record onto a workspace_timeline_evidence row. The
// record's message type, thread and reply references are already in its metadata
// (the normalizer's whitelist); its ingest path and ineligible reason are not stored.
func evidenceRow(r *schemas.EvidenceRecord) store.Evidence {
	return store.Evidence{
		WorkspaceID:       r.WorkspaceID,
		Source:            r.Source,
		SourceType:        r.SourceType,
		SourceKey:         r.SourceKey,
		OccurredAt:        r.OccurredAt,
		SourceUpdatedAt:   r.SourceUpdatedAt,
		ObservedAt:        r.ObservedAt,
		ActorID:           r.ActorID,
		ActorDisplayName:  r.ActorDisplayName,
		Content:           r.Content,
		ContentHash:       r.ContentHash,
		Metadata:          json.RawMessage(r.MetadataJSON),
		Deleted:           r.Deleted,
		SynthesisEligible: r.SynthesisEligible,
	}
}

// callRows bounds the upserts of one store call (one transaction: a COPY into a
// temporary table and the upsert from it, see the store package documentation); larger
// calls measured slower than the same rows as separate calls on concurrent connections.
const callRows = 1000

// plan turns the decoded versions into store calls: the newest version of every key
// (the last in poll order, so per-partition order decides); upserts in near-equal
// calls of at most callRows, at least one per writer; tombstones grouped per
// workspace. Earlier versions of a key are counted as superseded.
func (b *batch) plan(writers int) {
	var ups []*version
	dels := map[ids.WorkspaceID][]*version{}
	var wsOrder []ids.WorkspaceID
	for _, v := range b.versions {
		if b.last[v.key] != v {
			b.outcomes[outcomeSuperseded]++
			continue
		}
		if !v.tombstone {
			ups = append(ups, v)
			continue
		}
		if _, ok := dels[v.ws]; !ok {
			wsOrder = append(wsOrder, v.ws)
		}
		dels[v.ws] = append(dels[v.ws], v)
	}
	for _, chunk := range split(ups, max(writers, (len(ups)+callRows-1)/callRows)) {
		b.pending = append(b.pending, &call{vs: chunk})
	}
	for _, ws := range wsOrder {
		b.pending = append(b.pending, &call{tombstones: true, ws: ws, vs: dels[ws]})
	}
	b.planned = true
}

// split cuts vs into at most n contiguous chunks of near-equal size.
func split(vs []*version, n int) [][]*version {
	if len(vs) == 0 {
		return nil
	}
	n = min(n, len(vs))
	out := make([][]*version, 0, n)
	for i := range n {
		lo, hi := i*len(vs)/n, (i+1)*len(vs)/n
		out = append(out, vs[lo:hi])
	}
	return out
}

// callResult is what one store call did.
type callResult struct {
	outcomes []store.UpsertOutcome // upserts
	deleted  int64                 // tombstones
	err      error
}

// resolve applies the results of one round, in which every pending call ran: finished calls count their
// outcomes, calls that failed because of a row's data are split (or, down to one
// version, the version is parked and its predecessor in the batch takes its place),
// and calls that failed retryably stay pending. It returns the first retryable error
// and the first fatal error of the round.
func (b *batch) resolve(calls []*call, results []callResult) (retry, fatal error) {
	var next []*call
	for i, c := range calls {
		res := results[i]
		if res.err == nil {
			b.count(c, res)
			continue
		}
		switch classifyDB(res.err) {
		case classRetry:
			next = append(next, c)
			if retry == nil {
				retry = res.err
			}
		case classFatal:
			next = append(next, c)
			if fatal == nil {
				fatal = res.err
			}
		case classData:
			next = append(next, b.isolate(c, res.err)...)
		}
	}
	b.pending = next
	return retry, fatal
}

// isolate narrows a call that failed because of some row's data: the row the store
// names, else halves, and at one version parks it and retries its predecessor.
func (b *batch) isolate(c *call, err error) []*call {
	var inv *store.InvalidEvidenceError
	if !c.tombstones && errors.As(err, &inv) && inv.Index >= 0 && inv.Index < len(c.vs) {
		bad := c.vs[inv.Index]
		rest := make([]*version, 0, len(c.vs)-1)
		rest = append(append(rest, c.vs[:inv.Index]...), c.vs[inv.Index+1:]...)
		out := b.parkVersion(bad, err)
		if len(rest) > 0 {
			out = append(out, &call{vs: rest})
		}
		return out
	}
	if len(c.vs) == 1 {
		return b.parkVersion(c.vs[0], err)
	}
	h := len(c.vs) / 2
	return []*call{
		{tombstones: c.tombstones, ws: c.ws, vs: c.vs[:h]},
		{tombstones: c.tombstones, ws: c.ws, vs: c.vs[h:]},
	}
}

// parkVersion parks v and returns the call that writes its predecessor, if any.
func (b *batch) parkVersion(v *version, err error) []*call {
	reason := ReasonConstraint
	if errors.Is(err, store.ErrInvalid) {
		reason = ReasonStoreInvalid
	}
	b.park(&parked{rec: v.rec, cause: err, reason: reason})
	p := v.prev
	if p == nil {
		return nil
	}
	b.outcomes[outcomeSuperseded]--
	return []*call{{tombstones: p.tombstone, ws: p.ws, vs: []*version{p}}}
}

// count adds a finished call's outcomes.
func (b *batch) count(c *call, res callResult) {
	if c.tombstones {
		b.outcomes[outcomeDeleted] += int(res.deleted)
		b.outcomes[outcomeDeleteAbsent] += len(c.vs) - int(res.deleted)
		return
	}
	for _, o := range res.outcomes {
		switch o.Result {
		case store.EvidenceInserted:
			b.outcomes[outcomeInserted]++
		case store.EvidenceUpdated:
			b.outcomes[outcomeUpdated]++
		case store.EvidenceRedacted:
			b.outcomes[outcomeRedacted]++
		case store.EvidenceUnchanged:
			b.outcomes[outcomeUnchanged]++
		case store.EvidenceStale:
			b.outcomes[outcomeStale]++
		}
	}
}

// lastPerPartition returns the last record of every topic partition in the batch.
func (b *batch) lastPerPartition() []*kgo.Record {
	type tp struct {
		t string
		p int32
	}
	idx := map[tp]int{}
	var out []*kgo.Record
	for _, r := range b.records {
		k := tp{r.Topic, r.Partition}
		if i, ok := idx[k]; ok {
			if r.Offset > out[i].Offset {
				out[i] = r
			}
			continue
		}
		idx[k] = len(out)
		out = append(out, r)
	}
	return out
}

// firstOffsets returns, per topic partition, the offset of the batch's first record:
// where consumption resumes when the batch is given up.
func (b *batch) firstOffsets() map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range b.records {
		ps := out[r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			out[r.Topic] = ps
		}
		if cur, ok := ps[r.Partition]; !ok || r.Offset < cur.Offset {
			// Epoch -1: resume at this offset without leader-epoch validation, as
			// for any reset to a known position.
			ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
		}
	}
	return out
}
