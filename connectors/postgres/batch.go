package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
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
	k         *keyState      // every version of the key in this batch
	applied   bool           // written by a store call that succeeded
	result    store.EvidenceResult
	counted   bool // result is set
	// republished: the stored winner was published again above this version, or
	// there was nothing to publish (republish.go).
	republished bool
	parked      bool
}

// keyState is one key's versions in a batch, in offset order, and the store steps
// that still have to run for it, one after the other.
type keyState struct {
	chain      []*version
	steps      []*step
	superseded int // versions of chain that no step writes (counted as superseded)
}

// step is one store operation on one key: a tombstone, or versions upserted in
// order in one call (the store applies a repeated key in input order).
type step struct {
	k         *keyState
	tombstone bool
	vs        []*version
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

// call is one store call of a batch: the upsert steps of distinct keys, or the
// tombstones of one workspace.
type call struct {
	tombstones bool
	ws         ids.WorkspaceID // tombstones only
	steps      []*step
}

// versions returns the call's versions in order: its rows, or its tombstones.
func (c *call) versions() []*version {
	var out []*version
	for _, st := range c.steps {
		out = append(out, st.vs...)
	}
	return out
}

// batch is the work of one poll: records in poll order (per-partition offset order),
// the versions decoded from them, the records parked, and what remains to be written.
type batch struct {
	records  []*kgo.Record
	decoded  int // records[:decoded] are decoded or parked
	versions []*version
	keys     map[string]*keyState
	order    []*keyState // keys in order of their first version
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
		keys:     make(map[string]*keyState, len(records)),
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

// add appends a decoded version to its key's versions (they arrive in offset order).
func (b *batch) add(v *version) {
	k := b.keys[v.key]
	if k == nil {
		k = &keyState{}
		b.keys[v.key] = k
		b.order = append(b.order, k)
	}
	v.k = k
	k.chain = append(k.chain, v)
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
	row.Offset, row.HasOffset = r.Offset, true // kept by the store from the message's first version
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

// callRows bounds the upserts of one store call (one transaction: a probe, a COPY of
// the new messages and the upsert of the rest, see store.UpsertEvidence); larger
// calls measured slower than the same rows as separate calls on concurrent connections.
const callRows = 1000

// The batch's rule is the store's, applied one version at a time in offset order (the
// evidence version rule, internal/store): a tombstone deletes the row; a version
// replaces the row when its content hash differs and its rank
// (schemas.EvidenceRank: deleted, then source_updated_at) is not lower, so of two
// versions of equal rank the later one wins. Offset order is not rank order (an edit
// read from history can sit below a redelivered original from the webhook), and
// which version ends up stored depends on the row already there, which the batch
// does not know. So the batch does not pick a winner: for every key it hands the
// store, in offset order and in one call, every version after the key's last
// tombstone, and the store applies them one by one. Only versions that cannot change
// the outcome are left out and counted as superseded:
//   - every version before a key's last tombstone (the tombstone deletes the row
//     whatever they did; it runs first, the versions after it in a later round);
//   - a version equal to the version before it in content hash and rank (a
//     redelivery): whatever the stored row, the store does the same with both, and
//     the first one decides.
//
// When a version has to be parked, its key is planned again from the versions not
// yet written, so the table ends as if the records had been written one by one
// without it.

// planKey (re)plans the steps of k from its versions not yet written or parked.
func (b *batch) planKey(k *keyState) {
	start := 0
	done := 0
	for i, v := range k.chain {
		if v.applied {
			start = i + 1
		}
		if v.applied || v.parked {
			done++
		}
	}
	var rest []*version
	for _, v := range k.chain[start:] {
		if !v.parked {
			rest = append(rest, v)
		}
	}
	k.steps = nil
	for i := len(rest) - 1; i >= 0; i-- {
		if rest[i].tombstone {
			k.steps = append(k.steps, &step{k: k, tombstone: true, vs: []*version{rest[i]}})
			rest = rest[i+1:]
			break
		}
	}
	var ups []*version
	for _, v := range rest {
		if n := len(ups); n > 0 && sameVersion(ups[n-1], v) {
			continue
		}
		ups = append(ups, v)
	}
	if len(ups) > 0 {
		k.steps = append(k.steps, &step{k: k, vs: ups})
	}
	scheduled := 0
	for _, st := range k.steps {
		scheduled += len(st.vs)
	}
	superseded := len(k.chain) - done - scheduled
	b.outcomes[outcomeSuperseded] += superseded - k.superseded
	k.superseded = superseded
}

// sameVersion reports whether b is a redelivery of a (both versions, not
// tombstones): the same content hash and rank as the store compares them, so that
// the store does with b exactly what it did with a, whatever the stored row.
func sameVersion(a, b *version) bool {
	return a.row.ContentHash == b.row.ContentHash && storeRank(a).Compare(storeRank(b)) == 0
}

// storeRank is v's rank as the store sees it: a zero source_updated_at is stored as
// occurred_at.
func storeRank(v *version) schemas.EvidenceRank {
	at := v.row.SourceUpdatedAt
	if at.IsZero() {
		at = v.row.OccurredAt
	}
	return schemas.EvidenceRank{SourceUpdatedAt: at, Deleted: v.row.Deleted}
}

// plan plans every key (see planKey) and turns the first step of each into store
// calls: upserts in near-equal calls of about callRows rows at most, a multiple of
// writers of them, each key's versions in one call; tombstones grouped per workspace. A key's
// later steps (the versions after its tombstone) run in later rounds.
func (b *batch) plan(writers int) {
	var heads []*step
	for _, k := range b.order {
		b.planKey(k)
		if len(k.steps) > 0 {
			heads = append(heads, k.steps[0])
		}
	}
	b.pending = callsFor(heads, writers)
	b.planned = true
}

// callsFor groups steps of distinct keys into store calls: upserts in a multiple of
// writers near-equal calls of at most about callRows rows, tombstones one call per
// workspace.
func callsFor(steps []*step, writers int) []*call {
	var ups []*step
	rows := 0
	dels := map[ids.WorkspaceID][]*step{}
	var wsOrder []ids.WorkspaceID
	for _, st := range steps {
		if !st.tombstone {
			ups = append(ups, st)
			rows += len(st.vs)
			continue
		}
		ws := st.vs[0].ws
		if _, ok := dels[ws]; !ok {
			wsOrder = append(wsOrder, ws)
		}
		dels[ws] = append(dels[ws], st)
	}
	// A whole number of waves of writers calls: 5,000 rows on 4 writers as 5 calls
	// of 1,000 left the fifth running alone after the other four (one connection
	// busy, the other cores idle); 8 calls of 625 keep every writer busy to the end.
	n := max(writers, (rows+callRows-1)/callRows)
	n = (n + writers - 1) / writers * writers
	var out []*call
	for _, chunk := range split(ups, n) {
		out = append(out, &call{steps: chunk})
	}
	for _, ws := range wsOrder {
		out = append(out, &call{tombstones: true, ws: ws, steps: dels[ws]})
	}
	return out
}

// split cuts xs into at most n contiguous chunks of near-equal size.
func split[T any](xs []T, n int) [][]T {
	if len(xs) == 0 {
		return nil
	}
	n = min(n, len(xs))
	out := make([][]T, 0, n)
	for i := range n {
		lo, hi := i*len(xs)/n, (i+1)*len(xs)/n
		out = append(out, xs[lo:hi])
	}
	return out
}

// callResult is what one store call did.
type callResult struct {
	outcomes []store.UpsertOutcome // upserts
	deleted  int64                 // tombstones
	err      error
}

// resolve applies the results of one round, in which every pending call ran: finished
// calls count their outcomes and their keys' next steps are scheduled, calls that
// failed because of a row's data are split (or, down to one version, the version is
// parked and its key planned again without it), and calls that failed retryably stay
// pending. It returns the first retryable error and the first fatal error of the
// round.
func (b *batch) resolve(calls []*call, results []callResult) (retry, fatal error) {
	var next []*call
	var ready []*step
	for i, c := range calls {
		res := results[i]
		if res.err == nil {
			b.count(c, res)
			for _, st := range c.steps {
				for _, v := range st.vs {
					v.applied = true
				}
				k := st.k
				k.steps = k.steps[1:]
				if len(k.steps) > 0 {
					ready = append(ready, k.steps[0])
				}
			}
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
			calls, more := b.isolate(c, res.err)
			next = append(next, calls...)
			ready = append(ready, more...)
		}
	}
	b.pending = append(next, callsFor(ready, 1)...)
	return retry, fatal
}

// isolate narrows a call that failed because of some row's data: the row the store
// names is parked, else the call is halved (between keys), else a key's versions are
// tried one per call, in order; a single version is parked. It returns the calls to
// run next and the steps of keys planned again.
func (b *batch) isolate(c *call, err error) ([]*call, []*step) {
	var inv *store.InvalidEvidenceError
	if !c.tombstones && errors.As(err, &inv) && inv.Index >= 0 {
		i := inv.Index
		for si, st := range c.steps {
			if i >= len(st.vs) {
				i -= len(st.vs)
				continue
			}
			more := b.parkVersion(st.vs[i], err)
			rest := append(append([]*step{}, c.steps[:si]...), c.steps[si+1:]...)
			if len(rest) == 0 {
				return nil, more
			}
			return []*call{{steps: rest}}, more
		}
	}
	if len(c.steps) > 1 {
		h := len(c.steps) / 2
		return []*call{
			{tombstones: c.tombstones, ws: c.ws, steps: c.steps[:h]},
			{tombstones: c.tombstones, ws: c.ws, steps: c.steps[h:]},
		}, nil
	}
	st := c.steps[0]
	if len(st.vs) == 1 {
		return nil, b.parkVersion(st.vs[0], err)
	}
	// One key's versions: one version per step, still in order.
	k := st.k
	singles := make([]*step, 0, len(st.vs)+len(k.steps)-1)
	for _, v := range st.vs {
		singles = append(singles, &step{k: k, vs: []*version{v}})
	}
	k.steps = append(singles, k.steps[1:]...)
	return []*call{{steps: []*step{k.steps[0]}}}, nil
}

// parkVersion parks v and plans its key again without it; it returns the key's next
// step, if any.
func (b *batch) parkVersion(v *version, err error) []*step {
	reason := ReasonConstraint
	if errors.Is(err, store.ErrInvalid) {
		reason = ReasonStoreInvalid
	}
	b.park(&parked{rec: v.rec, cause: err, reason: reason})
	v.parked = true
	b.planKey(v.k)
	if len(v.k.steps) == 0 {
		return nil
	}
	return []*step{v.k.steps[0]}
}

// count adds a finished call's outcomes.
func (b *batch) count(c *call, res callResult) {
	if c.tombstones {
		b.outcomes[outcomeDeleted] += int(res.deleted)
		b.outcomes[outcomeDeleteAbsent] += len(c.steps) - int(res.deleted)
		return
	}
	for i, v := range c.versions() {
		if i < len(res.outcomes) {
			v.result, v.counted = res.outcomes[i].Result, true
		}
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
