package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestCompactionKeepsTheRedaction (issue #29): a redelivered live version that lands
// after its recall in the evidence topic is outranked in Postgres, and the sink
// publishes the stored redaction again above it, so that compaction, run for real on
// the broker (segments rolled at once, any dirt cleaned), keeps the redaction and
// drops the text. A redaction arriving after it changes nothing more.
func TestCompactionKeepsTheRedaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	str := func(s string) *string { return &s }
	e.topic = testenv.NewTopic(t, 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.ms": str("100"), "min.cleanable.dirty.ratio": str("0.001"),
		"min.compaction.lag.ms": str("0"), "delete.retention.ms": str("100"),
	})
	var err error
	if e.codecs, err = schemas.NewCodecs(schemas.Topics{Evidence: e.topic, DeadLetter: e.dlq}); err != nil {
		t.Fatal(err)
	}
	const (
		ws   ids.WorkspaceID = "ws-compact"
		chat ids.ChatID      = "oc_compact"
	)
	live := evidenceOf(ws, chat, "om_secret", "the password is hunter2", t0)
	gone := recalled(live, t0.Add(time.Hour))
	gone.MetadataJSON = `{"chat_id":"oc_compact","message_type":"text","deleted":true}`
	filler := evidenceOf(ws, chat, "om_filler", "filler", t0)

	group := uniqueGroup(t)
	run := start(t, e.options(group, e.st), hooks{})
	defer run.shutdown(t)
	// The live version, its recall, then a redelivery of the live version (another
	// ingest replica's replay guard did not know the event).
	e.produce(t, e.record(t, live), e.record(t, gone), e.record(t, live))
	testenv.WaitCommitted(t, waitBound, group, e.topic)
	if row := e.rows(t)[rowKey(live)]; !row.Deleted || row.Content != "" {
		t.Fatalf("stored row %+v, want the redaction", row)
	}

	// Compact for real: every filler rolls the active segment (segment.ms passed) so
	// the cleaner may take what came before; wait until one record of the key is left.
	var left []schemas.EvidenceRecord
	testenv.Eventually(t, waitBound, "compaction of the evidence topic", func() bool {
		e.produce(t, e.record(t, filler))
		left = e.versionsOf(t, live.Key())
		return len(left) == 1
	})
	if v := left[0]; !v.Deleted || v.Content != "" || v.ContentHash != gone.ContentHash {
		t.Fatalf("compaction kept %+v, want the redaction (hash %s)", v, gone.ContentHash)
	}
	if n := testutil.ToFloat64(run.s.m.republished); n < 1 {
		t.Fatalf("republished %v redactions, want at least 1", n)
	}
}

// versionsOf reads the evidence topic from its start to its end and returns the
// decoded versions of key, in offset order.
func (e *env) versionsOf(t testing.TB, key string) []schemas.EvidenceRecord {
	t.Helper()
	var out []schemas.EvidenceRecord
	for _, r := range testenv.ReadTopic(t, e.topic) {
		if string(r.Key) != key || len(r.Value) == 0 {
			continue
		}
		v, err := e.codecs.Evidence.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatalf("decode %s@%d: %v", r.Key, r.Offset, err)
		}
		out = append(out, v)
	}
	return out
}
