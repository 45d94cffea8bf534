package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// fixture builds versions of messages spread over every partition of the topic.
type fixture struct {
	ws    ids.WorkspaceID
	chats []ids.ChatID
}

func newFixture(e *env, ws ids.WorkspaceID) fixture {
	return fixture{ws: ws, chats: e.chatsPerPartition(ws)}
}

// messages returns perChat messages in every chat, as first versions.
func (f fixture) messages(perChat int) []schemas.EvidenceRecord {
	var out []schemas.EvidenceRecord
	for ci, c := range f.chats {
		for m := range perChat {
			msg := ids.MessageID(fmt.Sprintf("om_%d_%d", ci, m))
			out = append(out, evidenceOf(f.ws, c, msg, fmt.Sprintf("status update %d in chat %d", m, ci), t0))
		}
	}
	return out
}

func (e *env) records(t testing.TB, rs []schemas.EvidenceRecord) []*kgo.Record {
	out := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		out[i] = e.record(t, r)
	}
	return out
}

// assertRows checks that the table holds exactly want (by workspace and source key),
// each with want's content, hash and deletion state.
func assertRows(t testing.TB, got map[string]store.Evidence, want []schemas.EvidenceRecord) {
	t.Helper()
	wantBy := map[string]schemas.EvidenceRecord{}
	for _, r := range want {
		wantBy[rowKey(r)] = r
	}
	if len(got) != len(wantBy) {
		t.Errorf("table has %d rows, want %d (extra or missing: %v)", len(got), len(wantBy), symmetricDiff(got, wantBy))
	}
	for k, w := range wantBy {
		g, ok := got[k]
		if !ok {
			t.Errorf("row %s missing", k)
			continue
		}
		if g.Content != w.Content || g.ContentHash != w.ContentHash || g.Deleted != w.Deleted || g.SynthesisEligible != w.SynthesisEligible {
			t.Errorf("row %s = {content %q hash %.8s deleted %v eligible %v}, want {content %q hash %.8s deleted %v eligible %v}",
				k, g.Content, g.ContentHash, g.Deleted, g.SynthesisEligible, w.Content, w.ContentHash, w.Deleted, w.SynthesisEligible)
		}
	}
}

func symmetricDiff(got map[string]store.Evidence, want map[string]schemas.EvidenceRecord) []string {
	var out []string
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "+"+k)
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			out = append(out, "-"+k)
		}
	}
	slices.Sort(out)
	return out
}

// sameRows checks that a second snapshot is the first one: same ids, same versions.
func sameRows(t testing.TB, before, after map[string]store.Evidence) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("row count changed from %d to %d", len(before), len(after))
	}
	for k, b := range before {
		a := after[k]
		if a.ID != b.ID || a.ContentHash != b.ContentHash || !a.SourceUpdatedAt.Equal(b.SourceUpdatedAt) {
			t.Errorf("row %s changed: id %d→%d hash %.8s→%.8s", k, b.ID, a.ID, b.ContentHash, a.ContentHash)
		}
	}
}

// TestSinkConformance covers the delivery guarantees: records delivered again change
// nothing, the versions of a key are applied in order, and a sink killed between the
// database commit and the offset commit is restarted without duplicates.
func TestSinkConformance(t *testing.T) {
	t.Run("redelivery", func(t *testing.T) {
		e := newEnv(t, 3)
		group := uniqueGroup(t)
		f := newFixture(e, "ws-redelivery")
		want := f.messages(4)
		e.produce(t, e.records(t, want)...)

		first := start(t, e.options(group, e.st), hooks{})
		testenv.WaitCommitted(t, waitBound, group, e.topic)
		before := e.rows(t)
		assertRows(t, before, want)
		if got := first.outcome(outcomeInserted); got != len(want) {
			t.Errorf("inserted %d, want %d", got, len(want))
		}

		t.Run("produced twice", func(t *testing.T) {
			e.produce(t, e.records(t, want)...)
			testenv.WaitCommitted(t, waitBound, group, e.topic)
			sameRows(t, before, e.rows(t))
			if got := first.outcome(outcomeUnchanged); got != len(want) {
				t.Errorf("unchanged %d, want %d (the duplicates)", got, len(want))
			}
		})
		first.shutdown(t)

		t.Run("offsets reset", func(t *testing.T) {
			e.resetGroup(t, group)
			second := start(t, e.options(group, e.st), hooks{})
			testenv.WaitCommitted(t, waitBound, group, e.topic)
			sameRows(t, before, e.rows(t))
			if got, in := second.outcome(outcomeUnchanged)+second.outcome(outcomeSuperseded), second.outcome(outcomeInserted); got != 2*len(want) || in != 0 {
				t.Errorf("replay: unchanged+superseded %d inserted %d, want %d and 0", got, in, 2*len(want))
			}
		})
	})

	t.Run("ordering per key", func(t *testing.T) {
		// Every version of a key has the same source_updated_at, so the store's
		// newer-wins rule cannot hide a wrong order: only the order of application
		// decides which content stays.
		const versions = 12
		for _, tc := range []struct {
			name     string
			maxBatch int
			live     bool // produce while the sink runs, batch by batch
		}{
			{name: "across batches", maxBatch: 2, live: true},
			{name: "within a batch", maxBatch: DefaultMaxBatchRecords},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, 3)
				group := uniqueGroup(t)
				f := newFixture(e, "ws-ordering")
				var all []*kgo.Record
				var want []schemas.EvidenceRecord
				for ci, c := range f.chats {
					for m := range 2 {
						msg := ids.MessageID(fmt.Sprintf("om_order_%d_%d", ci, m))
						for v := range versions {
							r := evidenceOf(f.ws, c, msg, fmt.Sprintf("chat %d message %d version %d", ci, m, v), t0.Add(time.Minute))
							all = append(all, e.record(t, r))
							if v == versions-1 {
								want = append(want, r)
							}
						}
					}
				}
				// Interleave the keys so that every batch mixes chats and partitions,
				// keeping each key's versions in order.
				all = interleave(all, versions)
				o := e.options(group, e.st)
				o.MaxBatchRecords = tc.maxBatch
				var r *running
				if tc.live {
					r = start(t, o, hooks{})
					for i := 0; i < len(all); i += 5 {
						e.produce(t, all[i:min(i+5, len(all))]...)
					}
				} else {
					e.produce(t, all...)
					r = start(t, o, hooks{})
				}
				testenv.WaitCommitted(t, waitBound, group, e.topic)
				assertRows(t, e.rows(t), want)
				total := 0
				for _, o := range []string{outcomeInserted, outcomeUpdated, outcomeUnchanged, outcomeStale, outcomeSuperseded} {
					total += r.outcome(o)
				}
				if total != len(all) {
					t.Errorf("outcomes add up to %d, want one per record (%d)", total, len(all))
				}
				if got := r.outcome(outcomeStale); got != 0 {
					t.Errorf("stale %d, want 0: versions were applied out of order", got)
				}
			})
		}
	})

	t.Run("restart", func(t *testing.T) {
		t.Run("killed between database commit and offset commit", func(t *testing.T) {
			e := newEnv(t, 3)
			group := uniqueGroup(t)
			f := newFixture(e, "ws-restart")
			want := f.messages(5)
			e.produce(t, e.records(t, want)...)

			o := e.options(group, e.st)
			killed := start(t, o, hooks{afterWrite: func(context.Context, []*kgo.Record) error { return errKilled }})
			err := killed.wait(t)
			if !errors.Is(err, errKilled) {
				t.Fatalf("Run = %v, want the failpoint's error", err)
			}
			killed.err = nil // expected
			killed.s.Close()
			written := e.rows(t)
			if len(written) == 0 {
				t.Fatal("the failpoint ran before anything was written")
			}
			if n := e.committedOffsets(t, group); n != 0 {
				t.Fatalf("the killed sink committed offsets (%d) after its failpoint", n)
			}

			restarted := start(t, e.options(group, e.st), hooks{})
			testenv.WaitCommitted(t, waitBound, group, e.topic)
			after := e.rows(t)
			assertRows(t, after, want)
			for k, b := range written {
				if after[k].ID != b.ID {
					t.Errorf("row %s re-created: id %d → %d", k, b.ID, after[k].ID)
				}
			}
			if got := restarted.outcome(outcomeUnchanged); got < len(written) {
				t.Errorf("restarted sink saw %d unchanged rows, want at least the %d written before the kill (redelivered)", got, len(written))
			}
			var n int
			if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workspace_timeline_evidence`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != len(want) {
				t.Errorf("%d rows, want %d", n, len(want))
			}
		})
	})
}

// interleave reorders records made of runs of n versions of one key so that keys
// alternate, keeping each key's versions in order.
func interleave(recs []*kgo.Record, n int) []*kgo.Record {
	keys := len(recs) / n
	out := make([]*kgo.Record, 0, len(recs))
	for v := range n {
		for k := range keys {
			out = append(out, recs[k*n+v])
		}
	}
	return out
}

// TestSinkVersions follows one message through its life: first version, a duplicate,
// an edit, an older version arriving late, a recall and a tombstone.
func TestSinkVersions(t *testing.T) {
	e := newEnv(t, 2)
	group := uniqueGroup(t)
	r := start(t, e.options(group, e.st), hooks{})
	f := newFixture(e, "ws-versions")
	c := f.chats[0]
	v1 := evidenceOf(f.ws, c, "om_life", "db primary down", t0)
	other := evidenceOf(f.ws, f.chats[1], "om_other", "unrelated", t0)
	v2 := evidenceOf(f.ws, c, "om_life", "db primary down; failover in progress", t0.Add(time.Minute))
	late := evidenceOf(f.ws, c, "om_life", "an older edit delivered late", t0.Add(30*time.Second))
	gone := recalled(v2, t0.Add(2*time.Minute))
	steps := []struct {
		name    string
		records []*kgo.Record
		want    []schemas.EvidenceRecord
		outcome string
	}{
		{"insert", []*kgo.Record{e.record(t, v1), e.record(t, other)}, []schemas.EvidenceRecord{v1, other}, outcomeInserted},
		{"duplicate is unchanged", []*kgo.Record{e.record(t, v1)}, []schemas.EvidenceRecord{v1, other}, outcomeUnchanged},
		{"edit updates", []*kgo.Record{e.record(t, v2)}, []schemas.EvidenceRecord{v2, other}, outcomeUpdated},
		{"older version is stale", []*kgo.Record{e.record(t, late)}, []schemas.EvidenceRecord{v2, other}, outcomeStale},
		{"recall redacts", []*kgo.Record{e.record(t, gone)}, []schemas.EvidenceRecord{gone, other}, outcomeRedacted},
		{"tombstone deletes", []*kgo.Record{e.tombstone(gone.Key())}, []schemas.EvidenceRecord{other}, outcomeDeleted},
		{"tombstone of an absent row", []*kgo.Record{e.tombstone(gone.Key())}, []schemas.EvidenceRecord{other}, outcomeDeleteAbsent},
	}

	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := r.outcome(st.outcome)
			e.produce(t, st.records...)
			testenv.WaitCommitted(t, waitBound, group, e.topic)
			got := e.rows(t)
			assertRows(t, got, st.want)
			if n := r.outcome(st.outcome) - before; n != len(st.records) {
				t.Errorf("outcome %s counted %d times, want %d", st.outcome, n, len(st.records))
			}
			if st.outcome == outcomeRedacted {
				if row := got[rowKey(gone)]; row.Content != "" || !row.Deleted || row.SynthesisEligible {
					t.Errorf("redacted row = {content %q deleted %v eligible %v}, want empty, deleted, ineligible", row.Content, row.Deleted, row.SynthesisEligible)
				}
			}
		})
	}
	// The sink has been consuming all along: its Run has started.
	if err := r.s.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

// TestSinkDeadLetters sends records the sink cannot write between good ones: each is
// parked with its reason, the good records are written, and every offset is committed.
func TestSinkDeadLetters(t *testing.T) {
	e := newEnv(t, 2)
	group := uniqueGroup(t)
	f := newFixture(e, "ws-dead-letters")
	good := f.messages(3)
	c := f.chats[0]

	unknownSchema := append([]byte{0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, "body"...)
	mismatched := evidenceOf(f.ws, c, "om_mismatch", "value of another key", t0)
	nul := evidenceOf(f.ws, c, "om_nul", "metadata jsonb cannot hold", t0)
	nul.MetadataJSON = `{"x":"\u0000"}`
	bad := []struct {
		rec    *kgo.Record
		reason string
	}{
		{e.raw(ids.EvidenceKey(f.ws, c, "om_garbage"), []byte("this is not avro")), schemas.ReasonMalformed},
		{e.raw(ids.EvidenceKey(f.ws, c, "om_unknown"), unknownSchema), schemas.ReasonUnknownSchema},
		{e.raw(ids.EvidenceKey(f.ws, c, "om_other_key"), e.record(t, mismatched).Value), ReasonKeyMismatch},
		{e.tombstone("not-an-evidence-key"), ReasonInvalidKey},
		{e.record(t, nul), ReasonStoreInvalid},
	}
	// Good, bad, good, bad, …: every bad record is followed by good ones.
	var recs []*kgo.Record
	for i, g := range good {
		recs = append(recs, e.record(t, g))
		if i < len(bad) {
			recs = append(recs, bad[i].rec)
		}
	}
	e.produce(t, recs...)
	r := start(t, e.options(group, e.st), hooks{})
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	assertRows(t, e.rows(t), good)

	dls := e.deadLetters(t, len(bad))
	if n := testenv.EndOffsets(t, e.dlq); n != int64(len(bad)) {
		t.Errorf("%d dead letters, want %d", n, len(bad))
	}
	// No chat text in the dead-letter topic, in any field or header.
	for _, raw := range e.rawDeadLetters(t, len(bad)) {
		for _, text := range []string{"value of another key", "metadata jsonb cannot hold", "this is not avro", "body"} {
			if bytes.Contains(raw, []byte(text)) {
				t.Errorf("a dead letter carries the text %q of the record it parks", text)
			}
		}
	}
	byKey := map[string]schemas.DeadLetter{}
	for _, d := range dls {
		byKey[string(d.Key)] = d
	}
	for _, b := range bad {
		t.Run(b.reason, func(t *testing.T) {
			d, ok := byKey[string(b.rec.Key)]
			if !ok {
				t.Fatalf("no dead letter for key %q (have %v)", b.rec.Key, slices.Collect(maps.Keys(byKey)))
			}
			if d.Reason != b.reason || d.Stage != string(ids.StageSink) || d.Topic != e.topic || d.Offset < 0 || d.Error == "" {
				t.Errorf("dead letter = {reason %q stage %q topic %q offset %d error %q}, want reason %q from %s",
					d.Reason, d.Stage, d.Topic, d.Offset, d.Error, b.reason, e.topic)
			}
			// The dead letter names the record, never carries it (issue #19): the
			// original is read back from the evidence topic at its offset.
			if d.Value != nil || !d.IsByReference() {
				t.Errorf("dead letter carries the original value (%d bytes)", len(d.Value))
			}
			if orig := e.recordAt(t, d.Topic, d.Partition, d.Offset); string(orig.Value) != string(b.rec.Value) || string(orig.Key) != string(b.rec.Key) {
				t.Errorf("the record at %s/%d@%d is not the parked one", d.Topic, d.Partition, d.Offset)
			}
			if got := r.counter(r.s.m.deadLettered, b.reason); got != 1 {
				t.Errorf("dead_lettered{reason=%s} = %d, want 1", b.reason, got)
			}
		})
	}
}

// TestSinkIsolatesConstraintViolations makes Postgres itself reject some rows (a
// CHECK constraint added to the test database): the sink halves the failing calls
// until it finds them, parks exactly those, writes every other row, and writes the
// previous version of a key whose newest version was rejected.
func TestSinkIsolatesConstraintViolations(t *testing.T) {
	e := newEnv(t, 2)
	if _, err := e.pool.Exec(context.Background(), `ALTER TABLE workspace_timeline_evidence
		ADD CONSTRAINT sink_test_no_poison CHECK (content NOT LIKE '%poison%')`); err != nil {
		t.Fatal(err)
	}
	group := uniqueGroup(t)
	f := newFixture(e, "ws-constraint")
	var recs []*kgo.Record
	var want []schemas.EvidenceRecord
	poisoned := map[string]bool{}
	for i, r := range f.messages(20) {
		if i%13 == 5 {
			r.Content = "poison pill " + r.Content
			r.ContentHash = sha("live\x00" + r.Content)
			poisoned[r.Key()] = true
		} else {
			want = append(want, r)
		}
		recs = append(recs, e.record(t, r))
	}
	// A key whose good first version is followed by a rejected edit keeps the first.
	keep := evidenceOf(f.ws, f.chats[1], "om_keep", "good first version", t0)
	edit := evidenceOf(f.ws, f.chats[1], "om_keep", "poison edit", t0.Add(time.Minute))
	recs = append(recs, e.record(t, keep), e.record(t, edit))
	want = append(want, keep)
	e.produce(t, recs...)

	r := start(t, e.options(group, e.st), hooks{})
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	assertRows(t, e.rows(t), want)
	dls := e.deadLetters(t, len(poisoned)+1)
	for _, d := range dls {
		if d.Reason != ReasonConstraint {
			t.Errorf("dead letter of %q: reason %q, want %q", d.Key, d.Reason, ReasonConstraint)
		}
	}
	if n := testenv.EndOffsets(t, e.dlq); n != int64(len(poisoned)+1) {
		t.Errorf("%d dead letters, want %d (the rejected rows only)", n, len(poisoned)+1)
	}
	if got := r.counter(r.s.m.deadLettered, ReasonConstraint); got != len(poisoned)+1 {
		t.Errorf("dead_lettered{constraint} = %d, want %d", got, len(poisoned)+1)
	}
}

// TestSinkPostgresOutage cuts the sink off its database: it pauses without
// committing or skipping anything, and writes everything once the database is back.
func TestSinkPostgresOutage(t *testing.T) {
	e := newEnv(t, 3)
	r, proxy, group, first := e.startBehindProxy(t, "ws-outage", 2)

	proxy.SetUp(false)
	committed := e.committedOffsets(t, group)
	more := newFixture(e, "ws-outage-2").messages(5)
	e.produce(t, e.records(t, more)...)
	testenv.Eventually(t, waitBound, "the sink retrying the database", func() bool {
		return r.counter(r.s.m.retries, opDatabase) >= 3
	})
	if got := testutilGauge(r.s.m); got != 1 {
		t.Errorf("paused gauge = %v during the outage, want 1", got)
	}
	if n := e.committedOffsets(t, group); n != committed {
		t.Fatalf("offsets moved from %d to %d while the database was down", committed, n)
	}
	assertRows(t, e.rows(t), first)

	proxy.SetUp(true)
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	assertRows(t, e.rows(t), append(first, more...))
	if got := testutilGauge(r.s.m); got != 0 {
		t.Errorf("paused gauge = %v after recovery, want 0", got)
	}
	if n := testenv.EndOffsets(t, e.dlq); n != 0 {
		t.Errorf("%d dead letters, want none: an outage is not a bad record", n)
	}
}

// TestSinkRebalanceDuringOutage: a member paused by a database outage gives its batch
// up when a rebalance waits for it (instead of holding the group for the length of
// the outage); the partitions it keeps are read again from the batch's start, the
// others are written by the new member, and nothing is lost.
func TestSinkRebalanceDuringOutage(t *testing.T) {
	e := newEnv(t, 4)
	a, proxy, group, warm := e.startBehindProxy(t, "ws-rebalance", 1)

	proxy.SetUp(false)
	want := append(warm, newFixture(e, "ws-rebalance-2").messages(6)...)
	e.produce(t, e.records(t, want[len(warm):])...)
	testenv.Eventually(t, waitBound, "member A pausing on the outage", func() bool {
		return a.counter(a.s.m.retries, opDatabase) >= 2
	})

	b := start(t, e.options(group, e.st), hooks{})
	testenv.Eventually(t, waitBound, "member A giving its batch up for the rebalance", func() bool {
		return a.counter(a.s.m.aborted, abortRebalance) >= 1
	})
	testenv.Eventually(t, waitBound, "member B writing the partitions it was given", func() bool {
		return b.outcome(outcomeInserted) > 0
	})

	proxy.SetUp(true)
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	assertRows(t, e.rows(t), want)
}

// startBehindProxy starts a sink of a new group whose database connection goes
// through a proxy the test can cut, produces n messages of ws and returns once
// the sink has committed them.
func (e *env) startBehindProxy(t testing.TB, ws ids.WorkspaceID, n int) (*running, *pgProxy, string, []schemas.EvidenceRecord) {
	t.Helper()
	proxy, dsn := newPGProxy(t, e.dsn)
	group := uniqueGroup(t)
	r := start(t, e.options(group, openStore(t, dsn)), hooks{})
	warm := newFixture(e, ws).messages(n)
	e.produce(t, e.records(t, warm)...)
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	return r, proxy, group, warm
}

func testutilGauge(m *metrics) float64 { return testutil.ToFloat64(m.paused) }

// TestSinkDeadLetterTooLargeForItsTopic: a dead letter of a record larger than the
// dead-letter topic accepts is parked anyway, since it names the record (topic,
// partition, offset) and never carries its value, and the sink goes on.
func TestSinkDeadLetterTooLargeForItsTopic(t *testing.T) {
	e := newEnv(t, 1)
	limit := "4096"
	e.dlq = testenv.NewTopic(t, 1, map[string]*string{"max.message.bytes": &limit})
	group := uniqueGroup(t)
	f := newFixture(e, "ws-too-large")
	big := make([]byte, 16<<10)
	_, _ = rand.Read(big) // incompressible
	big[0] = 0x7F         // no wire-format header: malformed
	key := ids.EvidenceKey(f.ws, f.chats[0], "om_big")
	good := f.messages(2)
	e.produce(t, e.raw(key, big), e.record(t, good[0]), e.record(t, good[1]))

	start(t, e.options(group, e.st), hooks{})
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	assertRows(t, e.rows(t), good)
	dls := e.deadLetters(t, 1)
	d := dls[0]
	if string(d.Key) != key || d.Value != nil || d.Reason != schemas.ReasonMalformed || d.Offset != 0 || !d.IsByReference() {
		t.Errorf("dead letter = {key %q value %d bytes reason %q offset %d error %q}, want the key, no value, reason %q, offset 0",
			d.Key, len(d.Value), d.Reason, d.Offset, d.Error, schemas.ReasonMalformed)
	}
}

// TestSinkRebalanceUnderLoad: while records keep arriving, a second member joins;
// the first lets the rebalance through between batches (it is not starved by the
// pipeline), both write, and every record ends up written exactly once.
func TestSinkRebalanceUnderLoad(t *testing.T) {
	e := newEnv(t, 4)
	group := uniqueGroup(t)
	o := e.options(group, e.st)
	// Small batches and a producer faster than the sink: there is always a backlog,
	// so a batch is always in flight and the next one ready.
	o.MaxBatchRecords = 20
	a := start(t, o, hooks{})

	// Keep records coming until B has written some: a member that never let the
	// rebalance through would keep B waiting for as long as the load lasts.
	var want []schemas.EvidenceRecord
	var b *running
	deadline := time.Now().Add(waitBound)
	for round := 0; b == nil || b.outcome(outcomeInserted) == 0; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("member B wrote nothing within %s of continuous load", waitBound)
		}
		f := newFixture(e, ids.WorkspaceID(fmt.Sprintf("ws-load-%d", round)))
		rs := f.messages(100)
		want = append(want, rs...)
		e.produce(t, e.records(t, rs)...)
		if round == 2 {
			ob := e.options(group, e.st)
			ob.MaxBatchRecords = 20
			b = start(t, ob, hooks{})
		}
	}
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	assertRows(t, e.rows(t), want)
	if n := a.outcome(outcomeInserted) + b.outcome(outcomeInserted); n != len(want) {
		t.Errorf("inserted %d rows in all, want %d", n, len(want))
	}
}
