package synthesis

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/schemas"
)

// benchWindowLines are the messages of one benchmark window: an incident chat's
// usual mix, some of which the rule synthesizer turns into entries.
var benchWindowLines = []string{
	"checkout p99 latency is above 2s since 14:02, paging the on-call",
	"deploy 4711 went out at 13:58, rolling back now",
	"rollback of 4711 done, latency recovering",
	"root cause: the connection pool was capped at 10 in the new config",
	"mitigated: p99 back under 300ms",
	"status update sent to the customer channel",
	"I'll open a follow-up ticket for the pool size alert",
	"resolved, closing the incident bridge",
}

// benchSynthesisSetup seeds windows × perWindow messages of one chat, perWindow
// per consecutive window from win, and returns the closed records naming them. With
// distinct, every window's lines name their window, so the rule synthesizer does not
// find them among the entries of the windows before.
func benchSynthesisSetup(b *testing.B, e *env, windows, perWindow int, distinct bool) []schemas.ClosedWindow {
	b.Helper()
	cws := make([]schemas.ClosedWindow, 0, windows)
	step := winLen / time.Duration(perWindow+1)
	for w := range windows {
		start := win.Add(time.Duration(w) * winLen)
		lines := make([]line, perWindow)
		for i := range lines {
			text := fmt.Sprintf("%s (#%d)", benchWindowLines[i%len(benchWindowLines)], i)
			if distinct {
				text = fmt.Sprintf("%s (window %d, #%d)", benchWindowLines[i%len(benchWindowLines)], w, i)
			}
			lines[i] = line{id: fmt.Sprintf("w%04d_%03d", w, i), at: time.Duration(i+1) * step,
				sender: fmt.Sprintf("User%d", i%5), text: text}
		}
		cws = append(cws, e.closedWindow(start, e.seed(start, lines...)))
	}
	return cws
}

// benchSynthesisSize is the number of windows and messages per window of
// BenchmarkSynthesis: LARKLINE_BENCH_WINDOWS (default 100) and
// LARKLINE_BENCH_WINDOW_LINES (default 40, one chunk).
func benchSynthesisSize(b *testing.B) (windows, perWindow int) {
	windows, perWindow = 100, 40
	for _, v := range []struct {
		name string
		n    *int
	}{{"LARKLINE_BENCH_WINDOWS", &windows}, {"LARKLINE_BENCH_WINDOW_LINES", &perWindow}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a positive count", v.name, s)
			}
			*v.n = n
		}
	}
	return windows, perWindow
}

// BenchmarkSynthesis measures closed windows per second and evidence rows per second
// through the synthesis worker with the rule synthesizer (no model) on the real broker
// and Postgres, and, in the same operation right after it, the floor of that work:
// per window, one plain pgx transaction that reads the window's eligible evidence
// rows and inserts as many entries, each bound to one of the rows, as larkline wrote
// per window in that operation. Each operation seeds two fresh databases (untimed):
// LARKLINE_BENCH_WINDOWS windows of LARKLINE_BENCH_WINDOW_LINES messages of one chat.
// larkline is timed from producing the closed records to the last window's terminal
// state (after a warm-up window that includes the group join), the floor from its
// first read to its last commit. Reported: windows/s and rows/s (larkline),
// floor-windows/s, and ratio, larkline's windows/s over the floor's, both measured
// back to back under the same load.
//
// Two workloads: repeated, the same lines in every window (most of them already
// entries of an earlier window: about half an entry per window), and distinct, lines
// that name their window (about four entries per window, a summary to update).
func BenchmarkSynthesis(b *testing.B) {
	for _, distinct := range []bool{false, true} {
		b.Run(map[bool]string{false: "lines=repeated", true: "lines=distinct"}[distinct], func(b *testing.B) {
			benchSynthesis(b, distinct)
		})
	}
}

func benchSynthesis(b *testing.B, distinct bool) {
	windows, perWindow := benchSynthesisSize(b)
	var larkline, floor time.Duration
	var rows, entries int
	for range b.N {
		d, r, n := benchSynthesisWorker(b, windows, perWindow, distinct)
		larkline, rows, entries = larkline+d, rows+r, entries+n
		floor += benchSynthesisFloor(b, windows, perWindow, distinct, (n+windows/2)/windows) // entries per window, rounded
	}
	b.ReportMetric(float64(larkline.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(windows*b.N)/larkline.Seconds(), "windows/s")
	b.ReportMetric(float64(rows)/larkline.Seconds(), "rows/s")
	b.ReportMetric(float64(entries)/float64(windows*b.N), "entries/window")
	b.ReportMetric(float64(windows*b.N)/floor.Seconds(), "floor-windows/s")
	b.ReportMetric(floor.Seconds()/larkline.Seconds(), "ratio")
}

// benchSynthesisWorker runs the worker over windows fresh windows and returns the
// time they took, their evidence rows and the entries written.
func benchSynthesisWorker(b *testing.B, windows, perWindow int, distinct bool) (d time.Duration, rows, entries int) {
	b.StopTimer()
	defer b.StartTimer()
	e := newEnv(b)
	// One more window, the first, synthesized before the clock starts: the group
	// join and the first fetch are not the worker's rate.
	cws := benchSynthesisSetup(b, e, windows+1, perWindow, distinct)
	r := e.start(e.options())
	defer r.stop(b)
	ctx := context.Background()
	e.produce(cws[0])
	eventually(b, "the warm-up window to finish", func() bool {
		st, err := e.st.GetWindow(ctx, e.key(win))
		return err == nil && terminal(st)
	})
	warm := len(e.entries())
	cws = cws[1:]
	t := time.Now()
	e.produce(cws...)
	for w := 1; w <= windows; w++ {
		key := e.key(win.Add(time.Duration(w) * winLen))
		eventually(b, "every benchmark window to finish", func() bool {
			st, err := e.st.GetWindow(ctx, key)
			return err == nil && terminal(st)
		})
	}
	d = time.Since(t)
	for _, cw := range cws {
		rows += cw.EvidenceCount
	}
	return d, rows, len(e.entries()) - warm
}

// benchSynthesisFloor runs the floor over windows fresh windows, per entries each,
// and returns the time it took.
func benchSynthesisFloor(b *testing.B, windows, perWindow int, distinct bool, per int) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	e := newEnv(b)
	benchSynthesisSetup(b, e, windows, perWindow, distinct)
	pool := e.st.Pool()
	ctx := context.Background()
	t := time.Now()
	for w := range windows {
		start := win.Add(time.Duration(w) * winLen)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			res, err := tx.Query(ctx, `SELECT id, occurred_at, actor_display_name, content, metadata_json
				FROM workspace_timeline_evidence
				WHERE workspace_id = $1 AND chat_id = $2 AND occurred_at >= $3 AND occurred_at < $4
				  AND synthesis_eligible AND NOT deleted ORDER BY occurred_at, id`,
				string(e.ws), string(e.chat), start, start.Add(winLen))
			if err != nil {
				return err
			}
			var ids []int64
			var (
				id          int64
				at          time.Time
				actor, text string
				meta        []byte
			)
			if _, err := pgx.ForEachRow(res, []any{&id, &at, &actor, &text, &meta}, func() error {
				ids = append(ids, id)
				return nil
			}); err != nil {
				return err
			}
			for k := range per {
				var entry int64
				if err := tx.QueryRow(ctx, `INSERT INTO workspace_timeline_entries
					(workspace_id, occurred_at, kind, title, body, source, status, fingerprint)
					VALUES ($1, $2, 'update', $3, $4, 'ai', 'draft', $5) RETURNING id`,
					string(e.ws), start, "entry", "body", fmt.Sprintf("floor-%d-%d", w, k)).Scan(&entry); err != nil {
					return err
				}
				if len(ids) > 0 {
					if _, err := tx.Exec(ctx, `INSERT INTO workspace_timeline_entry_evidence (entry_id, evidence_id) VALUES ($1, $2)`,
						entry, ids[k%len(ids)]); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("floor window %d: %v", w, err)
		}
	}
	return time.Since(t)
}
