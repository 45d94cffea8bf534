package synthesis

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
)

// TestWindowInSeveralChunks processes a window of 95 messages: several chunks, one
// cursor, every eligible message primary exactly once and in order, read-only context
// from before the window and from earlier chunks of the same thread, the final cursor
// and aggregate recorded.
func TestWindowInSeveralChunks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limit     int
		budget    int
		minChunks int
	}{
		{name: "count bound", limit: 40, budget: DefaultMaxEstimatedTokensPerChunk, minChunks: 3},
		{name: "token bound", limit: 40, budget: 700, minChunks: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			lines := contextBefore("omt_db", "before the window %d") // context before the window
			for i := range 95 {
				l := line{id: fmt.Sprintf("m%03d", i), at: time.Duration(i) * 6 * time.Second, sender: "Bob",
					text: fmt.Sprintf("status line %d: checked shard %d, nothing unusual yet", i, i)}
				if i%10 == 0 {
					l.thread = "omt_db" // a thread running through every chunk
					l.text = fmt.Sprintf("Logs show connection pool exhaustion on payments-db shard %d", i)
				}
				lines = append(lines, l)
			}
			lines = append(lines, line{id: "inelig", at: 90 * time.Second, sender: "Bot", text: "card", noElig: true})
			rows := e.seed(win, lines...)
			var primary []store.Evidence
			for _, r := range rows {
				if r.SynthesisEligible && !r.OccurredAt.Before(win) {
					primary = append(primary, r)
				}
			}
			if len(primary) != 95 {
				t.Fatalf("seeded %d primary rows", len(primary))
			}
			ids := byMessage(rows)
			threadIDs := map[int64]bool{}
			for _, l := range lines {
				if l.thread != "" {
					threadIDs[ids[l.id]] = true
				}
			}

			o := e.options()
			rec := &recorder{next: o.Synthesizer}
			o.Synthesizer = rec
			o.EvidenceBatchLimit, o.MaxEstimatedTokensPerChunk = tc.limit, tc.budget
			r := e.start(o)
			e.produce(e.closedWindow(win, rows))
			st := e.waitState(win, "the window to finish", terminal)

			reqs := rec.requests()
			if len(reqs) < tc.minChunks {
				t.Fatalf("%d chunks, want at least %d", len(reqs), tc.minChunks)
			}
			var seen []int64
			for i, req := range reqs {
				p, c := primaryIDs(req)
				if len(p) > tc.limit {
					t.Errorf("chunk %d has %d primary messages, limit %d", i, len(p), tc.limit)
				}
				for _, id := range c {
					if slices.Contains(p, id) {
						t.Errorf("chunk %d: evidence %d is primary and context", i, id)
					}
					if id == ids["inelig"] {
						t.Errorf("chunk %d: an ineligible message is context", i)
					}
				}
				slices.Sort(p)
				seen = append(seen, p...)
				if i == 0 && !slices.Contains(c, ids["pre2"]) {
					t.Errorf("first chunk lacks the context before the window: %v", c)
				}
				// A chunk holding a message of the omt_db thread gets the thread's
				// earlier messages (before the window or from earlier chunks) as context.
				hasThread, hasEarlier := false, false
				for _, id := range p {
					hasThread = hasThread || threadIDs[id]
				}
				for _, id := range c {
					hasEarlier = hasEarlier || threadIDs[id]
				}
				if hasThread && !hasEarlier {
					t.Errorf("chunk %d lacks earlier messages of its thread as context: %v", i, c)
				}
			}
			var want []int64
			for _, p := range primary {
				want = append(want, p.ID)
			}
			slices.Sort(want)
			slices.Sort(seen)
			if !slices.Equal(seen, want) {
				t.Fatalf("primary evidence across chunks:\n%v\nwant each of\n%v\nexactly once", seen, want)
			}

			last := primary[len(primary)-1].Cursor()
			switch {
			case st.Cursor == nil || *st.Cursor != last:
				t.Errorf("cursor = %v, want %v", st.Cursor, last)
			case st.Meta.ChunkCount != len(reqs):
				t.Errorf("chunk count = %d, want %d", st.Meta.ChunkCount, len(reqs))
			case st.Meta.EvidenceCount != 95:
				t.Errorf("evidence count = %d, want 95", st.Meta.EvidenceCount)
			case st.AggregateHash != AggregateHash(primary):
				t.Errorf("aggregate = %s, want %s", st.AggregateHash, AggregateHash(primary))
			case st.Attempts != 1:
				t.Errorf("attempts = %d, want 1", st.Attempts)
			}
			// The last chunk's metrics follow the commit that made the window terminal;
			// the window's outcome is counted after them.
			eventually(t, "the window's outcome counted", func() bool {
				return r.counter("larkline_synthesis_windows_total") == 1
			})
			if got := r.counter("larkline_synthesis_chunks_total"); int(got) != len(reqs) {
				t.Errorf("chunks metric = %v, want %d", got, len(reqs))
			}
			for _, l := range lines {
				if strings.Contains(r.logs.String(), l.text) {
					t.Fatalf("a log line carries message text %q", l.text)
				}
			}
		})
	}
}
