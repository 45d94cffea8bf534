package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// benchRows is the number of evidence rows of one round: enough for the sink to reach
// a steady state (several full batches per writer) with -benchtime 1x (make bench).
const benchRows = 20_000

// benchEvidence returns benchRows distinct first versions: 8 workspaces × 25 chats,
// each message of a typical incident-chat length.
func benchEvidence() []schemas.EvidenceRecord {
	const workspaces, chats = 8, 25
	text := strings.Repeat("checkout p99 latency back under 300ms after rollback of build 4711; ", 3)
	out := make([]schemas.EvidenceRecord, 0, benchRows)
	for i := range benchRows {
		ws := ids.WorkspaceID(fmt.Sprintf("ws-bench-%d", i%workspaces))
		chat := ids.ChatID(fmt.Sprintf("oc_bench_%02d", (i/workspaces)%chats))
		msg := ids.MessageID(fmt.Sprintf("om_bench_%06d", i))
		at := t0.Add(time.Duration(i) * time.Millisecond)
		out = append(out, evidenceOf(ws, chat, msg, fmt.Sprintf("%s#%d", text, i), at))
	}
	return out
}

var evidenceCopyColumns = []string{"workspace_id", "source", "source_type", "source_key", "occurred_at",
	"source_updated_at", "observed_at", "actor_id", "actor_display_name", "content", "content_hash",
	"metadata_json", "deleted", "synthesis_eligible"}

// copyRows writes rows with one raw pgx CopyFrom: the practical limit of the table.
func copyRows(ctx context.Context, e *env, rows []store.Evidence) (int64, error) {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	return conn.Conn().CopyFrom(ctx, pgx.Identifier{"workspace_timeline_evidence"}, evidenceCopyColumns,
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			r := &rows[i]
			return []any{string(r.WorkspaceID), r.Source, r.SourceType, r.SourceKey, r.OccurredAt,
				r.SourceUpdatedAt, r.ObservedAt, r.ActorID, r.ActorDisplayName, r.Content, r.ContentHash,
				json.RawMessage(r.Metadata), r.Deleted, r.SynthesisEligible}, nil
		}))
}

func truncate(b *testing.B, e *env) {
	b.Helper()
	if _, err := e.pool.Exec(context.Background(), `TRUNCATE workspace_timeline_evidence RESTART IDENTITY CASCADE`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSinkThroughput measures evidence rows per second from the evidence topic
// into workspace_timeline_evidence by the sink, and in the same run a raw pgx
// CopyFrom of the same rows into the same (emptied) table: the practical limit.
// Reported: sink_rows/s (from the first polled batch to the last committed offset:
// fetch, decode, upsert, commit; the group join excluded), copy_rows/s, and
// sink/copy, whose target is at least 0.5. An iteration runs benchRounds pairs, each
// writing benchRows new rows into an empty table, the sink reading them from a fresh
// topic of 4 partitions; the sub-benchmarks vary Options.Writers.
func BenchmarkSinkThroughput(b *testing.B) {
	e := newEnv(b, 4)
	evidence := benchEvidence()
	rows := make([]store.Evidence, len(evidence))
	for i := range evidence {
		rows[i] = evidenceRow(&evidence[i])
	}
	for _, writers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			var sinkTime, copyTime time.Duration
			var sinkRows, copied int64
			for range b.N {
				// Alternate the two so that both see the same (shared, noisy) machine.
				for range benchRounds {
					d, n := benchCopy(b, e, rows)
					copyTime, copied = copyTime+d, copied+n
					d, n = benchSink(b, e, evidence, writers)
					sinkTime, sinkRows = sinkTime+d, sinkRows+n
				}
			}
			sinkRate := float64(sinkRows) / sinkTime.Seconds()
			copyRate := float64(copied) / copyTime.Seconds()
			// ns/op is the sink's own time per iteration, not the set-up around it.
			b.ReportMetric(float64(sinkTime.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(sinkRate, "sink_rows/s")
			b.ReportMetric(copyRate, "copy_rows/s")
			b.ReportMetric(sinkRate/copyRate, "sink/copy")
		})
	}
}

// benchRounds is how many (CopyFrom, sink) pairs one iteration runs.
const benchRounds = 3

// benchCopy empties the table and copies rows into it.
func benchCopy(b *testing.B, e *env, rows []store.Evidence) (time.Duration, int64) {
	b.Helper()
	truncate(b, e)
	t := time.Now()
	n, err := copyRows(context.Background(), e, rows)
	if err != nil {
		b.Fatalf("CopyFrom: %v", err)
	}
	return time.Since(t), n
}

// benchSink empties the table, produces evidence to a fresh topic and lets a sink
// write it. It returns the time from the sink's first batch to its last commit.
func benchSink(b *testing.B, e *env, evidence []schemas.EvidenceRecord, writers int) (time.Duration, int64) {
	b.Helper()
	ctx := context.Background()
	truncate(b, e)
	topic := testenv.NewTopic(b, 4, nil)
	recs := make([]*kgo.Record, len(evidence))
	for i := range evidence {
		recs[i] = e.record(b, evidence[i])
		recs[i].Topic = topic
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := e.prod.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		b.Fatalf("produce: %v", err)
	}

	var (
		first     time.Time
		firstOnce sync.Once
		committed atomic.Int64
		done      = make(chan time.Time, 1)
	)
	o := e.options(uniqueGroup(b), e.st)
	o.EvidenceTopic, o.Writers = topic, writers
	r := start(b, o, hooks{
		batchStart: func(int) { firstOnce.Do(func() { first = time.Now() }) },
		afterCommit: func(n int) {
			if committed.Add(int64(n)) == int64(len(recs)) {
				done <- time.Now()
			}
		},
	})
	var last time.Time
	select {
	case last = <-done:
	case <-time.After(waitBound):
		b.Fatalf("the sink committed %d of %d records within %s", committed.Load(), len(recs), waitBound)
	}
	r.shutdown(b)
	var count int64
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM workspace_timeline_evidence`).Scan(&count); err != nil {
		b.Fatal(err)
	}
	if count != int64(len(evidence)) {
		b.Fatalf("the sink wrote %d rows, want %d", count, len(evidence))
	}
	return last.Sub(first), count
}
