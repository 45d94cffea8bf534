package windows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/ids"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/schemas"
)

// larkID makes an id of Lark's shape (a prefix and 32 hex digits, 35 bytes).
func larkID(prefix string, n int) string {
	s := sha256.Sum256(fmt.Appendf(nil, "%s%d", prefix, n))
	return prefix + hex.EncodeToString(s[:16])
}

// burst returns n eligible evidence records of one chat, all within the first minute
// of the window at t0, with ids of Lark's shape.
func burst(w ids.WorkspaceID, ch ids.ChatID, n int) []schemas.EvidenceRecord {
	recs := make([]schemas.EvidenceRecord, n)
	for i := range recs {
		at := t0.Add(time.Duration(i) * time.Minute / time.Duration(n)).Truncate(time.Millisecond) // Avro keeps ms
		recs[i] = chatRecord(w, ch, larkID("om_", i), at, fmt.Sprint(i))
	}
	return recs
}

// expectedWindow is the evidence a closed window of recs must carry, in its order.
func expectedWindow(recs []schemas.EvidenceRecord) []schemas.WindowEvidence {
	ev := make([]schemas.WindowEvidence, len(recs))
	for i, r := range recs {
		ev[i] = schemas.WindowEvidence{Key: r.Key(), MessageID: r.MessageID, OccurredAt: r.OccurredAt.UTC(),
			ContentHash: r.ContentHash, SourceUpdatedAt: r.SourceUpdatedAt.UTC()}
	}
	schemas.SortWindowEvidence(ev)
	return ev
}

// TestIntegrationLargeWindowCloses closes a window of 10,000 messages (one chat, all
// within a minute) on the real broker: its closed-window record (~2 MB) and the last
// loop record of its fold (~1.2 MB) exceed Kafka's default 1 MB limits, so this needs
// kafka.MaxBatchBytes on the Goka producer, on the closed-window topic (created with
// DefaultTopicSpecs' configs) and on the loop and table topics (created by larkline's
// Goka topic manager). The record is read back with larkline's consumer options and
// must be complete.
//
// The evidence is produced 500 records at a time, each batch once the previous one
// is in the window: a window holds its refs in its own value until the page it
// sealed acknowledges them, and under an unpaced burst that acknowledgement queues
// behind the whole burst on the loop topic (see the package's Bounds).
//
// LARKLINE_TEST_LARGE_WINDOW=<messages> runs it with another window size (the
// figures for 50,000 in docs/operations.md were measured so).
func TestIntegrationLargeWindowCloses(t *testing.T) {
	const batch = 500
	n := 10_000
	if v := os.Getenv("LARKLINE_TEST_LARGE_WINDOW"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("LARKLINE_TEST_LARGE_WINDOW=%q: want a positive number of messages", v)
		}
	}
	c := newCluster(t)
	version, clock := uniqueVersion(t), &fakeClock{now: t0}
	chatID := ids.ChatID(larkID("oc_", 1))
	recs := burst(ws, chatID, n)
	a := c.start(version, clock, nil)

	taken := func() int {
		return int(testutil.ToFloat64(a.p.m.evidence.WithLabelValues("added")) +
			testutil.ToFloat64(a.p.m.evidence.WithLabelValues("logged")))
	}
	began := time.Now()
	for i := 0; i < n; i += batch {
		c.produce(recs[i:min(i+batch, n)]...)
		waitFor(t, "the batch taken into the window", func() bool { return taken() >= min(i+batch, n) || a.exited() })
		if a.exited() {
			t.Fatalf("processor stopped while taking in the evidence: %v", a.runErr())
		}
	}
	t.Logf("%d messages produced and taken into one window in %s", n, time.Since(began).Round(time.Millisecond))

	closing := time.Now()
	clock.Set(t0.Add(13 * time.Minute))
	a.p.Wakeup()
	rec, raw := c.nextClosed(t, a, 60*time.Second)
	t.Logf("window of %d messages closed and consumed %s after it was due; record %d bytes",
		rec.EvidenceCount, time.Since(closing).Round(time.Millisecond), len(raw))

	want := expectedWindow(recs)
	if rec.EvidenceCount != n || len(rec.Evidence) != n {
		t.Fatalf("closed window has evidence_count %d and %d entries, want %d", rec.EvidenceCount, len(rec.Evidence), n)
	}
	for i := range want {
		g, w := rec.Evidence[i], want[i]
		if g.Key != w.Key || g.MessageID != w.MessageID || !g.OccurredAt.Equal(w.OccurredAt) ||
			g.ContentHash != w.ContentHash || !g.SourceUpdatedAt.Equal(w.SourceUpdatedAt) || g.Deleted {
			t.Fatalf("evidence[%d] = %+v, want %+v", i, g, w)
		}
	}
	if h := schemas.WindowAggregateHash(want); rec.AggregateHash != h {
		t.Fatalf("aggregate hash %s, want %s", rec.AggregateHash, h)
	}
	if n >= 10_000 && len(raw) <= 1<<20 {
		t.Fatalf("closed record is %d bytes: the test no longer exceeds Kafka's default 1 MiB limit", len(raw))
	}
}

// TestIntegrationRecordTooLarge: a closed record above Options.MaxRecordBytes stops
// the processor with ErrRecordTooLarge and loses nothing; an instance with the limit
// raised closes the window.
func TestIntegrationRecordTooLarge(t *testing.T) {
	const n = 30 // one page: the close of an unpaged window emits the record
	c := newCluster(t)
	version, clock := uniqueVersion(t), &fakeClock{now: t0}
	recs := burst(ws, chat, n)
	a := c.start(version, clock, func(o *Options) { o.MaxRecordBytes = 2000 })
	c.produce(recs...)
	waitFor(t, "the window", windowHolds(a.p, ids.ChatKey(ws, chat), t0, n))
	clock.Set(t0.Add(13 * time.Minute))
	a.p.Wakeup()
	waitFor(t, "the processor to stop", a.exited)
	if err := a.runErr(); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("processor stopped with %v, want ErrRecordTooLarge", err)
	}
	a.failureExpected = true
	if got := testutil.ToFloat64(a.p.m.tooLarge); got != 1 {
		t.Fatalf("records_too_large_total = %v, want 1", got)
	}

	c.start(version, clock, nil) // default limit: the redelivered close emits the window
	got := c.closedRecords(1, 30*time.Second)
	if len(got) != 1 || got[0].EvidenceCount != n {
		t.Fatalf("want the window of %d messages once after the restart, got %d records", n, len(got))
	}
}

// nextClosed reads the closed-window topic with larkline's consumer options until one
// record arrives (or the processor stops, or within passes) and returns it decoded
// and raw.
func (c *cluster) nextClosed(t *testing.T, inst *instance, within time.Duration) (schemas.ClosedWindow, []byte) {
	t.Helper()
	opts, err := kafka.NewClientOptions(kafka.Options{Brokers: c.brokers, ClientID: "windows-it-reader"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(c.closed), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if inst.exited() {
			t.Fatalf("processor stopped before the window closed: %v", inst.runErr())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, e := range fs.Errors() {
			if e.Err != context.DeadlineExceeded {
				t.Fatalf("reading %s: %v", c.closed, e.Err)
			}
		}
		if recs := fs.Records(); len(recs) > 0 {
			w, err := c.codecs.ClosedWindow.Decode(context.Background(), recs[0].Value)
			if err != nil {
				t.Fatalf("closed record: %v", err)
			}
			return w, recs[0].Value
		}
	}
	t.Fatalf("no closed window within %s", within)
	return schemas.ClosedWindow{}, nil
}

// TestLargestWindowFits checks the figures package kafka documents for
// MaxRecordBytes: the closed-window record of a window of 50,000 messages with Lark
// ids (38-byte chat and message ids) and the longest workspace id fits, and so does
// one of 28,000 messages with every id at the record contract's limit; the fold's
// last loop record of such a window is smaller than its closed record.
func TestLargestWindowFits(t *testing.T) {
	long := func(prefix string, n int) string { // prefix, n, padded to ids.MaxIDLen
		s := prefix + fmt.Sprint(n)
		return s + strings.Repeat("x", ids.MaxIDLen-len(s))
	}
	tests := []struct {
		name          string
		n             int
		workspace     string
		chat, message func(n int) string
		minEntryBytes int // the entry size the documented figure assumes
	}{
		{"50,000 messages, Lark ids, longest workspace id", 50_000, strings.Repeat("w", ids.MaxIDLen),
			func(int) string { return "oc_" + strings.Repeat("c", 35) },
			func(n int) string { return fmt.Sprintf("om_%035d", n) }, 328},
		{"28,000 messages, every id at the contract limit", 28_000, strings.Repeat("w", ids.MaxIDLen),
			func(int) string { return long("oc_", 0) },
			func(n int) string { return long("om_", n) }, 599},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ch := ids.WorkspaceID(tt.workspace), ids.ChatID(tt.chat(0))
			refs := make([]msgRef, tt.n)
			for i := range refs {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				refs[i] = msgRef{ID: tt.message(i), At: at.UnixMilli(), Hash: hashOf(fmt.Sprint(i)), Upd: at.UnixMilli()}
			}
			codecs := mustCodecs(t)
			p := &Processor{opts: Options{Window: 10 * time.Minute, ProcessorVersion: "v1", Codecs: codecs}}
			rec, err := p.closedRecord(ids.ChatKey(w, ch), t0, refs, t0.Add(13*time.Minute).UnixMilli(), ReasonGraceElapsed)
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Evidence) != tt.n {
				t.Fatalf("record built with %d entries", len(rec.Evidence))
			}
			b, err := codecs.ClosedWindow.Encode(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			size := len(ids.ChatKey(w, ch)) + len(b)
			t.Logf("%d messages: closed record %d bytes (%.1f per entry), limit %d", tt.n, size, float64(size)/float64(tt.n), kafka.MaxRecordBytes)
			if size > kafka.MaxRecordBytes {
				t.Fatalf("closed record of %d bytes exceeds MaxRecordBytes %d", size, kafka.MaxRecordBytes)
			}
			if per := (size - 1024) / tt.n; per > tt.minEntryBytes {
				t.Fatalf("%d bytes per entry, more than the %d the documented bound assumes", per, tt.minEntryBytes)
			}
			loop, err := (loopCodec{}).Encode(&loopMsg{Op: opCollect, Page: 1, Pages: 2, Refs: refs})
			if err != nil {
				t.Fatal(err)
			}
			if len(loop) >= size {
				t.Fatalf("the fold's loop record (%d bytes) is not smaller than the closed record (%d)", len(loop), size)
			}
		})
	}
}
