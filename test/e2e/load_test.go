package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// The load benchmarks of issue #9 run the whole pipeline (five processes, real broker
// and Postgres) once per benchmark, whatever b.N is, and report their figures with
// b.ReportMetric; `make bench` runs them with -benchtime 1x. They are not timed tests:
// nothing fails for being slow, only for losing or doubling something.

var loadPhrases = []string{
	"Impact: checkout error rate at %d%% for EU users",
	"Mitigation: rolled back payments-api to build %d",
	"Finding: connection pool exhausted on db-%d after the config change",
	"Decision: freeze all deploys until recovery, ticket %d",
	"Recovered: error rate back to 0.%d%% and holding",
	"looking into it (%d)",
	"ack %d",
	"Next step: add an alert on pool saturation, owner team %d",
}

// loadScenario builds chats × perChat messages, each chat bound to its own firing
// incident workspace; messages of a chat are spread evenly over spread from start.
func loadScenario(tb testing.TB, chats, perChat int, start time.Time, spread time.Duration) *larktest.Scenario {
	tb.Helper()
	sc, err := larktest.NewScenario(larktest.App{AppID: "cli_loadbench0001", BotOpenID: "ou_" + hexOf("bot")})
	if err != nil {
		tb.Fatal(err)
	}
	var users []string
	for u := range 20 {
		id := "ou_" + hexOf(fmt.Sprint("user", u))
		users = append(users, id)
		if err := sc.AddUser(larktest.User{OpenID: id, Name: fmt.Sprintf("Responder %d", u)}); err != nil {
			tb.Fatal(err)
		}
	}
	// The harness writes a human entry and summary into the first workspace; give it
	// one of its own so that every load workspace gets its AI summary.
	if err := sc.AddWorkspace(larktest.Workspace{ID: "ws-load-human", Type: "incident", Status: "firing", CreatedAt: start.Add(-time.Hour)}); err != nil {
		tb.Fatal(err)
	}
	for c := range chats {
		ws := ids.WorkspaceID(fmt.Sprintf("ws-load-%04d", c))
		if err := sc.AddWorkspace(larktest.Workspace{ID: ws, Type: "incident", Status: "firing", CreatedAt: start.Add(-time.Hour)}); err != nil {
			tb.Fatal(err)
		}
		if err := sc.AddBinding(ws, loadChat(c)); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range perChat {
		for c := range chats {
			at := start.Add(time.Duration(i) * spread / time.Duration(perChat)).Add(time.Duration(c) * time.Millisecond)
			if err := sc.AddEvent(larktest.DeliverOnce, loadMessage(c, i, users[(c+i)%len(users)], at)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return sc
}

func loadChat(c int) ids.ChatID { return ids.ChatID("oc_" + hexOf(fmt.Sprint("chat", c))) }

func loadMessageID(c, i int) ids.MessageID {
	return ids.MessageID("om_" + hexOf(fmt.Sprint("msg", c, "/", i)))
}

func loadMessage(c, i int, author string, at time.Time) larktest.Envelope {
	return larktest.Builder{}.Text(larktest.Msg{
		ID: loadMessageID(c, i), Chat: loadChat(c), From: larktest.Author{OpenID: author}, At: at,
	}, fmt.Sprintf(loadPhrases[(c+i)%len(loadPhrases)], 2+i%90))
}

func hexOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// postAll posts events from workers concurrent senders (each retried up to 10 times)
// and returns when each message was acknowledged, by message id.
func (p *pipeline) postAll(ctx context.Context, tb testing.TB, events []larktest.Event, workers int) map[ids.MessageID]time.Time {
	pushes := make([]push, len(events))
	for i, e := range events {
		pushes[i] = push{e.MessageID, p.stamped(e.Body, e.EventID)}
	}
	acked := make(map[ids.MessageID]time.Time, len(events))
	failed := 0
	for i, r := range p.pushAll(ctx, pushes, workers, 10) {
		if r.err != nil {
			failed++
			continue
		}
		acked[pushes[i].id] = r.at
	}
	if failed > 0 {
		tb.Fatalf("%d events never acknowledged", failed)
	}
	return acked
}

// latencies is, for every message an AI entry cites, the time from its webhook
// acknowledgement to the entry's creation.
func (p *pipeline) latencies(ctx context.Context, tb testing.TB, acked map[ids.MessageID]time.Time) []time.Duration {
	rows, err := p.pool.Query(ctx, `SELECT created_at, ai_metadata->'evidence' FROM workspace_timeline_entries WHERE source = 'ai'`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var at time.Time
		var raw []byte
		if err := rows.Scan(&at, &raw); err != nil {
			tb.Fatal(err)
		}
		var ev []struct {
			MessageID ids.MessageID `json:"message_id"`
		}
		_ = json.Unmarshal(raw, &ev)
		for _, e := range ev {
			if a, ok := acked[e.MessageID]; ok {
				out = append(out, at.Sub(a))
			}
		}
	}
	slices.Sort(out)
	return out
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// loadGrace is the close grace of the sustained run: testGrace, or LARKLINE_LOAD_GRACE
// (a production grace is 2–5 minutes; the e2e default is 5 s). It returns the extra
// environment that sets it.
func loadGrace(b *testing.B) (time.Duration, []string) {
	v := os.Getenv("LARKLINE_LOAD_GRACE")
	if v == "" {
		return testGrace, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("LARKLINE_LOAD_GRACE: %v", err)
	}
	return d, []string{"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOWCLOSEGRACE=" + d.String()}
}

// windowKey names one window of one chat.
type windowKey struct {
	chat  ids.ChatID
	start time.Time
}

// dueLatencies is, for every window with an AI entry, the time from the moment the
// window could first close to its first AI entry: the later of its end + grace and
// the webhook acknowledgement of the last message written into it (written[id] is the
// message's chat and creation time). A window of the past (the burst) is due once its
// last message arrived; a live one at its end + grace.
func (p *pipeline) dueLatencies(ctx context.Context, tb testing.TB, grace time.Duration, acked map[ids.MessageID]time.Time,
	written map[ids.MessageID]windowKey) []time.Duration {
	lastAck := map[windowKey]time.Time{}
	for id, at := range acked {
		w, ok := written[id]
		if !ok {
			continue
		}
		k := windowKey{w.chat, w.start.Truncate(p.window).UTC()}
		if at.After(lastAck[k]) {
			lastAck[k] = at
		}
	}
	rows, err := p.pool.Query(ctx, `SELECT ai_metadata->>'chat_id', (ai_metadata->>'window_start')::timestamptz,
		(ai_metadata->>'window_end')::timestamptz, min(created_at)
		FROM workspace_timeline_entries WHERE source = 'ai' AND ai_metadata ? 'window_start' GROUP BY 1, 2, 3`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var chat string
		var start, end, first time.Time
		if err := rows.Scan(&chat, &start, &end, &first); err != nil {
			tb.Fatal(err)
		}
		due := end.Add(grace)
		if a := lastAck[windowKey{ids.ChatID(chat), start.UTC()}]; a.After(due) {
			due = a
		}
		out = append(out, first.Sub(due))
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// windowFigures reports per-window bounds: chunks (model calls) and summary attempts.
func (p *pipeline) windowFigures(ctx context.Context, tb testing.TB) (windows, completed, summaries int, chunksPerWindow, rowsPerChatMax float64) {
	if err := p.pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE status = 'completed'),
		       count(*) FILTER (WHERE (metadata_json->>'summary_attempted')::boolean),
		       coalesce(avg((metadata_json->>'chunk_count')::numeric), 0)::float8,
		       coalesce((SELECT max(n) FROM (SELECT count(*) AS n FROM workspace_timeline_sync_states
		                 WHERE source_type = 'lark_timeline_window' GROUP BY workspace_id, split_part(source_key, '/', 2)) x), 0)::float8
		FROM workspace_timeline_sync_states WHERE source_type = 'lark_timeline_window'`).Scan(&windows, &completed, &summaries, &chunksPerWindow, &rowsPerChatMax); err != nil {
		tb.Fatal(err)
	}
	return
}

// BenchmarkLoadBurst10kOneChat posts 10,000 messages written within one minute into
// one chat, as fast as 8 concurrent Lark pushes allow, with an OpenAI-compatible model
// answering in 20 ms.
func BenchmarkLoadBurst10kOneChat(b *testing.B) {
	const n = 10000
	start := time.Now().Add(-time.Hour).Truncate(10 * time.Minute).Add(2 * time.Minute)
	sc := loadScenario(b, 1, n, start, time.Minute)
	model := newFakeModel(b)
	model.setDelay(20 * time.Millisecond)
	p := newPipeline(b, pipelineOptions{Scenario: sc, ModelURL: model.url(), Env: []string{
		"LARKLINE_LARK__API__REQUESTSPERSECOND=50", "LARKLINE_LARK__API__BURST=50",
		"LARKLINE_LOG__LEVEL=info",
	}})
	ctx := p.ctx
	written := map[ids.MessageID]windowKey{}
	for _, m := range p.sc.Messages() {
		written[m.ID] = windowKey{m.ChatID, m.CreateTime}
	}
	b.ResetTimer()
	t0 := time.Now()
	calls0 := p.lark.Calls(larktest.PathListMessages)
	acked := p.postAll(ctx, b, p.sc.Events(), 8)
	tAcked := time.Since(t0)
	p.waitEvidence(ctx, n)
	tEvidence := time.Since(t0)
	g := p.waitDone(ctx, 15*time.Minute)
	tDone := time.Since(t0)
	calls := p.lark.Calls(larktest.PathListMessages) - calls0
	b.StopTimer()
	if err := p.checkInvariants(ctx); err != nil {
		b.Fatal(err)
	}
	lat := p.latencies(ctx, b, acked)
	due := p.dueLatencies(ctx, b, testGrace, acked, written)
	windows, completed, summaries, chunks, _ := p.windowFigures(ctx, b)
	b.ReportMetric(float64(n)/tAcked.Seconds(), "acked_events/s")
	b.ReportMetric(float64(n)/tEvidence.Seconds(), "evidence_rows/s")
	b.ReportMetric(tDone.Seconds(), "s_to_all_windows_terminal")
	b.ReportMetric(quantile(lat, 0.5).Seconds(), "event_to_draft_p50_s")
	b.ReportMetric(quantile(lat, 0.99).Seconds(), "event_to_draft_p99_s")
	b.ReportMetric(quantile(due, 0.5).Seconds(), "due_to_draft_p50_s")
	b.ReportMetric(quantile(due, 0.99).Seconds(), "due_to_draft_p99_s")
	// The history calls that bring the burst in (one chat; a rate over a run this
	// short says nothing).
	b.ReportMetric(float64(calls), "history_calls")
	b.ReportMetric(chunks, "model_calls/window")
	b.ReportMetric(float64(summaries)/float64(max(completed, 1)), "summary_attempts/completed_window")
	b.Logf("burst: %d messages acked in %s, in evidence after %s, %d windows terminal after %s (%s); %d model calls (%d summary), %d entries, %d latencies, %d windows with a draft, %d history calls",
		n, tAcked.Round(time.Millisecond), tEvidence.Round(time.Millisecond), windows, tDone.Round(time.Millisecond), g, model.calls(), model.summaries(), g.entries, len(lat), len(due), calls)
}

// BenchmarkLoadSustained1000Chats posts live traffic, 200 messages a second for two
// minutes, round-robin over 1,000 chats each bound to its own incident, with
// one-minute windows so that windows close during the run (the event-to-draft
// latency then includes the wait for the window's end and grace).
func BenchmarkLoadSustained1000Chats(b *testing.B) {
	const (
		chats    = 1000
		rate     = 200
		duration = 2 * time.Minute
	)
	sc := loadScenario(b, chats, 0, time.Now(), time.Minute)
	grace, graceEnv := loadGrace(b)
	p := newPipeline(b, pipelineOptions{Scenario: sc, Live: true, Window: time.Minute, Env: append([]string{
		"LARKLINE_LARK__API__REQUESTSPERSECOND=50", "LARKLINE_LARK__API__BURST=50", "LARKLINE_LARK__API__MAXCONCURRENTCHATS=16",
		"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__RECONCILEINTERVAL=30s",
		"LARKLINE_LOG__LEVEL=info",
	}, graceEnv...)})
	ctx := p.ctx
	users := p.sc.Users()
	written := map[ids.MessageID]windowKey{}
	b.ResetTimer()
	t0 := time.Now()
	calls0 := p.lark.Calls(larktest.PathListMessages)
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	s := p.sender(longRetries)
	acked := map[ids.MessageID]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	sent := 0
	for time.Since(t0) < duration {
		<-tick.C
		c, i := sent%chats, sent/chats
		now := time.Now()
		env := loadMessage(c, i, users[(c+i)%len(users)].OpenID, now)
		written[loadMessageID(c, i)] = windowKey{loadChat(c), now}
		body, err := env.JSON()
		if err != nil {
			b.Fatal(err)
		}
		if err := p.lark.AddEvent(larktest.DeliverOnce, env); err != nil { // history shows it too
			b.Fatal(err)
		}
		if err := p.sc.AddEvent(larktest.DeliverOnce, env); err != nil {
			b.Fatal(err)
		}
		sent++
		sem <- struct{}{}
		wg.Add(1)
		go func(id ids.MessageID, body []byte) {
			defer wg.Done()
			defer func() { <-sem }()
			if r := p.pushOne(ctx, s, p.stamped(body, "live-"+string(id)), 10); r.err == nil {
				mu.Lock()
				acked[id] = r.at
				mu.Unlock()
			}
		}(loadMessageID(c, i), body)
	}
	wg.Wait()
	tSent := time.Since(t0)
	callsSent := p.lark.Calls(larktest.PathListMessages) - calls0
	if len(acked) != sent {
		b.Fatalf("%d of %d events acknowledged", len(acked), sent)
	}
	g := p.waitDone(ctx, 10*time.Minute)
	tDone := time.Since(t0)
	calls := p.lark.Calls(larktest.PathListMessages) - calls0
	b.StopTimer()
	if err := p.checkInvariants(ctx); err != nil {
		b.Fatal(err)
	}
	lat := p.latencies(ctx, b, acked)
	due := p.dueLatencies(ctx, b, grace, acked, written)
	windows, _, _, _, rowsMax := p.windowFigures(ctx, b)
	b.ReportMetric(float64(sent)/tSent.Seconds(), "events/s")
	b.ReportMetric(quantile(lat, 0.5).Seconds(), "event_to_draft_p50_s")
	b.ReportMetric(quantile(lat, 0.99).Seconds(), "event_to_draft_p99_s")
	b.ReportMetric(quantile(due, 0.5).Seconds(), "due_to_draft_p50_s")
	b.ReportMetric(quantile(due, 0.99).Seconds(), "due_to_draft_p99_s")
	// The steady rate while traffic flows (the fixed two minutes), and every call
	// until the last window is terminal.
	b.ReportMetric(float64(callsSent)/chats/tSent.Hours(), "history_calls/chat/h")
	b.ReportMetric(float64(calls)/chats, "history_calls/chat")
	b.ReportMetric(float64(windows)/chats, "state_rows/chat")
	b.ReportMetric(rowsMax, "state_rows_max/chat")
	b.Logf("sustained: %d messages over %s into %d chats (grace %s); all %d windows terminal %s after the first (%s); %d latencies, %d windows with a draft, %d history calls (%d while sending)",
		sent, tSent.Round(time.Millisecond), chats, grace, windows, (tDone - tSent).Round(time.Millisecond), g, len(lat), len(due), calls, callsSent)
}

// BenchmarkLoadModelOutageBacklog closes ~600 windows (200 chats, 3 windows each)
// while the model is down, keeps it down for LARKLINE_LOAD_OUTAGE (default 2m), then
// brings it back and measures how the backlog drains.
func BenchmarkLoadModelOutageBacklog(b *testing.B) {
	outage := 2 * time.Minute
	if v := os.Getenv("LARKLINE_LOAD_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("LARKLINE_LOAD_OUTAGE: %v", err)
		}
		outage = d
	}
	const chats, perChat = 200, 15
	start := time.Now().Add(-2 * time.Hour).Truncate(10 * time.Minute)
	sc := loadScenario(b, chats, perChat, start, 30*time.Minute)
	model := newFakeModel(b)
	model.setDown(true)
	model.setDelay(20 * time.Millisecond)
	p := newPipeline(b, pipelineOptions{Scenario: sc, ModelURL: model.url(), Env: []string{
		"LARKLINE_LARK__API__REQUESTSPERSECOND=50", "LARKLINE_LARK__API__BURST=50", "LARKLINE_LARK__API__MAXCONCURRENTCHATS=16",
		"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__RECONCILEINTERVAL=30s",
		"LARKLINE_SYNTHESIS__OPENAI__TIMEOUT=2s", "LARKLINE_SYNTHESIS__OPENAI__MAXRETRIES=0",
		"LARKLINE_LOG__LEVEL=info",
	}})
	ctx := p.ctx
	p.postAll(ctx, b, p.sc.Events(), 8)
	p.waitEvidence(ctx, chats*perChat)
	p.waitCaughtUp(ctx, p.group("windows-"+p.version), p.topic("evidence"), 5*time.Minute)
	time.Sleep(outage) // the outage the load test measures: how long the windows role stays down
	backlog := len(p.closedWindows(ctx))
	duringOutage := model.calls()
	b.ResetTimer()
	t0 := time.Now()
	model.setDown(false)
	g := p.waitDone(ctx, 15*time.Minute)
	drain := time.Since(t0)
	b.StopTimer()
	if err := p.checkInvariants(ctx); err != nil {
		b.Fatal(err)
	}
	windows, completed, summaries, _, _ := p.windowFigures(ctx, b)
	var maxAttempts, refunded int
	if err := p.pool.QueryRow(ctx, `SELECT coalesce(max(attempts), 0), coalesce(sum((metadata_json->>'refunded_attempts')::int), 0)
		FROM workspace_timeline_sync_states WHERE source_type = 'lark_timeline_window'`).Scan(&maxAttempts, &refunded); err != nil {
		b.Fatal(err)
	}
	after := model.calls() - duringOutage
	b.ReportMetric(float64(backlog), "backlog_windows")
	b.ReportMetric(float64(duringOutage), "model_calls_during_outage")
	b.ReportMetric(drain.Seconds(), "s_to_drain")
	b.ReportMetric(float64(windows)/drain.Seconds(), "windows/s_draining")
	b.ReportMetric(float64(after)/float64(windows), "model_calls/window")
	b.ReportMetric(float64(summaries)/float64(max(completed, 1)), "summary_attempts/completed_window")
	b.ReportMetric(float64(maxAttempts), "max_attempts")
	b.Logf("outage %s: %d closed windows waited, %d model calls refused meanwhile; drained %d windows in %s (%s); %d model calls after, %d refunded attempts, max attempts %d",
		outage, backlog, duringOutage, windows, drain.Round(time.Millisecond), g, after, refunded, maxAttempts)
}
