package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// longRetries is a redelivery schedule that outlasts a broker restart (≈ 2.5 min).
var longRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
	15 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}

// deliverAsync plays the scenario's events in the background.
func (p *pipeline) deliverAsync(ctx context.Context) <-chan deliveryResult {
	out := make(chan deliveryResult, 1)
	go func() {
		rep, err := p.lark.Deliver(ctx, p.webhookURL())
		out <- deliveryResult{rep, err}
	}()
	return out
}

type deliveryResult struct {
	rep larktest.Report
	err error
}

// push is one webhook POST: an envelope already stamped for this deployment.
type push struct {
	id   ids.MessageID
	body []byte
}

// pushed is what became of a push: when the webhook acknowledged it (zero if never)
// and its last error.
type pushed struct {
	at  time.Time
	err error
}

// pushOne posts body up to tries times, backing off 200 ms more after each refusal.
func (p *pipeline) pushOne(ctx context.Context, s *larktest.Sender, body []byte, tries int) pushed {
	var err error
	for try := range tries {
		if err = s.Send(ctx, p.webhookURL(), body); err == nil {
			return pushed{at: time.Now()}
		}
		if try+1 < tries {
			time.Sleep(time.Duration(try+1) * 200 * time.Millisecond) // backoff between a sender's retries, as Lark redelivers; no assertion on time
		}
	}
	return pushed{err: err}
}

// pushAll posts every push from workers concurrent senders (pushOne each) and returns
// the outcomes in the pushes' order.
func (p *pipeline) pushAll(ctx context.Context, pushes []push, workers, tries int) []pushed {
	s := p.sender(nil)
	out := make([]pushed, len(pushes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = p.pushOne(ctx, s, pushes[i].body, tries)
			}
		}()
	}
	for i := range pushes {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// expectDelivered fails the test unless every event got HTTP 200 in the end.
func (p *pipeline) expectDelivered(r deliveryResult) larktest.Report {
	p.t.Helper()
	if r.err != nil {
		p.t.Fatalf("delivering the scenario: %v", r.err)
	}
	if u := r.rep.Undelivered(); len(u) > 0 {
		p.t.Fatalf("%d events never acknowledged (first %s, attempts %+v)", len(u), u[0].EventID, u[0].Attempts)
	}
	return r.rep
}

// failedPosts counts POSTs answered with anything but 200.
func failedPosts(rep larktest.Report) int {
	n := 0
	for _, d := range rep.Deliveries {
		for _, a := range d.Attempts {
			if a.Status != 200 {
				n++
			}
		}
	}
	return n
}

func (p *pipeline) evidenceCount(ctx context.Context) int {
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM workspace_timeline_evidence`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// waitEvidence waits until at least n evidence rows exist.
func (p *pipeline) waitEvidence(ctx context.Context, n int) {
	p.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for p.evidenceCount(ctx) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("fewer than %d evidence rows after 2 min (%d)", n, p.evidenceCount(ctx))
		}
		time.Sleep(100 * time.Millisecond) // poll interval of a wait on a condition with a deadline
	}
}

// finish waits for the pipeline to be done, then checks every invariant and scans
// every process's log for message text.
func (p *pipeline) finish(deadline time.Duration) progress {
	p.t.Helper()
	g := p.waitDone(p.ctx, deadline)
	if err := p.checkInvariants(p.ctx); err != nil {
		p.t.Fatal(err)
	}
	p.assertLogsClean(p.t) // faults make processes log errors and exit: none may carry text
	p.t.Logf("done without a person: %s; supervisor restarts %v", g, p.restarts())
	return g
}

// TestFaultBrokerRestartWhileProducing stops the (private) broker while the webhook is
// producing evidence and starts it again with its data: the webhook answers 503 while
// Kafka is away, Lark redelivers, and nothing is lost or doubled.
func TestFaultBrokerRestartWhileProducing(t *testing.T) {
	t.Parallel()
	b := startJVMBroker(t)
	p := newPipeline(t, pipelineOptions{Brokers: []string{b.addr()}, RetrySchedule: longRetries})
	ctx := p.ctx
	events := p.sc.Events()
	third := len(events) / 3
	s := p.sender(longRetries)
	if rep, err := s.Deliver(ctx, p.webhookURL(), events[:third]); err != nil || len(rep.Undelivered()) > 0 {
		t.Fatalf("first third: %v", err)
	}
	accepted := func() float64 {
		n, err := p.procs[procEdge].metric(ctx, "larkline_lark_events_total", `outcome="accepted"`)
		if err != nil {
			return -1
		}
		return n
	}
	first := accepted()
	rest := make(chan deliveryResult, 1)
	go func() {
		rep, err := s.Deliver(ctx, p.webhookURL(), events[third:])
		rest <- deliveryResult{rep, err}
	}()
	// stop the broker once the webhook is producing the rest: it accepted one of them
	if err := waitFor(ctx, time.Minute, func() bool { return accepted() > first },
		func() string { return "the webhook accepted none of the rest of the events" }); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopping the broker with %d evidence rows written", p.evidenceCount(ctx))
	b.stop()
	time.Sleep(3 * time.Second) // the fault: the broker stays down while the webhook keeps being called
	b.start()
	t.Logf("broker back")
	rep := p.expectDelivered(<-rest)
	if failedPosts(rep) == 0 {
		t.Fatalf("no webhook POST failed while the broker was down: the fault did not hit producing")
	}
	t.Logf("%d webhook POSTs were refused while the broker was away and redelivered", failedPosts(rep))
	p.finish(4 * time.Minute)
}

// TestFaultPostgresDownWhileSinkAndSynthesisRun cuts the database (every connection
// reset, new ones refused) for 15 s while evidence is being written and windows
// synthesized, then brings it back.
func TestFaultPostgresDownWhileSinkAndSynthesisRun(t *testing.T) {
	t.Parallel()
	direct := testenv.PostgresDSN(t)
	px, proxied := proxyDatabase(t, direct)
	p := newPipeline(t, pipelineOptions{DSN: direct, ProcessDSN: proxied})
	ctx := p.ctx
	done := p.deliverAsync(ctx)
	p.waitEvidence(ctx, 100)
	t.Logf("database down with %d evidence rows written", p.evidenceCount(ctx))
	px.setDown(true)
	// down for 15 s, and until a process has been refused: the fault must hit something
	downAt := time.Now()
	if err := waitFor(ctx, 2*time.Minute, func() bool { return time.Since(downAt) >= 15*time.Second && px.refused.Load() > 0 },
		func() string {
			return "no process tried to reach the database during the outage: the fault hit nothing"
		}); err != nil {
		t.Fatal(err)
	}
	px.setDown(false)
	t.Logf("database back after %s; %d connection attempts were refused meanwhile", time.Since(downAt).Truncate(time.Second), px.refused.Load())
	p.expectDelivered(<-done)
	p.finish(4 * time.Minute)
}

// TestFaultWindowProcessorKilledMidWindow kills the window processor (SIGKILL) while
// its windows hold part of their evidence, delivers the rest while it is down, then
// starts it again: every window closes once, with all of its evidence, and no window
// is emitted twice with different content. Reconciliation is held back so that no
// window can close before the kill (coverage gating).
func TestFaultWindowProcessorKilledMidWindow(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, pipelineOptions{Hold: []string{procReconcile}})
	ctx := p.ctx
	events := p.sc.Events()
	half := len(events) / 2
	s := p.sender(longRetries)
	rep, err := s.Deliver(ctx, p.webhookURL(), events[:half])
	if err != nil || len(rep.Undelivered()) > 0 {
		t.Fatalf("first half: %v (%d undelivered)", err, len(rep.Undelivered()))
	}
	p.waitCaughtUp(ctx, p.group("windows-"+p.version), p.topic("evidence"), 2*time.Minute)
	if n := len(p.closedWindows(ctx)); n != 0 {
		t.Fatalf("%d windows closed before coverage: the test cannot kill mid-window", n)
	}
	p.procs[procWindows].Kill()
	rep, err = s.Deliver(ctx, p.webhookURL(), events[half:])
	if err != nil || len(rep.Undelivered()) > 0 {
		t.Fatalf("second half: %v (%d undelivered)", err, len(rep.Undelivered()))
	}
	p.procs[procWindows].Start()
	p.procs[procReconcile].Start()
	p.finish(4 * time.Minute)
	p.checkClosedWindows(ctx)
}

// checkClosedWindows asserts that every window of the closed-window topic was closed
// with one content only, and names exactly the evidence the database holds for it.
func (p *pipeline) checkClosedWindows(ctx context.Context) {
	p.t.Helper()
	type wkey struct {
		ws, chat, version string
		start             time.Time
	}
	seen := map[wkey]schemas.ClosedWindow{}
	dups := 0
	for _, w := range p.closedWindows(ctx) {
		k := wkey{string(w.WorkspaceID), string(w.ChatID), w.ProcessorVersion, w.WindowStart.UTC()}
		if prev, ok := seen[k]; ok {
			dups++
			if !reflect.DeepEqual(prev, w) {
				p.t.Errorf("window %v emitted twice with different content:\n %+v\n %+v", k, prev, w)
			}
			continue
		}
		seen[k] = w
	}
	// A closed record names its evidence as an offset range: a message is in the
	// window when one of its eligible versions sits below the range's end.
	type mkey struct {
		ws, chat, msg string
	}
	firstEligible := map[mkey]evidenceRecord{}
	if len(seen) > 0 {
		for _, r := range p.evidenceRecords(ctx) {
			if !r.ev.SynthesisEligible {
				continue
			}
			k := mkey{string(r.ev.WorkspaceID), string(r.ev.ChatID), string(r.ev.MessageID)}
			if prev, ok := firstEligible[k]; !ok || r.offset < prev.offset {
				firstEligible[k] = r
			}
		}
	}
	for k, w := range seen {
		rows, err := p.pool.Query(ctx, `
			SELECT split_part(source_key, '/', 4) FROM workspace_timeline_evidence
			WHERE workspace_id = $1 AND chat_id = $2 AND occurred_at >= $3 AND occurred_at < $4 AND synthesis_eligible`,
			k.ws, k.chat, w.WindowStart, w.WindowEnd)
		if err != nil {
			p.t.Fatal(err)
		}
		stored := map[string]bool{}
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			stored[id] = true
		}
		rows.Close()
		named := map[string]bool{}
		for id := range stored {
			if r, ok := firstEligible[mkey{k.ws, k.chat, id}]; ok && r.partition == w.EvidencePartition &&
				r.offset >= w.EvidenceLowOffset && r.offset < w.EvidenceEndOffset {
				named[id] = true
			}
		}
		var missing []string
		for id := range stored {
			if !named[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			p.t.Errorf("window %s %s/%s closed without %d of its eligible messages: %v (they arrived after the close)",
				w.WindowStart.Format(time.RFC3339), k.ws, k.chat, len(missing), missing)
		}
	}
	p.t.Logf("closed windows: %d distinct, %d repeated with the same content", len(seen), dups)
}

// TestFaultSynthesisKilledWhileProcessing kills the synthesis consumer (SIGKILL) while
// a model call is in flight and lets the supervisor restart it: the dead worker's
// window is taken over when its lease goes stale, no window ends twice and no entry is
// doubled.
func TestFaultSynthesisKilledWhileProcessing(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t)
	model.setDelay(300 * time.Millisecond)
	p := newPipeline(t, pipelineOptions{ModelURL: model.url(), Env: []string{
		"LARKLINE_SYNTHESIS__OPENAI__TIMEOUT=2s", "LARKLINE_SYNTHESIS__OPENAI__MAXRETRIES=0",
		// a dead worker's window is taken over 15 s after its last heartbeat; a live
		// attempt's heartbeat (every 5 s) keeps its claim however long a chunk takes
		"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISSTALETIMEOUT=15s",
	}})
	ctx := p.ctx
	done := p.deliverAsync(ctx)
	if err := model.waitCalls(ctx, 5, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := model.waitInFlight(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("killing synthesis with a model call in flight (%d calls so far)", model.calls())
	p.procs[procSynth].Crash()
	p.expectDelivered(<-done)
	p.finish(6 * time.Minute)
	if p.procs[procSynth].Restarts() < 1 {
		t.Fatalf("synthesis was never restarted")
	}
}

// TestFaultLarkAPIErrorsDuringBackfill makes Lark's history API fail while
// reconciliation backfills (HTTP 500, gateway timeouts, rate limits with a reset, an
// internal error code) and delivers the scenario's events except the ones Lark never
// pushed: reconciliation retries within its bounds and recovers every missed message.
func TestFaultLarkAPIErrorsDuringBackfill(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, pipelineOptions{Hold: []string{procReconcile}})
	ctx := p.ctx
	faults := []struct {
		n int
		f larktest.Fault
	}{
		{2, larktest.FaultHTTP500()}, {1, larktest.FaultGatewayTimeout()}, {3, larktest.FaultRateLimit(1)},
		{1, larktest.FaultCode(99991400)}, {2, larktest.FaultHTTP500()},
	}
	injected := 0
	for _, f := range faults {
		if err := p.lark.FailNext(larktest.PathListMessages, f.n, f.f); err != nil {
			t.Fatal(err)
		}
		injected += f.n
	}
	p.procs[procReconcile].Start()
	p.expectDelivered(<-p.deliverAsync(ctx))
	p.finish(4 * time.Minute)
	calls := p.lark.Calls(larktest.PathListMessages)
	if calls <= injected {
		t.Fatalf("history list called %d times, %d faults injected: the faults were not all met", calls, injected)
	}
	dropped := 0
	for _, m := range p.sc.Messages() {
		if m.Deliver == larktest.DeliverDrop {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("the scenario has no missed events to recover")
	}
	t.Logf("%d list calls (%d failed on purpose); %d messages Lark never pushed recovered", calls, injected, dropped)
}

// TestFaultWebhookFloodWithDuplicates posts every event of the scenario four times at
// once from 16 senders (each push with a new event_id, as Lark's redeliveries may
// have), on top of the scenario's own delivery: evidence stays exactly once.
func TestFaultWebhookFloodWithDuplicates(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, pipelineOptions{})
	ctx := p.ctx
	done := p.deliverAsync(ctx)
	var pushes []push
	for copyN := range 4 {
		for _, e := range p.sc.Events() {
			if e.Deliver == larktest.DeliverDrop {
				continue
			}
			pushes = append(pushes, push{e.MessageID, p.stamped(e.Body, fmt.Sprintf("flood-%d-%s", copyN, e.EventID))})
		}
	}
	status := map[string]int{}
	for _, r := range p.pushAll(ctx, pushes, 16, 1) {
		status[fmt.Sprint(r.err)]++
	}
	t.Logf("flood: %d pushes, answers %v", len(pushes), status)
	if status["<nil>"] == 0 {
		t.Fatalf("no flood push was accepted: %v", status)
	}
	p.expectDelivered(<-done)
	p.finish(4 * time.Minute)
}

// stamped is an envelope with another header.event_id, as a redelivery by Lark may
// carry, and the app's token and app id in its header, as Lark sends them.
func (p *pipeline) stamped(body []byte, id string) []byte {
	t := p.t
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	h, ok := env["header"].(map[string]any)
	if !ok {
		t.Fatalf("event without a header")
	}
	h["event_id"], h["token"], h["app_id"] = id, p.verification, p.lark.AppID()
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFaultModelOutageBacklogDrains takes the model down before any window closes and
// keeps it down well past the whole-window retry budget (3 attempts with backoff):
// closed windows pile up behind the synthesis worker's model gate without failing and
// without hammering the endpoint, and once the model answers the backlog drains with
// no attempt spent on the outage.
func TestFaultModelOutageBacklogDrains(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t)
	model.setDown(true)
	p := newPipeline(t, pipelineOptions{ModelURL: model.url(), Env: []string{
		"LARKLINE_SYNTHESIS__OPENAI__TIMEOUT=2s", "LARKLINE_SYNTHESIS__OPENAI__MAXRETRIES=0",
	}})
	ctx := p.ctx
	p.expectDelivered(<-p.deliverAsync(ctx))
	p.waitCaughtUp(ctx, p.group("windows-"+p.version), p.topic("evidence"), 2*time.Minute)
	if err := model.waitCalls(ctx, 1, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Keep the model down past the whole-window retry budget, and until the worker has
	// shown it met the outage: windows waiting behind the gate and probes that failed
	// (the gate's open period doubles from 1 s, so four probes take at least 15 s).
	const outage = 45 * time.Second
	outageStart := time.Now()
	synthProc := p.procs[procSynth]
	metric := func(name string, labels ...string) float64 {
		v, err := synthProc.metric(ctx, name, labels...)
		if err != nil {
			return -1
		}
		return v
	}
	if err := waitFor(ctx, 3*time.Minute, func() bool {
		return time.Since(outageStart) >= outage && metric("larkline_synthesis_model_gate_waiting") >= 1 &&
			metric("larkline_synthesis_model_probes_total", `outcome="failed"`) >= 4
	}, func() string {
		return fmt.Sprintf("%s into the outage: %v windows waiting behind the model gate, %v failed probes",
			time.Since(outageStart).Truncate(time.Second), metric("larkline_synthesis_model_gate_waiting"),
			metric("larkline_synthesis_model_probes_total", `outcome="failed"`))
	}); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(outageStart)
	backlog := len(p.closedWindows(ctx))
	failedDuringOutage := model.failed.Load()
	var exhausted int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM workspace_timeline_sync_states
		WHERE source_type = 'lark_timeline_window' AND status IN ('completed', 'ignored')`).Scan(&exhausted); err != nil {
		t.Fatal(err)
	}
	t.Logf("after %s of outage: %d closed windows waiting, %d model calls refused", elapsed.Truncate(time.Second), backlog, failedDuringOutage)
	if exhausted != 0 {
		t.Fatalf("%d windows finished while the model was down", exhausted)
	}
	// Without a gate each window would make (1 + 2 chunk retries) calls per attempt
	// for 3 attempts (≥ 72 here). With it, the 2 windows in flight exhaust their chunk
	// retries (2 × 3 calls), then one probe per gate opening: the open period doubles
	// from 1 s, so at most ~7 in 45 s (one more for every doubling past it).
	if limit := int64(2*3 + 8 + max(0, int(elapsed/(45*time.Second))-1)); failedDuringOutage > limit {
		t.Fatalf("%d model calls during the outage for %d waiting windows: the endpoint was hammered", failedDuringOutage, backlog)
	}
	model.setDown(false)
	p.finish(5 * time.Minute)
	var maxAttempts, refunded int
	if err := p.pool.QueryRow(ctx, `SELECT coalesce(max(attempts), 0), coalesce(sum((metadata_json->>'refunded_attempts')::int), 0)
		FROM workspace_timeline_sync_states WHERE source_type = 'lark_timeline_window'`).Scan(&maxAttempts, &refunded); err != nil {
		t.Fatal(err)
	}
	if maxAttempts != 1 || refunded == 0 {
		t.Fatalf("after the outage: max attempts %d (want 1: the outage spends none), %d attempts refunded (want > 0)", maxAttempts, refunded)
	}
	t.Logf("backlog drained: %d model calls in all, %d refunded attempts, %d summary calls", model.calls(), refunded, model.summaries())
}
