package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// Volume and shape of BenchmarkEvidenceQuery (issue #9). The retention period, the window
// length and the chunk size are config.Default's; the rest is the assumed workload.
const (
	// eqWorkspaces incident workspaces are opened within one evidence retention period
	// (evidenceRetention, 720h by default), each with one bound chat of eqMessagesPerChat
	// messages: 300 × 1,000 = 300,000 evidence rows held at steady state.
	eqWorkspaces      = 300
	eqMessagesPerChat = 1000
	// eqRowsEnv overrides the row count (eqWorkspaces × eqMessagesPerChat) for a bigger
	// run; the workspace count scales with it, eqMessagesPerChat each (the last takes the
	// remainder).
	eqRowsEnv = "LARKLINE_BENCH_EVIDENCE_ROWS"

	// An incident chat is active for eqIncidentSpan after the incident starts; half of
	// its messages fall in the first eqBurstSpan (the active response, ~40 messages per
	// 10-minute window, about one synthesis chunk), the rest spread over the remainder.
	eqIncidentSpan = 24 * time.Hour
	eqBurstSpan    = 2 * time.Hour
	eqResponders   = 12

	// Message mix: recalled (deleted) messages, non-text messages that are stored but are
	// not synthesis-eligible, and edited text messages (per mille of all messages).
	eqDeletedPerMille    = 10
	eqIneligiblePerMille = 30
	eqEditedPerMille     = 50

	// eqSamples random picks are timed per query and iteration.
	eqSamples = 2000
	// eqPageSize is the API's default evidence page (httpapi.DefaultPageSize, which this
	// package cannot import).
	eqPageSize = 50
	// eqKeys is how many versions one closed-window check names: one chunk's worth.
	eqKeys = 40
	// eqPlanRuns executions precede a captured plan, so that it is the plan a pooled
	// connection settles on (a prepared statement may switch to a generic plan after 5).
	eqPlanRuns = 6
)

// eqRetentionEnd anchors the loaded retention period: evidence is in
// [eqRetentionEnd-evidenceRetention, eqRetentionEnd).
var eqRetentionEnd = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)

var eqWords = strings.Fields(`the db primary in eu-west is failing over again, error rate on checkout api is
	up to 12% since 10:42 please check grafana dashboard; rollback of release 2026.03.2 started by oncall, p99
	latency back under 300ms? no still elevated, paging network team, kafka consumer lag growing on orders topic
	restarted pods in namespace payments, mitigation confirmed, customers report timeouts from mobile app,
	status page updated, root cause looks like connection pool exhaustion after config change, ack`)

// eqChat is one incident workspace with its bound chat.
type eqChat struct {
	ws        ids.WorkspaceID
	chat      ids.ChatID
	responder []string
	start     time.Time
	offsets   []time.Duration // of each message from start, ascending: message m is the m-th in time
}

// eqData is the generated evidence: every row is a pure function of (workspace, message),
// so a row can be rebuilt for a check without keeping the table in memory.
type eqData struct {
	chats     []eqChat
	retention time.Duration
}

func eqRowCount(b *testing.B) int {
	b.Helper()
	v := os.Getenv(eqRowsEnv)
	if v == "" {
		return eqWorkspaces * eqMessagesPerChat
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", eqRowsEnv, v)
	}
	return n
}

func eqHexID(prefix string, parts ...int) string {
	buf := make([]byte, 0, 8*len(parts)+len(prefix))
	buf = append(buf, prefix...)
	for _, p := range parts {
		buf = binary.BigEndian.AppendUint64(buf, uint64(p))
	}
	h := sha256.Sum256(buf)
	return prefix + hex.EncodeToString(h[:16])
}

func newEQData(rows int, retention time.Duration) *eqData {
	d := &eqData{retention: retention}
	from := eqRetentionEnd.Add(-retention)
	for w := 0; rows > 0; w++ {
		n := min(rows, eqMessagesPerChat)
		rows -= n
		rng := rand.New(rand.NewPCG(uint64(w), 0x1a4c))
		c := eqChat{
			ws:      ids.WorkspaceID(fmt.Sprintf("inc-%06d", w)),
			chat:    ids.ChatID(eqHexID("oc_", w)),
			start:   from.Add(time.Duration(rng.Int64N(int64(retention - eqIncidentSpan)))).Truncate(time.Millisecond),
			offsets: make([]time.Duration, n),
		}
		for i := range eqResponders {
			c.responder = append(c.responder, eqHexID("ou_", w, i))
		}
		for m := range c.offsets {
			if m < n/2 {
				c.offsets[m] = time.Duration(rng.Int64N(int64(eqBurstSpan)))
			} else {
				c.offsets[m] = eqBurstSpan + time.Duration(rng.Int64N(int64(eqIncidentSpan-eqBurstSpan)))
			}
			c.offsets[m] = c.offsets[m].Truncate(time.Millisecond) // Lark times are milliseconds
		}
		slices.Sort(c.offsets)
		d.chats = append(d.chats, c)
	}
	return d
}

func (d *eqData) rows() int {
	n := 0
	for i := range d.chats {
		n += len(d.chats[i].offsets)
	}
	return n
}

func (d *eqData) messageID(w, m int) ids.MessageID { return ids.MessageID(eqHexID("om_", w, m)) }

func (d *eqData) sourceKey(w, m int) string {
	return ids.MessageSourceKey(d.chats[w].chat, d.messageID(w, m))
}

// row builds message m of workspace w as the normalizer would store it.
func (d *eqData) row(w, m int) Evidence {
	c := &d.chats[w]
	rng := rand.New(rand.NewPCG(uint64(w), uint64(m)))
	at := c.start.Add(c.offsets[m])
	msg := d.messageID(w, m)
	e := Evidence{
		WorkspaceID:       c.ws,
		Source:            ids.SourceLark,
		SourceType:        ids.SourceTypeLarkMessage,
		SourceKey:         ids.MessageSourceKey(c.chat, msg),
		OccurredAt:        at,
		SourceUpdatedAt:   at,
		ActorID:           c.responder[rng.IntN(len(c.responder))],
		SynthesisEligible: true,
	}
	e.ActorDisplayName = "Responder " + e.ActorID[len(e.ActorID)-4:]
	msgType, reply := "text", ""
	if m > 0 && rng.IntN(5) == 0 {
		reply = fmt.Sprintf(`,"root_id":%q`, d.messageID(w, rng.IntN(m)))
	}
	switch k := rng.IntN(1000); {
	case k < eqDeletedPerMille:
		e.Deleted, e.SynthesisEligible = true, false
		e.SourceUpdatedAt = at.Add(time.Duration(1+rng.IntN(600)) * time.Second)
		e.ContentHash = hashOf("", "deleted")
	case k < eqDeletedPerMille+eqIneligiblePerMille:
		msgType, e.SynthesisEligible = "image", false
		e.Content = "[image]"
		e.ContentHash = hashOf(e.Content, "live")
	default:
		e.Content = eqText(rng)
		if k < eqDeletedPerMille+eqIneligiblePerMille+eqEditedPerMille {
			e.SourceUpdatedAt = at.Add(time.Duration(1+rng.IntN(1800)) * time.Second)
		}
		e.ContentHash = hashOf(e.Content, "live")
	}
	e.ObservedAt = e.SourceUpdatedAt.Add(time.Duration(200+rng.IntN(4800)) * time.Millisecond)
	e.Metadata = fmt.Appendf(nil, `{"chat_id":%q,"message_id":%q,"message_type":%q%s}`, c.chat, msg, msgType, reply)
	return e
}

// eqText is chat text: mostly short lines, some pasted paragraphs, a few pasted logs.
func eqText(rng *rand.Rand) string {
	var n int
	switch k := rng.IntN(100); {
	case k < 80:
		n = 20 + rng.IntN(180)
	case k < 98:
		n = 200 + rng.IntN(800)
	default:
		n = 1000 + rng.IntN(3000)
	}
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(eqWords[rng.IntN(len(eqWords))])
	}
	return sb.String()
}

// load writes every row with one COPY in occurred_at order, the order live ingestion
// appends them in, so the heap and the indexes have the layout they grow into.
func (d *eqData) load(ctx context.Context, b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	type ref struct {
		at   int64
		w, m int32
	}
	order := make([]ref, 0, d.rows())
	for w := range d.chats {
		for m, off := range d.chats[w].offsets {
			order = append(order, ref{d.chats[w].start.Add(off).UnixMilli(), int32(w), int32(m)})
		}
	}
	slices.SortFunc(order, func(a, b ref) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.w, b.w), cmp.Compare(a.m, b.m))
	})
	began := time.Now()
	i := 0
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"workspace_timeline_evidence"}, benchCopyColumns,
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(order) {
				return nil, nil
			}
			r := order[i]
			i++
			e := d.row(int(r.w), int(r.m))
			return benchCopyRow(&e), nil
		}))
	if err != nil || n != int64(len(order)) {
		b.Fatalf("COPY %d evidence rows: copied %d: %v", len(order), n, err)
	}
	copied := time.Since(began)
	began = time.Now()
	// VACUUM (ANALYZE): the statistics the planner needs, and the visibility map and hint
	// bits autovacuum would have set on a table this old.
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) workspace_timeline_evidence"); err != nil {
		b.Fatalf("vacuum analyze: %v", err)
	}
	b.Logf("loaded %d rows (%d workspaces × ≤%d messages over %s) in %s (%.0f rows/s, COPY in occurred_at order); VACUUM (ANALYZE) %s",
		n, len(d.chats), eqMessagesPerChat, d.retention, copied.Round(time.Millisecond), float64(n)/copied.Seconds(),
		time.Since(began).Round(time.Millisecond))
}

// eqPick is a random stored message: workspace w, message m, its row id and time.
type eqPick struct {
	w, m int
	at   time.Time
	id   int64
}

// picks draws n random messages (seeded: every run times the same picks) and looks
// their row ids up, which checks that the load stored them.
func (d *eqData) picks(ctx context.Context, b *testing.B, s *Store, n int) []eqPick {
	b.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	total := d.rows()
	out := make([]eqPick, n)
	wss, keys := make([]string, n), make([]string, n)
	for i := range out {
		g := rng.IntN(total)
		w := g / eqMessagesPerChat // every workspace but the last holds eqMessagesPerChat
		m := g % eqMessagesPerChat
		out[i] = eqPick{w: w, m: m, at: d.chats[w].start.Add(d.chats[w].offsets[m])}
		wss[i], keys[i] = string(d.chats[w].ws), d.sourceKey(w, m)
	}
	rows, err := s.pool.Query(ctx, `SELECT k.ord, e.id, e.occurred_at
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(ws, key, ord)
		JOIN workspace_timeline_evidence e ON e.workspace_id = k.ws AND e.source = $3 AND e.source_type = $4 AND e.source_key = k.key`,
		wss, keys, ids.SourceLark, ids.SourceTypeLarkMessage)
	if err != nil {
		b.Fatalf("look picks up: %v", err)
	}
	found := 0
	for rows.Next() {
		var (
			ord int64
			id  int64
			at  time.Time
		)
		if err := rows.Scan(&ord, &id, &at); err != nil {
			b.Fatalf("look picks up: %v", err)
		}
		p := &out[ord-1]
		if !at.Equal(p.at) {
			b.Fatalf("pick %s: stored occurred_at %s, generated %s", keys[ord-1], at, p.at)
		}
		p.id = id
		found++
	}
	if err := rows.Err(); err != nil {
		b.Fatalf("look picks up: %v", err)
	}
	if found != n {
		b.Fatalf("found %d of %d picked rows", found, n)
	}
	return out
}

// eqLatencies collects one query's latencies over all iterations.
type eqLatencies []time.Duration

func (l eqLatencies) report(b *testing.B, name string) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	q := func(p float64) float64 {
		i := int(p*float64(len(l))+0.999999) - 1 // nearest rank
		return float64(l[max(i, 0)].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(0.50), name+"_p50_us")
	b.ReportMetric(q(0.99), name+"_p99_us")
	b.ReportMetric(float64(l[len(l)-1].Nanoseconds())/1e3, name+"_max_us")
}

// BenchmarkEvidenceQuery loads workspace_timeline_evidence to the volume larkline holds at
// its default retention (design §20 load tests: database query latency at expected
// retention volume) and times the evidence reads of the pipeline and the API, each
// through the Store, eqSamples random picks per query and iteration, one after another
// on an idle pool, reporting p50/p99/max in µs as <query>_p50_us etc. (ns/op is one
// iteration: all three sweeps with their result checks):
//
//   - window_read: EvidenceInRange of one chat's 10-minute window, eligible rows, the
//     first chunk of config.Default's evidenceBatchLimit rows, as synthesis reads a
//     window chunk (design §12.1);
//   - list_page: ListEvidence after a cursor at a random row, eqPageSize rows, as the
//     API pages a workspace's evidence (design §9's hot query and index);
//   - by_keys: EvidenceByKeys for eqKeys consecutive messages of a chat, as
//     reconciliation compares a page's messages with the stored versions.
//
// Design §9's workspace-wide (workspace, source, source_type, occurred_at) range is
// served by ListEvidence alone; the store has no other query over it.
//
// It also logs the table's and indexes' sizes and, through auto_explain, the plan
// (EXPLAIN ANALYZE, BUFFERS) of each query as the store runs it, and fails if a query
// does not use its index. Run it as
//
//	go test -run '^$' -bench EvidenceQuery -benchtime 1x ./internal/store/
func BenchmarkEvidenceQuery(b *testing.B) {
	ctx := b.Context()
	def := config.Default().Services.Workspace.Timeline.Lark
	window, chunk := def.SynthesisWindow, def.EvidenceBatchLimit
	rows := eqRowCount(b)
	dsn := testenv.PostgresDSN(b)
	pool, err := OpenPool(ctx, PoolConfig{DSN: dsn, MaxConns: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := Migrate(ctx, pool); err != nil {
		b.Fatalf("migrate: %v", err)
	}
	s, err := New(pool)
	if err != nil {
		b.Fatal(err)
	}

	d := newEQData(rows, def.Retention.EvidenceRetention)
	d.load(ctx, b, pool)
	eqLogSizes(ctx, b, pool)
	picks := d.picks(ctx, b, s, eqSamples)

	windowRead := func(s *Store, p eqPick) (RangeQuery, EvidencePage, error) {
		from := ids.WindowStart(p.at, window)
		q := RangeQuery{Workspace: d.chats[p.w].ws, Chat: d.chats[p.w].chat, From: from, To: from.Add(window),
			Limit: chunk, EligibleOnly: true}
		page, err := s.EvidenceInRange(ctx, q)
		return q, page, err
	}
	listPage := func(s *Store, p eqPick) (EvidencePage, error) {
		return s.ListEvidence(ctx, d.chats[p.w].ws, LarkMessageEvidence, &Cursor{OccurredAt: p.at, ID: p.id}, eqPageSize)
	}
	// keysOf names the eqKeys consecutive messages of p's chat from p on (fewer at the
	// chat's end).
	keysOf := func(p eqPick) []string {
		first := max(0, min(p.m, len(d.chats[p.w].offsets)-eqKeys))
		last := min(first+eqKeys, len(d.chats[p.w].offsets))
		keys := make([]string, 0, last-first)
		for m := first; m < last; m++ {
			keys = append(keys, d.row(p.w, m).SourceKey)
		}
		return keys
	}
	byKeys := func(s *Store, p eqPick, keys []string) ([]Evidence, error) {
		return s.EvidenceByKeys(ctx, d.chats[p.w].ws, LarkMessageEvidence, keys)
	}

	// The plans are of a pick in its chat's busy first hours with a full page after it.
	pp := picks[0]
	for _, p := range picks {
		if p.m+eqPageSize < len(d.chats[p.w].offsets)/2 {
			pp = p
			break
		}
	}
	eqLogPlans(ctx, b, dsn, []eqPlan{
		{"window_read (EvidenceInRange)", "workspace_timeline_evidence_chat_time_idx", func(s *Store) error {
			_, _, err := windowRead(s, pp)
			return err
		}},
		{"list_page (ListEvidence)", "workspace_timeline_evidence_time_idx", func(s *Store) error {
			_, err := listPage(s, pp)
			return err
		}},
		{"by_keys (EvidenceByKeys)", "workspace_timeline_evidence_source_key_uq", func(s *Store) error {
			_, err := byKeys(s, pp, keysOf(pp))
			return err
		}},
	})

	// One benchmark, not three sub-benchmarks: a parent benchmark's log is printed only
	// under -v, and the load, the sizes and the plans above are half of the result.
	var readLat, pageLat, keysLat eqLatencies
	windowRows := 0
	for b.Loop() {
		for _, p := range picks {
			began := time.Now()
			q, page, err := windowRead(s, p)
			readLat = append(readLat, time.Since(began))
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Items) > chunk || (page.Next != nil && len(page.Items) != chunk) {
				b.Fatalf("window %s of %s: %d rows, next %v (chunk %d)", q.From, q.Chat, len(page.Items), page.Next, chunk)
			}
			if e := d.row(p.w, p.m); e.SynthesisEligible && !e.Deleted && len(page.Items) == 0 {
				b.Fatalf("window %s of %s: no rows, but it holds eligible %s", q.From, q.Chat, e.SourceKey)
			}
			for i := range page.Items {
				e := &page.Items[i]
				if e.ChatID != q.Chat || e.OccurredAt.Before(q.From) || !e.OccurredAt.Before(q.To) || !e.SynthesisEligible || e.Deleted {
					b.Fatalf("window %s of %s returned %s at %s (eligible %v, deleted %v)",
						q.From, q.Chat, e.SourceKey, e.OccurredAt, e.SynthesisEligible, e.Deleted)
				}
			}
			windowRows += len(page.Items)
		}

		for _, p := range picks {
			began := time.Now()
			page, err := listPage(s, p)
			pageLat = append(pageLat, time.Since(began))
			if err != nil {
				b.Fatal(err)
			}
			// Load order breaks occurred_at ties by message, so the page is the messages
			// after p of p's workspace.
			rest := len(d.chats[p.w].offsets) - 1 - p.m
			if len(page.Items) != min(rest, eqPageSize) || (page.Next != nil) != (rest > eqPageSize) {
				b.Fatalf("page after %s of %s: %d rows, next %v; want %d of %d remaining",
					d.sourceKey(p.w, p.m), d.chats[p.w].ws, len(page.Items), page.Next, min(rest, eqPageSize), rest)
			}
			for i := range page.Items {
				if want := d.sourceKey(p.w, p.m+1+i); page.Items[i].SourceKey != want {
					b.Fatalf("page after %s: row %d is %s, want %s", d.sourceKey(p.w, p.m), i, page.Items[i].SourceKey, want)
				}
			}
		}

		for _, p := range picks {
			keys := keysOf(p)
			began := time.Now()
			stored, err := byKeys(s, p, keys)
			keysLat = append(keysLat, time.Since(began))
			if err != nil {
				b.Fatal(err)
			}
			if len(stored) != len(keys) {
				b.Fatalf("%d keys of %s: %d stored", len(keys), d.chats[p.w].ws, len(stored))
			}
		}
	}
	readLat.report(b, "window_read")
	b.ReportMetric(float64(windowRows)/float64(max(len(readLat), 1)), "window_read_rows")
	pageLat.report(b, "list_page")
	keysLat.report(b, "by_keys")
}

func eqLogSizes(ctx context.Context, b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	var rows, heap, toast, idx, total int64
	err := pool.QueryRow(ctx, `SELECT c.reltuples::bigint, pg_relation_size(c.oid),
			pg_total_relation_size(c.oid) - pg_relation_size(c.oid) - pg_indexes_size(c.oid),
			pg_indexes_size(c.oid), pg_total_relation_size(c.oid)
		FROM pg_class c WHERE c.oid = 'workspace_timeline_evidence'::regclass`).Scan(&rows, &heap, &toast, &idx, &total)
	if err != nil {
		b.Fatalf("table size: %v", err)
	}
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
	ir, err := pool.Query(ctx, `SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
		FROM pg_index i WHERE i.indrelid = 'workspace_timeline_evidence'::regclass ORDER BY 1`)
	if err != nil {
		b.Fatalf("index sizes: %v", err)
	}
	var each []string
	for ir.Next() {
		var (
			name string
			size int64
		)
		if err := ir.Scan(&name, &size); err != nil {
			b.Fatalf("index sizes: %v", err)
		}
		each = append(each, strings.TrimPrefix(name, "workspace_timeline_evidence_")+" "+mb(size))
	}
	if err := ir.Err(); err != nil {
		b.Fatalf("index sizes: %v", err)
	}
	b.Logf("workspace_timeline_evidence: ~%d rows; pg_total_relation_size %s = heap %s + toast %s + indexes %s (%s); %d bytes/row",
		rows, mb(total), mb(heap), mb(toast), mb(idx), strings.Join(each, ", "), total/max(rows, 1))
}

// eqPlan is one store call whose plan is captured, and the index it must use.
type eqPlan struct {
	name, index string
	run         func(*Store) error
}

// eqLogPlans runs each call eqPlanRuns times on a one-connection store whose session
// has auto_explain log every statement with ANALYZE and BUFFERS to the client, and logs
// the last plan: the plan of the statement exactly as the store sends it.
func eqLogPlans(ctx context.Context, b *testing.B, dsn string, plans []eqPlan) {
	b.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu      sync.Mutex
		notices []string
	)
	pc.MaxConns = 1
	pc.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain';
			SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;
			SET auto_explain.log_buffers = on; SET auto_explain.log_format = text;
			SET client_min_messages = log`)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	s, err := New(pool)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range plans {
		for range eqPlanRuns {
			mu.Lock()
			notices = notices[:0]
			mu.Unlock()
			if err := p.run(s); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
		}
		mu.Lock()
		plan := ""
		for _, n := range notices {
			if strings.Contains(n, "workspace_timeline_evidence") {
				plan = eqPlanText(n)
			}
		}
		mu.Unlock()
		b.Logf("plan of %s, execution %d on one connection: %s", p.name, eqPlanRuns, plan)
		if !strings.Contains(plan, p.index) {
			b.Errorf("%s does not use %s", p.name, p.index)
		}
	}
}

// eqPlanText condenses auto_explain's notice to one line: the duration and the plan
// without the query text and the cost estimates. (testing keeps only the first 10
// lines of a benchmark's log.)
func eqPlanText(notice string) string {
	lines := strings.Split(notice, "\n")
	out := []string{strings.TrimSpace(strings.TrimSuffix(lines[0], "plan:"))}
	inPlan := false
	for _, l := range lines[1:] {
		inPlan = inPlan || strings.Contains(l, "(cost=")
		if l = strings.TrimSpace(eqCost.ReplaceAllString(l, "")); inPlan && l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

var eqCost = regexp.MustCompile(`\s*\(cost=[^)]*\)`)
