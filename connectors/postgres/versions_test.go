package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestSinkNewerVersionAheadOfTheOriginal: reconciliation can produce an edit or a
// recall at a lower offset than the webhook's redelivery of the original. With both
// in one batch, the newer version stays, for a message with no row yet and for one
// already stored (issue #16); the row keeps the offset of the record that first
// carried its message (synthesis reads a closed window's messages by it).
func TestSinkNewerVersionAheadOfTheOriginal(t *testing.T) {
	e := newEnv(t, 1) // one partition: the whole batch comes in one poll
	group := uniqueGroup(t)
	ws := ids.WorkspaceID("ws-rank-order")
	chat := ids.ChatID("oc_rank_order")
	type msg struct {
		name          string
		stored        bool
		newer, origin schemas.EvidenceRecord
	}
	var msgs []msg
	for _, m := range []struct {
		name   string
		recall bool
		stored bool
	}{{"edit, no row", false, false}, {"edit, row stored", false, true}, {"recall, no row", true, false}, {"recall, row stored", true, true}} {
		id := ids.MessageID(fmt.Sprintf("om_rank_%d", len(msgs)))
		orig := evidenceOf(ws, chat, id, "checkout error rate at 40%", t0)
		orig.IngestPath = schemas.IngestEvent
		newer := evidenceOf(ws, chat, id, "checkout error rate at 40%, rollback started", t0.Add(time.Minute))
		if m.recall {
			newer = recalled(orig, t0.Add(2*time.Minute))
		}
		newer.IngestPath = schemas.IngestReconcile
		msgs = append(msgs, msg{m.name, m.stored, newer, orig})
	}

	// The originals of two messages are stored first, by a sink that then stops.
	first := start(t, e.options(group, e.st), hooks{})
	firstOffset := map[string]int64{} // by source key
	for _, m := range msgs {
		if m.stored {
			r := e.record(t, m.origin)
			e.produce(t, r) // sets r.Offset
			firstOffset[m.origin.SourceKey] = r.Offset
		}
	}
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	first.shutdown(t)

	// Then, with no sink running: the newer version of every message, each followed
	// by a redelivered original.
	var batch []*kgo.Record
	for _, m := range msgs {
		batch = append(batch, e.record(t, m.newer), e.record(t, m.origin))
	}
	e.produce(t, batch...)
	for i, m := range msgs {
		if !m.stored {
			firstOffset[m.newer.SourceKey] = batch[2*i].Offset
		}
	}
	var mu sync.Mutex
	var polls []int
	second := start(t, e.options(group, e.st), hooks{batchStart: func(n int) {
		mu.Lock()
		defer mu.Unlock()
		polls = append(polls, n)
	}})
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	second.shutdown(t)
	mu.Lock()
	if len(polls) != 1 || polls[0] != len(batch) {
		t.Fatalf("batches of %v records, want one of %d: the test needs every version in one batch", polls, len(batch))
	}
	mu.Unlock()

	rows := e.rows(t)
	for _, m := range msgs {
		row, ok := rows[rowKey(m.newer)]
		switch {
		case !ok:
			t.Errorf("%s: no row", m.name)
		case row.ContentHash != m.newer.ContentHash || row.Content != m.newer.Content || row.Deleted != m.newer.Deleted ||
			row.SynthesisEligible != m.newer.SynthesisEligible || !row.SourceUpdatedAt.Equal(m.newer.SourceUpdatedAt):
			t.Errorf("%s: row {content %q deleted %v eligible %v updated %s}, want the newer version {content %q deleted %v eligible %v updated %s}",
				m.name, row.Content, row.Deleted, row.SynthesisEligible, row.SourceUpdatedAt.UTC().Format(time.TimeOnly),
				m.newer.Content, m.newer.Deleted, m.newer.SynthesisEligible, m.newer.SourceUpdatedAt.Format(time.TimeOnly))
		}
	}
	if len(rows) != len(msgs) {
		t.Errorf("%d rows, want %d", len(rows), len(msgs))
	}
	for _, m := range msgs {
		var offset *int64
		if err := e.pool.QueryRow(context.Background(), `SELECT evidence_offset FROM workspace_timeline_evidence
			WHERE workspace_id = $1 AND source_key = $2`, string(ws), m.newer.SourceKey).Scan(&offset); err != nil {
			t.Fatal(err)
		}
		if want := firstOffset[m.newer.SourceKey]; offset == nil || *offset != want {
			t.Errorf("%s: evidence offset %v, want %d (the record that first carried the message)", m.name, offset, want)
		}
	}
}

// TestPlanOnTheStoreMatchesOneByOne runs shuffled batches through the sink's plan on
// the real store, and every version alone, in offset order, through the same store in
// another workspace: both workspaces end with the same rows. This ties the plan to the
// store's SQL rule itself, not to a model of it.
func TestPlanOnTheStoreMatchesOneByOne(t *testing.T) {
	ctx := context.Background()
	pool, st := migratedStore(t, testenv.PostgresDSN(t), 4)
	var err error
	c := unitCodecs(t)
	s := unitSink(t, st, 3)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	const batchWS, refWS = ids.WorkspaceID("ws-batch"), ids.WorkspaceID("ws-one-by-one")

	// draw is one version of msg in chat: a tombstone (nil), a recall or a live version.
	type draw struct {
		msg       ids.MessageID
		tombstone bool
		recall    bool
		text      string
		at, seen  time.Time
	}
	recordOf := func(ws ids.WorkspaceID, chat ids.ChatID, d draw) (schemas.EvidenceRecord, string) {
		if d.recall {
			return recalled(evidenceOf(ws, chat, d.msg, "", d.at), d.at), ids.EvidenceKey(ws, chat, d.msg)
		}
		r := evidenceOf(ws, chat, d.msg, d.text, d.at)
		r.ObservedAt = d.seen
		return r, ids.EvidenceKey(ws, chat, d.msg)
	}
	applyAlone := func(ws ids.WorkspaceID, chat ids.ChatID, d draw) {
		t.Helper()
		r, _ := recordOf(ws, chat, d)
		var err error
		if d.tombstone {
			_, err = st.DeleteEvidence(ctx, ws, store.LarkMessageEvidence, []string{r.SourceKey})
		} else {
			_, err = st.UpsertEvidence(ctx, []store.Evidence{evidenceRow(&r)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		content, hash string
		deleted       bool
		updated, seen time.Time
	}
	rowsOf := func(ws ids.WorkspaceID, chat ids.ChatID) map[string]row {
		t.Helper()
		q, err := pool.Query(ctx, `SELECT source_key, content, content_hash, deleted, source_updated_at, observed_at
			FROM workspace_timeline_evidence WHERE workspace_id = $1 AND chat_id = $2`, string(ws), string(chat))
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		out := map[string]row{}
		for q.Next() {
			var k string
			var r row
			if err := q.Scan(&k, &r.content, &r.hash, &r.deleted, &r.updated, &r.seen); err != nil {
				t.Fatal(err)
			}
			r.updated, r.seen = r.updated.UTC(), r.seen.UTC()
			out[k] = r
		}
		if err := q.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	for iter := range 25 {
		chat := ids.ChatID(fmt.Sprintf("oc_iter_%d", iter))
		var seqs [][]draw
		for k := range 8 {
			msg := ids.MessageID(fmt.Sprintf("om_%d", k))
			next := func() draw {
				at := t0.Add(time.Duration(rng.IntN(3)) * time.Minute)
				switch rng.IntN(7) {
				case 0:
					return draw{msg: msg, tombstone: true}
				case 1:
					return draw{msg: msg, recall: true, at: at.Add(time.Minute)}
				}
				return draw{msg: msg, text: []string{"a", "b", "c"}[rng.IntN(3)], at: at, seen: t0.Add(time.Duration(rng.IntN(1000)) * time.Second)}
			}
			if d := next(); !d.tombstone && rng.IntN(3) > 0 {
				applyAlone(batchWS, chat, d)
				applyAlone(refWS, chat, d)
			}
			var seq []draw
			for range 1 + rng.IntN(5) {
				seq = append(seq, next())
			}
			seqs = append(seqs, seq)
		}
		// Interleave the keys at random, each key's versions in order.
		var order []draw
		for left := true; left; {
			left = false
			for _, k := range rng.Perm(len(seqs)) {
				if len(seqs[k]) > 0 {
					order = append(order, seqs[k][0])
					seqs[k] = seqs[k][1:]
					left = true
				}
			}
		}
		var recs []*kgo.Record
		for i, d := range order {
			applyAlone(refWS, chat, d)
			r, key := recordOf(batchWS, chat, d)
			rec := &kgo.Record{Topic: "evidence", Offset: int64(i), Key: []byte(key)}
			if !d.tombstone {
				if rec.Value, err = c.Evidence.Encode(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			recs = append(recs, rec)
		}
		b := batchOf(t, c, 3, recs...)
		if err := s.retry(ctx, opDatabase, s.boDB, func(ctx context.Context) (bool, error) { return s.writeStep(ctx, b) }); err != nil {
			t.Fatal(err)
		}
		got, want := rowsOf(batchWS, chat), rowsOf(refWS, chat)
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Errorf("iteration %d, %s: the batch left %+v (present %v), one by one %+v", iter, k, g, ok, w)
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("iteration %d, %s: the batch left %+v, one by one nothing", iter, k, g)
			}
		}
	}
}
