package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestSinkDeadLetterRedrive: a record the database refused is parked by reference;
// once the cause is fixed, Redrive reads it back from the evidence topic at the
// parked offset and writes it through the sink's own checks, idempotently (issue
// #19). A record that still cannot be decoded is refused again.
func TestSinkDeadLetterRedrive(t *testing.T) {
	e := newEnv(t, 2)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `ALTER TABLE workspace_timeline_evidence
		ADD CONSTRAINT sink_test_no_poison CHECK (content NOT LIKE '%poison%')`); err != nil {
		t.Fatal(err)
	}
	group := uniqueGroup(t)
	f := newFixture(e, "ws-redrive")
	good := f.messages(2)
	poisoned := evidenceOf(f.ws, f.chats[0], "om_poison", "poison pill: the database refuses this", t0)
	garbage := e.raw(ids.EvidenceKey(f.ws, f.chats[0], "om_garbage"), []byte("this is not avro"))
	e.produce(t, append(e.records(t, good), e.record(t, poisoned), garbage)...)
	start(t, e.options(group, e.st), hooks{})
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	assertRows(t, e.rows(t), good)

	dls := e.deadLetters(t, 2)
	byReason := map[string]schemas.DeadLetter{}
	for _, d := range dls {
		byReason[d.Reason] = d
	}
	refused, ok := byReason[ReasonConstraint]
	if !ok || !refused.IsByReference() {
		t.Fatalf("dead letters %+v: want a %s one by reference", dls, ReasonConstraint)
	}
	at := func(d schemas.DeadLetter) *kgo.Record { return e.recordAt(t, d.Topic, d.Partition, d.Offset) }

	// Not fixed yet: refused again, nothing written.
	if out, err := Redrive(ctx, e.codecs.Evidence, e.st, at(refused)); !errors.Is(err, ErrStillRefused) || out != ReasonConstraint {
		t.Fatalf("redrive before the fix = %q, %v; want %s, ErrStillRefused", out, err, ReasonConstraint)
	}
	// The fix, then the redrive, twice.
	if _, err := e.pool.Exec(ctx, `ALTER TABLE workspace_timeline_evidence DROP CONSTRAINT sink_test_no_poison`); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"inserted", "unchanged"} {
		out, err := Redrive(ctx, e.codecs.Evidence, e.st, at(refused))
		if err != nil || out != want {
			t.Fatalf("redrive %d = %q, %v; want %q", i+1, out, err, want)
		}
	}
	assertRows(t, e.rows(t), append(good, poisoned))

	if out, err := Redrive(ctx, e.codecs.Evidence, e.st, at(byReason[schemas.ReasonMalformed])); !errors.Is(err, ErrStillRefused) || out != schemas.ReasonMalformed {
		t.Fatalf("redrive of undecodable bytes = %q, %v; want malformed, ErrStillRefused", out, err)
	}
}
