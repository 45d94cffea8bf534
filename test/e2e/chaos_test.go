package e2e

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// The chaos run (issue #18): the whole pipeline as larkline processes, two instances
// each of the windows, sink and synthesis roles, on a private broker and a private
// PostgreSQL, with larktest as Lark and the fake model as the synthesizer; live traffic
// over several chats (webhook pushes with duplicates and drops, history, edits and
// recalls) while a fault loop driven by a printed seed kills processes and restarts
// the broker, the database, the model and Lark's history API. Then the faults stop, the
// pipeline drains, and the invariants are counted on everything it wrote.
//
// `make chaos` runs it for 10 minutes; `make test` runs the 3-minute default. The
// environment shapes a run:
//
//	LARKLINE_TEST_CHAOS_DURATION  traffic and faults (default 3m)
//	LARKLINE_TEST_CHAOS_CHATS     chats with live traffic (default 5)
//	LARKLINE_TEST_CHAOS_RATE      messages per second over all chats (default 1.5)
//	LARKLINE_TEST_CHAOS_SEED      the fault and traffic seed (default random, printed)
//	LARKLINE_TEST_CHAOS_DRAIN     how long the pipeline may take to drain (default 10m)
type chaosConfig struct {
	duration time.Duration
	chats    int
	rate     float64
	seed     uint64
	drain    time.Duration
}

func chaosConfigFromEnv(t *testing.T) chaosConfig {
	t.Helper()
	c := chaosConfig{duration: 3 * time.Minute, chats: 5, rate: 1.5, drain: 10 * time.Minute}
	dur := func(name string, d *time.Duration) {
		if v := os.Getenv(name); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x <= 0 {
				t.Fatalf("%s=%q: a positive duration, please", name, v)
			}
			*d = x
		}
	}
	dur("LARKLINE_TEST_CHAOS_DURATION", &c.duration)
	dur("LARKLINE_TEST_CHAOS_DRAIN", &c.drain)
	if v := os.Getenv("LARKLINE_TEST_CHAOS_CHATS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			t.Fatalf("LARKLINE_TEST_CHAOS_CHATS=%q: 1 to 200, please", v)
		}
		c.chats = n
	}
	if v := os.Getenv("LARKLINE_TEST_CHAOS_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 || r > 200 {
			t.Fatalf("LARKLINE_TEST_CHAOS_RATE=%q: messages per second, above 0 and at most 200", v)
		}
		c.rate = r
	}
	if v := os.Getenv("LARKLINE_TEST_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LARKLINE_TEST_CHAOS_SEED=%q: an unsigned integer, please", v)
		}
		c.seed = s
	} else {
		var b [8]byte
		_, _ = crand.Read(b[:])
		c.seed = binary.LittleEndian.Uint64(b[:]) % 1_000_000_000
	}
	return c
}

// chaosLayout runs two instances of every role that scales out (windows, sink,
// synthesis) and one of the others.
var chaosLayout = []procSpec{
	{"sink-1", []string{"workspaces", "sink"}},
	{"sink-2", []string{"workspaces", "sink"}},
	{"windows-1", []string{"windows"}},
	{"windows-2", []string{"windows"}},
	{"synthesis-1", []string{"synthesis"}},
	{"synthesis-2", []string{"synthesis"}},
	{procReconcile, []string{"reconcile"}},
	{procEdge, []string{"ingest", "api"}},
}

// Fault kinds of the chaos loop.
const (
	faultKill     = "kill a process"
	faultBroker   = "restart the broker"
	faultPostgres = "restart Postgres"
	faultModel    = "model down"
	faultHistory  = "Lark history failing"
)

var faultKinds = []string{faultKill, faultBroker, faultPostgres, faultModel, faultHistory}

// chaosWindow is the synthesis window of the run: short, so that minutes of traffic
// close many windows.
const chaosWindow = time.Minute

func TestChaos(t *testing.T) {
	t.Parallel()
	cfg := chaosConfigFromEnv(t)
	t.Logf("chaos: seed %d (LARKLINE_TEST_CHAOS_SEED=%d repeats the fault and traffic choices), %s of traffic over %d chats at %.1f msg/s",
		cfg.seed, cfg.seed, cfg.duration, cfg.chats, cfg.rate)
	faultRNG := rand.New(rand.NewPCG(cfg.seed, 1))
	traffic := newChaosTraffic(t, cfg, rand.New(rand.NewPCG(cfg.seed, 2)))

	broker := startJVMBroker(t)
	pg := startPGServer(t)
	model := newFakeModel(t)
	model.setDelay(20 * time.Millisecond)
	p := newPipeline(t, pipelineOptions{
		Scenario: traffic.scenario(), Live: true, Window: chaosWindow, Layout: chaosLayout,
		Brokers: []string{broker.addr()}, DSN: pg.dsn(), ModelURL: model.url(), RetrySchedule: longRetries,
		Timeout: cfg.duration + cfg.drain + 15*time.Minute,
		Env: []string{
			"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__EVIDENCEBATCHLIMIT=8",
			"LARKLINE_SYNTHESIS__OPENAI__TIMEOUT=3s",
		},
	})
	ctx := p.ctx
	traffic.p = p
	started := time.Now()

	// Traffic: new messages, edits and recalls go into larktest (history shows them at
	// once) and are pushed to the webhook in small batches, each batch redelivered on
	// failure for ≈ 2.5 min; several batches are in flight while the broker is away.
	stopTraffic := make(chan struct{})
	trafficDone := make(chan struct{})
	go func() { defer close(trafficDone); traffic.run(ctx, stopTraffic) }()

	faults := map[string]int{}
	var faultLog []string
	end := started.Add(cfg.duration)
	for {
		pause := time.Duration(5+faultRNG.IntN(16)) * time.Second
		if time.Now().Add(pause).After(end) {
			break
		}
		if !waitTimer(ctx, pause) {
			t.Fatalf("the run's context ended: %v", ctx.Err())
		}
		kind := faultKinds[faultRNG.IntN(len(faultKinds))]
		desc := p.chaosFault(kind, faultRNG, broker, pg, model)
		faults[kind]++
		line := fmt.Sprintf("+%s %s: %s", time.Since(started).Truncate(time.Second), kind, desc)
		faultLog = append(faultLog, line)
		t.Logf("fault %s", line)
	}
	close(stopTraffic)
	<-trafficDone
	trafficTime := time.Since(started)
	t.Logf("faults stopped after %s; traffic: %s", trafficTime.Truncate(time.Second), traffic.stats())

	// Everything Lark ever showed, for the checks.
	p.sc = p.lark.Scenario()
	drainStart := time.Now()
	rep, drained := p.chaosDrain(ctx, cfg.drain, traffic.messageNonces())
	drainTime := time.Since(drainStart)
	if !drained {
		t.Errorf("the pipeline did not drain within %s; the table below counts what was left", cfg.drain)
	}
	// A recall after the workspaces recovered (issue #29): it must still reach every
	// workspace that holds the message, and leave its text nowhere.
	late := p.recallAfterRecovery(ctx, traffic, 3)
	t.Logf("recalled %v after their workspaces recovered", late)
	after, drainedAfter := p.chaosDrain(ctx, cfg.drain, traffic.messageNonces())
	if !drainedAfter {
		t.Errorf("the recalls after recovery did not drain within %s", cfg.drain)
	}
	anywhere, err := p.recalledTextAnywhere(ctx, traffic.recalledNonces())
	if err != nil {
		t.Fatalf("looking for recalled text: %v", err)
	}
	rep.invariants = append(after.invariants, anywhere)
	rep.seed, rep.traffic, rep.drain, rep.faults, rep.faultLog = cfg.seed, trafficTime, drainTime, faults, faultLog
	rep.restarts = p.restarts()
	rep.pushes = traffic.stats()
	t.Logf("chaos report\n%s", rep.table())
	for _, inv := range rep.invariants {
		if inv.violations > 0 {
			t.Errorf("invariant %q: %d violations, e.g. %s", inv.name, inv.violations, head(inv.examples))
		}
	}
}

// waitTimer waits d unless ctx ends first (false).
func waitTimer(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// chaosFault injects one fault of kind and returns what it did. Faults that take
// something away bring it back before returning.
func (p *pipeline) chaosFault(kind string, rng *rand.Rand, broker *jvmBroker, pg *pgServer, model *fakeModel) string {
	switch kind {
	case faultKill:
		l := p.layout[rng.IntN(len(p.layout))]
		p.procs[l.name].Crash() // SIGKILL; the supervisor starts it again
		return "SIGKILL " + l.name
	case faultBroker:
		down := time.Duration(1+rng.IntN(8)) * time.Second
		broker.stop()
		waitTimer(p.ctx, down)
		broker.start()
		return fmt.Sprintf("stopped, down %s, started with its data", down)
	case faultPostgres:
		mode := []string{"immediate", "fast"}[rng.IntN(2)]
		down := time.Duration(1+rng.IntN(8)) * time.Second
		pg.restart(mode, down)
		return fmt.Sprintf("pg_ctl stop -m %s, down %s, started", mode, down)
	case faultModel:
		down := time.Duration(10+rng.IntN(36)) * time.Second
		model.setDown(true)
		waitTimer(p.ctx, down)
		model.setDown(false)
		return fmt.Sprintf("every call 503 for %s", down)
	case faultHistory:
		kinds := []struct {
			name string
			f    larktest.Fault
		}{
			{"HTTP 500", larktest.FaultHTTP500()}, {"HTTP 504", larktest.FaultGatewayTimeout()},
			{"HTTP 429 reset 1s", larktest.FaultRateLimit(1)}, {"code 99991400", larktest.FaultCode(99991400)},
		}
		k := kinds[rng.IntN(len(kinds))]
		n := 2 + rng.IntN(8)
		if err := p.lark.FailNext(larktest.PathListMessages, n, k.f); err != nil {
			p.t.Fatal(err)
		}
		return fmt.Sprintf("next %d history calls answer %s", n, k.name)
	}
	p.t.Fatalf("unknown fault %q", kind)
	return ""
}

// chaosTraffic makes the run's messages: each chat bound to its own firing incident,
// the first chat to a second one as well (the human-content workspace), text messages
// from a few responders and now and then from the app's own bot, with edits and
// recalls of recent messages. Every message carries a nonce of letters no id or hash
// contains, which the log scan looks for.
type chaosTraffic struct {
	t     *testing.T
	cfg   chaosConfig
	rng   *rand.Rand
	sc    *larktest.Scenario
	p     *pipeline
	users []string
	bot   string

	mu       sync.Mutex
	msgs     []*chaosMsg
	nonces   []string
	counts   map[string]int
	inFlight sync.WaitGroup
	given    int // events larktest gave up redelivering
}

type chaosMsg struct {
	id       ids.MessageID
	chat     ids.ChatID
	at       time.Time
	nonce    string
	rev      int
	last     time.Time
	bot      bool
	recalled bool
}

func chaosChat(c int) ids.ChatID { return ids.ChatID("oc_" + hexOf(fmt.Sprint("chaos-chat", c))) }

func newChaosTraffic(t *testing.T, cfg chaosConfig, rng *rand.Rand) *chaosTraffic {
	tr := &chaosTraffic{t: t, cfg: cfg, rng: rng, counts: map[string]int{}, bot: "ou_" + hexOf("chaos-bot")}
	sc, err := larktest.NewScenario(larktest.App{AppID: "cli_chaos0000001", BotOpenID: tr.bot})
	if err != nil {
		t.Fatal(err)
	}
	for u := range 6 {
		id := "ou_" + hexOf(fmt.Sprint("chaos-user", u))
		tr.users = append(tr.users, id)
		if err := sc.AddUser(larktest.User{OpenID: id, Name: fmt.Sprintf("Responder %d", u)}); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now().Add(-time.Hour)
	add := func(ws ids.WorkspaceID, chat ids.ChatID) {
		if err := sc.AddWorkspace(larktest.Workspace{ID: ws, Type: "incident", Status: "firing", CreatedAt: created}); err != nil {
			t.Fatal(err)
		}
		if err := sc.AddBinding(ws, chat); err != nil {
			t.Fatal(err)
		}
	}
	add("ws-chaos-human", chaosChat(0)) // first: gets the human entry and summary
	for c := range cfg.chats {
		add(ids.WorkspaceID(fmt.Sprintf("ws-chaos-%03d", c)), chaosChat(c))
	}
	tr.sc = sc
	// One message per chat before the pipeline starts (the first backfill finds them).
	for c := range cfg.chats {
		env := tr.newMessage(chaosChat(c), time.Now().Add(-30*time.Second), false)
		if err := sc.AddEvent(larktest.DeliverDrop, env); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func (tr *chaosTraffic) scenario() *larktest.Scenario { return tr.sc }

// nonceLetters are letters outside hex, so a nonce never matches an id or a hash.
const nonceLetters = "ghijklmnopqrstuvwxyz"

var chaosPhrases = []string{
	"Impact: checkout errors climbing for the EU region",
	"Mitigation: rolling back the payments release now",
	"Finding: the connection pool is exhausted on the primary",
	"Decision: freeze deploys until the error rate recovers",
	"Recovered: error rate back to baseline and holding",
	"looking into the gateway logs",
	"ack, on it",
	"Next step: add an alert on pool saturation",
}

// text is a message version's text: nonce, phrase and the revision marker the
// newest-version check reads back.
func chaosText(nonce, phrase string, rev int) string {
	return fmt.Sprintf("%s %s (r%d)", phrase, nonce, rev)
}

func chaosContent(text string) string {
	b, _ := json.Marshal(map[string]string{"text": text})
	return string(b)
}

// newMessage records a message and returns its envelope; the caller holds mu or owns tr.
func (tr *chaosTraffic) newMessage(chat ids.ChatID, at time.Time, bot bool) larktest.Envelope {
	var nb strings.Builder
	for range 10 {
		nb.WriteByte(nonceLetters[tr.rng.IntN(len(nonceLetters))])
	}
	m := &chaosMsg{id: ids.MessageID("om_" + hexOf(fmt.Sprint("chaos-msg", tr.cfg.seed, len(tr.msgs)))), chat: chat,
		at: at.Truncate(time.Millisecond), nonce: nb.String(), bot: bot}
	m.last = m.at
	tr.msgs = append(tr.msgs, m)
	tr.nonces = append(tr.nonces, m.nonce)
	from := larktest.Author{OpenID: tr.users[tr.rng.IntN(len(tr.users))]}
	if bot {
		from = larktest.Author{OpenID: tr.bot, Type: larktest.SenderTypeBot}
	}
	phrase := chaosPhrases[tr.rng.IntN(len(chaosPhrases))]
	return larktest.Builder{}.Text(larktest.Msg{ID: m.id, Chat: chat, From: from, At: m.at}, chaosText(m.nonce, phrase, 0))
}

// run makes traffic until stop, then waits for every push in flight.
func (tr *chaosTraffic) run(ctx context.Context, stop <-chan struct{}) {
	interval := time.Duration(float64(time.Second) / tr.cfg.rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	push := time.NewTicker(300 * time.Millisecond)
	defer push.Stop()
	sem := make(chan struct{}, 16)
	deliver := func() {
		select {
		case sem <- struct{}{}:
		default:
			return // 16 batches in flight: the next tick takes what is new
		}
		tr.inFlight.Add(1)
		go func() {
			defer tr.inFlight.Done()
			defer func() { <-sem }()
			rep, err := tr.p.lark.Deliver(ctx, tr.p.webhookURL())
			tr.mu.Lock()
			defer tr.mu.Unlock()
			tr.given += len(rep.Undelivered())
			if err != nil && !errors.Is(err, larktest.ErrUndelivered) && ctx.Err() == nil {
				tr.counts["delivery errors"]++
			}
		}()
	}
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-ctx.Done():
			break loop
		case <-tick.C:
			tr.step()
		case <-push.C:
			deliver()
		}
	}
	// what is left, then every batch to its end
	tr.inFlight.Add(1)
	sem <- struct{}{}
	go func() {
		defer tr.inFlight.Done()
		rep, _ := tr.p.lark.Deliver(ctx, tr.p.webhookURL())
		tr.mu.Lock()
		tr.given += len(rep.Undelivered())
		tr.mu.Unlock()
	}()
	tr.inFlight.Wait()
}

// step adds one message, and now and then an edit or a recall of a recent one.
func (tr *chaosTraffic) step() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	now := time.Now()
	lk := tr.p.lark
	chat := chaosChat(tr.rng.IntN(tr.cfg.chats))
	bot := tr.rng.IntN(20) == 0
	env := tr.newMessage(chat, now, bot)
	d := larktest.DeliverOnce
	switch r := tr.rng.IntN(100); {
	case r < 10:
		d = larktest.DeliverTwice
	case r < 17:
		d = larktest.DeliverDrop
	}
	if err := lk.AddEvent(d, env); err != nil {
		tr.t.Errorf("adding a message: %v", err)
		return
	}
	tr.counts["messages"]++
	tr.counts["pushed "+string(d)]++
	if bot {
		tr.counts["from the bot"]++
	}
	// recent: created within the last three minutes, well inside the reconcile overlap
	var recent []*chaosMsg
	for _, m := range tr.msgs {
		if !m.bot && !m.recalled && now.Sub(m.at) < 3*time.Minute && now.Sub(m.last) > 5*time.Millisecond {
			recent = append(recent, m)
		}
	}
	if len(recent) == 0 {
		return
	}
	switch r := tr.rng.IntN(100); {
	case r < 15:
		m := recent[tr.rng.IntN(len(recent))]
		m.rev++
		m.last = now.Truncate(time.Millisecond)
		phrase := chaosPhrases[tr.rng.IntN(len(chaosPhrases))]
		if err := lk.AddEdit(larktest.Edit{MessageID: m.id, UpdateTime: m.last, Content: chaosContent(chaosText(m.nonce, phrase, m.rev))}); err != nil {
			tr.t.Errorf("editing %s: %v", m.id, err)
			return
		}
		tr.counts["edits"]++
	case r < 20:
		m := recent[tr.rng.IntN(len(recent))]
		m.recalled = true
		if err := lk.AddEvent(larktest.DeliverOnce, larktest.Builder{}.Recall(m.id, m.chat, now, "")); err != nil {
			tr.t.Errorf("recalling %s: %v", m.id, err)
			return
		}
		tr.counts["recalls"]++
	}
}

func (tr *chaosTraffic) stats() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	keys := make([]string, 0, len(tr.counts))
	for k := range tr.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d, ", k, tr.counts[k])
	}
	fmt.Fprintf(&b, "pushes given up by Lark %d", tr.given)
	return b.String()
}

// messageNonces is every nonce of the run's messages.
func (tr *chaosTraffic) messageNonces() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.nonces)
}

// invariantResult is one invariant's count of violations, with a few examples.
type invariantResult struct {
	name       string
	violations int
	examples   []string
}

// chaosReport is what the run prints.
type chaosReport struct {
	seed            uint64
	traffic, drain  time.Duration
	faults          map[string]int
	faultLog        []string
	restarts        map[string]int
	pushes          string
	messages        int
	evidence        int
	windows         int
	windowsByStatus map[string]int
	entries         int
	logLines        int
	exitErrors      int
	invariants      []invariantResult
}

func (r chaosReport) pending() int {
	n := 0
	for _, inv := range r.invariants {
		if inv.name == invEvidence || inv.name == invNewest || inv.name == invRecalls || inv.name == invWindows {
			n += inv.violations
		}
	}
	return n
}

func (r chaosReport) table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "seed\t%d\n", r.seed)
	fmt.Fprintf(w, "duration\t%s of traffic and faults, %s to drain\n", r.traffic.Truncate(time.Second), r.drain.Truncate(time.Second))
	total := 0
	for _, k := range faultKinds {
		fmt.Fprintf(w, "faults: %s\t%d\n", k, r.faults[k])
		total += r.faults[k]
	}
	fmt.Fprintf(w, "faults: all\t%d\n", total)
	fmt.Fprintf(w, "supervisor restarts\t%v\n", r.restarts)
	fmt.Fprintf(w, "traffic\t%s\n", r.pushes)
	fmt.Fprintf(w, "messages\t%d (evidence rows %d)\n", r.messages, r.evidence)
	fmt.Fprintf(w, "windows\t%d non-empty, states %v\n", r.windows, r.windowsByStatus)
	fmt.Fprintf(w, "entries\t%d AI entries\n", r.entries)
	fmt.Fprintf(w, "logs\t%d lines scanned, %d exit error reports\n", r.logLines, r.exitErrors)
	fmt.Fprintf(w, "invariant\tviolations\n")
	for _, inv := range r.invariants {
		fmt.Fprintf(w, "  %s\t%d\n", inv.name, inv.violations)
	}
	_ = w.Flush()
	b.WriteString("fault log:\n")
	for _, l := range r.faultLog {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

const (
	invEvidence   = "every message is exactly one evidence row per bound workspace"
	invNewest     = "each evidence row carries its message's newest version"
	invRecalls    = "recalled messages are redacted"
	invWindows    = "every non-empty window has exactly one terminal state"
	invOrphans    = "no window state without evidence"
	invEntryDups  = "no duplicate entries (fingerprints)"
	invEntryBound = "every AI entry bound to evidence of its workspace"
	invSummaries  = "at most one summary attempt per window"
	invHuman      = "human content untouched"
	invLogs       = "no message text in any process's log"
)

// chaosDrain waits until every message is in evidence in its newest version and every
// non-empty window is terminal (or the deadline passed), then counts every invariant.
func (p *pipeline) chaosDrain(ctx context.Context, deadline time.Duration, nonces []string) (chaosReport, bool) {
	p.t.Helper()
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var last chaosReport
	var lastErr error
	lastPending := -1
	for {
		r, err := p.chaosCheck(ctx, false, nil)
		if err == nil {
			last = r
			if n := r.pending(); n != lastPending {
				p.t.Logf("%s drain: %d evidence rows, %d windows %v, %d pending", time.Now().UTC().Format("15:04:05"), r.evidence, r.windows, r.windowsByStatus, n)
				lastPending = n
			}
			if r.pending() == 0 {
				break
			}
		} else {
			lastErr = err
		}
		if !waitTimer(dctx, 2*time.Second) {
			p.t.Logf("drain deadline: last error %v; evidence lag %s", lastErr, p.evidenceLag())
			r, err := p.chaosCheck(ctx, true, nonces)
			if err != nil {
				p.t.Errorf("checking after the drain deadline: %v", err)
				return last, false
			}
			return r, false
		}
	}
	r, err := p.chaosCheck(ctx, true, nonces)
	if err != nil {
		p.t.Fatalf("checking the invariants: %v", err)
	}
	return r, true
}

// chaosCheck counts the invariants on the database (and, when full, the entries,
// summaries, human content and logs, scanned for the message text and the nonces).
func (p *pipeline) chaosCheck(ctx context.Context, full bool, nonces []string) (chaosReport, error) {
	r := chaosReport{windowsByStatus: map[string]int{}}
	type ver struct {
		updated  time.Time
		rev      int
		recalled bool
	}
	newest := map[ids.MessageID]ver{}
	for _, m := range p.sc.Messages() {
		newest[m.ID] = ver{updated: m.CreateTime, recalled: m.Recalled}
	}
	r.messages = len(newest)
	for _, e := range p.sc.Edits() {
		v := newest[e.MessageID]
		if e.UpdateTime.After(v.updated) {
			v.updated = e.UpdateTime
			var c struct{ Text string }
			_ = json.Unmarshal([]byte(e.Content), &c)
			if i := strings.LastIndex(c.Text, "(r"); i >= 0 {
				v.rev, _ = strconv.Atoi(strings.TrimSuffix(c.Text[i+2:], ")"))
			}
		}
		newest[e.MessageID] = v
	}
	want := p.expectedEvidence()
	var wss []string
	for ws := range want {
		wss = append(wss, string(ws))
	}
	type row struct {
		ws, key, content  string
		occurred, updated time.Time
		deleted, eligible bool
		chat              string
	}
	rows, err := p.pool.Query(ctx, `
		SELECT workspace_id, source_key, content, occurred_at, source_updated_at, deleted, synthesis_eligible, coalesce(chat_id, '')
		FROM workspace_timeline_evidence WHERE source = 'lark' AND source_type = 'lark_message'`)
	if err != nil {
		return r, err
	}
	got := map[string]row{}
	for rows.Next() {
		var x row
		if err := rows.Scan(&x.ws, &x.key, &x.content, &x.occurred, &x.updated, &x.deleted, &x.eligible, &x.chat); err != nil {
			rows.Close()
			return r, err
		}
		got[x.ws+" "+x.key] = x
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}
	r.evidence = len(got)
	evid := invariantResult{name: invEvidence}
	fresh := invariantResult{name: invNewest}
	recalls := invariantResult{name: invRecalls}
	for ws, keys := range want {
		for key := range keys {
			x, ok := got[string(ws)+" "+key]
			if !ok {
				evid.violations++
				evid.examples = append(evid.examples, "missing "+string(ws)+" "+key)
				continue
			}
			id := ids.MessageID(key[strings.LastIndexByte(key, '/')+1:])
			v := newest[id]
			switch {
			case v.recalled:
				if !x.deleted || x.content != "" || x.eligible {
					recalls.violations++
					recalls.examples = append(recalls.examples, fmt.Sprintf("%s %s deleted=%v eligible=%v content %d bytes", ws, key, x.deleted, x.eligible, len(x.content)))
				}
			case x.deleted || !x.updated.Equal(v.updated) || !strings.Contains(x.content, fmt.Sprintf("(r%d)", v.rev)):
				fresh.violations++
				fresh.examples = append(fresh.examples, fmt.Sprintf("%s %s: updated %s, newest %s (r%d), deleted=%v",
					ws, key, x.updated.UTC().Format(time.RFC3339Nano), v.updated.UTC().Format(time.RFC3339Nano), v.rev, x.deleted))
			}
		}
	}
	for k, x := range got {
		if !want[ids.WorkspaceID(x.ws)][x.key] {
			evid.violations++
			evid.examples = append(evid.examples, "unexpected "+k)
		}
	}

	// Windows: every window of eligible, not deleted evidence has one terminal state
	// row; no state row for a window without any evidence.
	type wkey struct {
		ws, key string
	}
	windows := map[wkey]bool{}
	anyEvidence := map[wkey]bool{}
	for _, x := range got {
		if x.chat == "" {
			continue
		}
		k := wkey{x.ws, ids.WindowSourceKey(ids.ChatID(x.chat), p.version, ids.WindowStart(x.occurred, p.window))}
		anyEvidence[k] = true
		if x.eligible && !x.deleted {
			windows[k] = true
		}
	}
	r.windows = len(windows)
	states := map[wkey]string{}
	srows, err := p.pool.Query(ctx, `SELECT workspace_id, source_key, coalesce(status, '') FROM workspace_timeline_sync_states
		WHERE source = 'system' AND source_type = 'lark_timeline_window' AND workspace_id = ANY($1)`, wss)
	if err != nil {
		return r, err
	}
	for srows.Next() {
		var k wkey
		var st string
		if err := srows.Scan(&k.ws, &k.key, &st); err != nil {
			srows.Close()
			return r, err
		}
		states[k] = st
	}
	srows.Close()
	if err := srows.Err(); err != nil {
		return r, err
	}
	win := invariantResult{name: invWindows}
	orphans := invariantResult{name: invOrphans}
	for k := range windows {
		st, ok := states[k]
		switch {
		case !ok:
			r.windowsByStatus["missing"]++
			win.violations++
			win.examples = append(win.examples, "no state: "+k.ws+" "+k.key)
		case st != "completed" && st != "ignored" && st != "needs_attention":
			r.windowsByStatus[st]++
			win.violations++
			win.examples = append(win.examples, st+": "+k.ws+" "+k.key)
		default:
			r.windowsByStatus[st]++
		}
	}
	for k, st := range states {
		if !anyEvidence[k] {
			orphans.violations++
			orphans.examples = append(orphans.examples, st+" state without evidence: "+k.ws+" "+k.key)
		}
	}
	r.invariants = []invariantResult{evid, fresh, recalls, win, orphans}
	if !full {
		return r, nil
	}

	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM workspace_timeline_entries WHERE source = 'ai'`).Scan(&r.entries); err != nil {
		return r, err
	}
	d, err := p.entryDuplicates(ctx)
	if err != nil {
		return r, err
	}
	dups := invariantResult{name: invEntryDups, violations: d.count()}
	dups.examples = append(append(append(dups.examples, d.noFingerprint...), d.wrongFingerprint...), d.sharedEvidence...)
	var sameFact int
	var sameFactEx []string
	if err := p.pool.QueryRow(ctx, `
		SELECT coalesce(sum(n - 1), 0), coalesce(array_agg(ex), '{}') FROM (
			SELECT count(*) AS n, min(workspace_id) || ' ' || kind || ' ' || occurred_at::text AS ex
			FROM workspace_timeline_entries WHERE source = 'ai'
			GROUP BY workspace_id, kind, title, occurred_at HAVING count(*) > 1) d`).Scan(&sameFact, &sameFactEx); err != nil {
		return r, err
	}
	dups.violations += sameFact
	dups.examples = append(dups.examples, sameFactEx...)
	bound := invariantResult{name: invEntryBound}
	if err := p.pool.QueryRow(ctx, `
		SELECT count(*) FROM workspace_timeline_entries t WHERE source = 'ai' AND NOT EXISTS (
			SELECT 1 FROM workspace_timeline_entry_evidence b JOIN workspace_timeline_evidence e ON e.id = b.evidence_id
			WHERE b.entry_id = t.id AND e.workspace_id = t.workspace_id)`).Scan(&bound.violations); err != nil {
		return r, err
	}
	sums, err := p.summaryAttempts(ctx)
	if err != nil {
		return r, err
	}
	human := invariantResult{name: invHuman}
	for _, e := range p.humanChanges(ctx) {
		human.violations++
		human.examples = append(human.examples, e.Error())
	}
	logs := invariantResult{name: invLogs}
	scan, err := p.scanLogsFor(append(p.messageFragments(), nonces...))
	if err != nil {
		return r, err
	}
	for _, f := range scan.findings {
		logs.violations++
		logs.examples = append(logs.examples, fmt.Sprintf("%s line %d: %q", f.proc, f.line, f.fragment))
	}
	for _, l := range scan.notJSON {
		logs.violations++
		logs.examples = append(logs.examples, "not JSON: "+l)
	}
	for _, n := range scan.lines {
		r.logLines += n
	}
	r.exitErrors = scan.exitErrors
	r.invariants = append(r.invariants, dups, bound, sums, human, logs)
	return r, nil
}

// summaryAttempts counts, from every synthesis process's log, the summary attempts of
// each window (the worker logs each one it makes: "workspace summary written", or
// "summary attempt failed"), and checks that a window with an attempt has
// summary_attempted set in its state, so that no later run could make another.
func (p *pipeline) summaryAttempts(ctx context.Context) (invariantResult, error) {
	inv := invariantResult{name: invSummaries}
	attempts, err := p.logSummaryAttempts()
	if err != nil {
		return inv, err
	}
	for k, n := range attempts {
		if n > 1 {
			inv.violations += n - 1
			inv.examples = append(inv.examples, fmt.Sprintf("%d attempts: %s", n, k))
		}
		ws, key, _ := strings.Cut(k, " ")
		var marked bool
		err := p.pool.QueryRow(ctx, `SELECT coalesce((metadata_json->>'summary_attempted')::boolean, false)
			FROM workspace_timeline_sync_states WHERE workspace_id = $1 AND source_type = 'lark_timeline_window' AND source_key = $2`,
			ws, key).Scan(&marked)
		if err != nil || !marked {
			inv.violations++
			inv.examples = append(inv.examples, fmt.Sprintf("attempted but not marked (%v): %s", err, k))
		}
	}
	return inv, nil
}

// logSummaryAttempts is the number of summary attempts the synthesis logs show, by
// "<workspace> <window key>".
func (p *pipeline) logSummaryAttempts() (map[string]int, error) {
	out := map[string]int{}
	for _, l := range p.layout {
		if !slices.Contains(l.roles, "synthesis") {
			continue
		}
		b, err := os.ReadFile(p.procs[l.name].logPath)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "summary") {
				continue
			}
			var rec struct {
				Msg       string `json:"msg"`
				Workspace string `json:"workspace_id"`
				Window    string `json:"window_key"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			if rec.Msg == "workspace summary written" || strings.HasPrefix(rec.Msg, "summary attempt failed") {
				out[rec.Workspace+" "+rec.Window]++
			}
		}
	}
	return out, nil
}
