package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/kafka"
)

// BenchmarkPipelineSteps (issue #35, `make bench-pipeline`) runs the whole pipeline as
// deployed — the webhook (edge), the evidence sink, the window processor and synthesis
// with the rule synthesizer, one process each, on the real broker and Postgres — under
// a stepped live load over LARKLINE_LOAD_CHATS chats (default 1,000): each step offers
// its rate (LARKLINE_LOAD_STEPS messages/s, default 1000,2000,5000,10000) for
// LARKLINE_LOAD_STEP (default 60s), then waits up to LARKLINE_LOAD_SETTLE (default 30s)
// for every group's lag to fall under 5 s. Reconciliation is off (its history API is
// limited to 50 requests/s, which a throughput run would only measure again), so
// windows close on the wall clock: 1-minute windows, the e2e grace.
//
// Per step it prints the offered and sustained rate, webhook ack p50/p99 (from the
// moment each message was due, so a wait for a free sender counts), each group's
// lag in records and seconds at the end of the step, how long the lag took to fall
// under 5 s, window end → first draft p50/p99, and CPU (cores) and peak RSS per
// process; a progress line every 5 s; the final table in Markdown. While a step runs
// it takes a CPU profile of every process over the step (http.profiling) and prints
// the top 10 functions of the processes behind at the end of the step, and of the
// edge when it acknowledged less than 90 % of the offered rate. Nothing fails for being
// slow, only for losing or doubling something (checkInvariants).
func BenchmarkPipelineSteps(b *testing.B) {
	o := stepsOptions(b)
	sc := loadScenario(b, o.chats, 0, time.Now(), time.Minute)
	p := newPipeline(b, pipelineOptions{
		Scenario: sc, Live: true, Window: time.Minute, Layout: stepsLayout,
		Timeout: time.Duration(len(o.rates))*(o.step+o.settle+time.Minute) + 20*time.Minute,
		Env: []string{
			"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__RECONCILIATIONENABLED=false",
			"LARKLINE_KAFKA__PARTITIONS=" + strconv.Itoa(o.partitions),
			"LARKLINE_HTTP__PROFILING=true",
			"LARKLINE_LOG__LEVEL=warn",
		},
	})
	ctx := p.ctx
	r := newStepRunner(b, p, o)
	b.ResetTimer()
	var steps []stepResult
	for _, rate := range o.rates {
		steps = append(steps, r.run(ctx, rate))
	}
	b.StopTimer()
	// The steps' figures first, should the drain below fail: all but the drafts.
	fmt.Fprintf(os.Stderr, "\nbench-pipeline: the steps, before the drain:\n\n")
	printStepsTable(os.Stderr, steps)
	g := p.waitDone(ctx, 15*time.Minute)
	if err := p.checkInvariants(ctx); err != nil {
		b.Fatal(err)
	}
	r.windowLatencies(ctx, steps)
	fmt.Fprintf(os.Stderr, "\nbench-pipeline: %d chats, %d partitions, 1-minute windows, grace %s, rule synthesizer; %s\n\n", o.chats, o.partitions, testGrace, g)
	printStepsTable(os.Stderr, steps)
	for _, s := range steps {
		b.ReportMetric(s.sustained, fmt.Sprintf("msgs/s@%d", s.offered))
	}
}

// stepsLayout is the default layout without reconciliation.
var stepsLayout = []procSpec{
	{procSink, []string{"workspaces", "sink"}},
	{procWindows, []string{"windows"}},
	{procSynth, []string{"synthesis"}},
	{procEdge, []string{"ingest", "api"}},
}

type stepsOpts struct {
	chats, partitions, senders int
	rates                      []int
	step, settle               time.Duration
	profiles                   string // directory the CPU profiles are written to
}

// stepsOptions reads the LARKLINE_LOAD_* knobs (larklineEnv keeps them from the
// larkline processes).
func stepsOptions(b *testing.B) stepsOpts {
	o := stepsOpts{chats: 1000, partitions: 12, senders: 512, rates: []int{1000, 2000, 5000, 10000},
		step: time.Minute, settle: 30 * time.Second}
	num := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q: want a positive number", name, v)
			}
			*dst = n
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				b.Fatalf("%s=%q: want a positive duration", name, v)
			}
			*dst = d
		}
	}
	num("LARKLINE_LOAD_CHATS", &o.chats)
	num("LARKLINE_LOAD_PARTITIONS", &o.partitions)
	num("LARKLINE_LOAD_SENDERS", &o.senders)
	dur("LARKLINE_LOAD_STEP", &o.step)
	dur("LARKLINE_LOAD_SETTLE", &o.settle)
	if v := os.Getenv("LARKLINE_LOAD_STEPS"); v != "" {
		o.rates = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("LARKLINE_LOAD_STEPS=%q: want rates in messages/s, comma-separated", v)
			}
			o.rates = append(o.rates, n)
		}
	}
	o.profiles = os.Getenv("LARKLINE_LOAD_PROFILES")
	if o.profiles == "" {
		o.profiles = b.TempDir()
	}
	if err := os.MkdirAll(o.profiles, 0o755); err != nil {
		b.Fatal(err)
	}
	return o
}

// stepResult is one step's figures.
type stepResult struct {
	offered        int
	from, to       time.Time // the step's load
	sent, acked    int
	failed         int // POSTs answered with anything but 200, or not at all
	sustained      float64
	ackP50, ackP99 time.Duration       // from the moment each message was due
	serviceP99     time.Duration       // from each POST
	lagEnd         map[string]groupLag // by stage
	recovered      time.Duration       // after the step, until every lag < 5 s; -1: not within settle
	draftP50       time.Duration
	draftP99       time.Duration
	drafts         int
	cores          map[string]float64 // by process
	rssMax         map[string]float64 // bytes, by process
	profiles       map[string]string  // CPU profile file, by process
	load           string             // the machine's load average at the step's end
}

// selfCPU is the CPU seconds this test process (the senders) has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// machineBusy is the CPU seconds every core of the machine has spent not idle (user,
// nice, system, irq, softirq, steal from /proc/stat), 0 where there is none: what the
// broker, Postgres and the kernel use shows as the machine's busy cores minus the
// processes measured one by one.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0
		}
		busy += v
	}
	return busy / 100 // USER_HZ, 100 on Linux
}

// loadAverage is the first field of /proc/loadavg ("" where there is none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Fields(string(b))[0]
}

type groupLag struct {
	records int64
	seconds float64 // the oldest unconsumed record's age; -1 unknown
}

type stepRunner struct {
	b       *testing.B
	p       *pipeline
	o       stepsOpts
	cl      *kgo.Client
	sender  *larktest.Sender
	builder larktest.Builder
	users   []larktest.User
	groups  map[string]string // stage → group
	next    int               // messages sent so far: the next message's sequence number
}

func newStepRunner(b *testing.B, p *pipeline, o stepsOpts) *stepRunner {
	return &stepRunner{
		b: b, p: p, o: o, cl: p.kafkaClient(),
		sender:  p.sender(nil),
		builder: larktest.Builder{AppID: p.lark.AppID(), Token: p.verification},
		users:   p.sc.Users(),
		groups: map[string]string{
			"sink": p.group("sink"), "windows": p.group("windows-" + p.version), "synthesis": p.group("synthesis"),
		},
	}
}

// run offers one step's rate for the step's duration, then waits for the lag to
// settle (settle), measuring as it goes.
func (r *stepRunner) run(ctx context.Context, rate int) stepResult {
	res := stepResult{offered: rate, lagEnd: map[string]groupLag{}, cores: map[string]float64{},
		rssMax: map[string]float64{}, profiles: map[string]string{}}
	cpu0 := r.sample(ctx, res.rssMax)
	self0, busy0 := selfCPU(), machineBusy()
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		r.profile(ctx, rate, profileSpan(r.o.step), res.profiles)
	}()
	l := r.load(ctx, rate, r.o.step, 0, func() { r.sample(ctx, res.rssMax) })
	res.from, res.to, res.sent = l.from, l.to, l.sent
	cpu1 := r.sample(ctx, res.rssMax)
	for name, c := range cpu1 {
		res.cores[name] = (c - cpu0[name]) / res.to.Sub(res.from).Seconds()
	}
	res.cores["bench"] = (selfCPU() - self0) / res.to.Sub(res.from).Seconds()
	res.cores["machine"] = (machineBusy() - busy0) / res.to.Sub(res.from).Seconds()
	res.load = loadAverage()
	res.acked, res.failed = l.acked, l.failed
	res.sustained = float64(res.acked) / res.to.Sub(res.from).Seconds()
	res.ackP50, res.ackP99 = quantile(l.acks, 0.5), quantile(l.acks, 0.99)
	res.serviceP99 = quantile(l.service, 0.99)
	<-profiled
	r.lagLine(ctx, res.lagEnd)
	res.recovered = r.settle(ctx, res.to)
	for stage, l := range res.lagEnd {
		if l.seconds > 5 || l.seconds < 0 {
			r.top(stage+" is behind", res.profiles[stageProc[stage]])
		}
	}
	if res.sustained < 0.9*float64(rate) {
		r.top(fmt.Sprintf("the edge acknowledged %.0f of %d messages/s", res.sustained, rate), res.profiles[procEdge])
	}
	return res
}

// loaded is what one load sent and what came back.
type loaded struct {
	from, to            time.Time
	sent, acked, failed int // failed: POSTs answered with anything but 200, or not at all
	// acks: per acknowledged message, from the moment it was due (its tick of the
	// open-loop schedule) to its 200, so the time it waited for a free sender counts
	// (no coordinated omission); service: from its POST to its 200.
	acks, service []time.Duration
}

// offered is one message of the schedule: its body and the moment it was due.
type offered struct {
	body []byte
	due  time.Time
}

// load offers rate messages/s for dur, or until limit messages were sent when limit
// > 0, from o.senders concurrent senders (open loop: message k is due at from + k/rate
// whether or not the earlier ones were answered; one that finds every sender busy
// waits for one, and that wait counts in its ack time), round-robin over the chats.
// Offering ends with dur: messages still waiting for a sender then are not sent.
// Every 5 s, from its own goroutine so that a stalled webhook cannot silence it, it
// prints a progress line with the wall time since the start and calls every.
func (r *stepRunner) load(ctx context.Context, rate int, dur time.Duration, limit int, every func()) loaded {
	work := make(chan offered, r.o.senders)
	var sent, acked, failed atomic.Int64
	var mu sync.Mutex
	var out loaded
	var wg sync.WaitGroup
	for range r.o.senders {
		wg.Go(func() {
			for m := range work {
				var err error
				t0 := time.Now()
				for try := 0; ; try++ {
					if err = r.sender.Send(ctx, r.p.webhookURL(), m.body); err == nil || try == 9 || ctx.Err() != nil {
						break
					}
					failed.Add(1)
					select { // a sender's backoff between retries, as Lark's; no assertion on time
					case <-ctx.Done():
					case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
					}
				}
				if err != nil {
					failed.Add(1)
					continue
				}
				acked.Add(1)
				now := time.Now()
				mu.Lock()
				out.acks = append(out.acks, now.Sub(m.due))
				out.service = append(out.service, now.Sub(t0))
				mu.Unlock()
			}
		})
	}
	out.from = time.Now()
	offering := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		progress := time.NewTicker(5 * time.Second)
		defer progress.Stop()
		lastAcked, lastAt := int64(0), out.from
		for {
			select {
			case <-offering:
				return
			case <-ctx.Done():
				return
			case <-progress.C:
			}
			now, a := time.Now(), acked.Load()
			fmt.Fprintf(os.Stderr, "bench-pipeline: %d/s %3.0fs: sent %d, acked %.0f/s, failed POSTs %d; lag %s\n",
				rate, now.Sub(out.from).Seconds(), sent.Load(), float64(a-lastAcked)/now.Sub(lastAt).Seconds(), failed.Load(), r.lagLine(ctx, nil))
			lastAcked, lastAt = a, now
			if every != nil {
				every()
			}
		}
	}()
	interval := time.Second / time.Duration(rate)
	for k := 0; (limit == 0 || k < limit) && ctx.Err() == nil; k++ {
		due := out.from.Add(time.Duration(k) * interval)
		if due.Sub(out.from) >= dur || time.Since(out.from) >= dur {
			break // the step is over: what the senders could not take is not offered
		}
		if wait := time.Until(due); wait > time.Millisecond {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		c, i := r.next%r.o.chats, r.next/r.o.chats
		env := r.builder.Text(larktest.Msg{ID: loadMessageID(c, i), Chat: loadChat(c),
			From: larktest.Author{OpenID: r.users[(c+i)%len(r.users)].OpenID}, At: time.Now()},
			fmt.Sprintf(loadPhrases[(c+i)%len(loadPhrases)], 2+i%90))
		body, err := env.JSON()
		if err != nil {
			r.b.Fatal(err)
		}
		if err := r.p.sc.AddRawEvent(larktest.DeliverOnce, body); err != nil { // what checkInvariants expects
			r.b.Fatal(err)
		}
		r.next++
		sent.Add(1)
		work <- offered{body: body, due: due}
	}
	close(work)
	wg.Wait()
	close(offering)
	<-reported
	out.to = time.Now()
	out.sent, out.acked, out.failed = int(sent.Load()), int(acked.Load()), int(failed.Load())
	slices.Sort(out.acks)
	slices.Sort(out.service)
	return out
}

// stageProc is the process that runs each stage's group.
var stageProc = map[string]string{"sink": procSink, "windows": procWindows, "synthesis": procSynth}

// lagLine reads every stage's lag, fills into (when not nil) and returns it as text.
func (r *stepRunner) lagLine(ctx context.Context, into map[string]groupLag) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stages := []string{"sink", "windows", "synthesis"}
	var groups []string
	for _, s := range stages {
		groups = append(groups, r.groups[s])
	}
	lags, err := kafka.Lag(ctx, r.cl, groups, kafka.LagOptions{})
	if err != nil {
		return "unknown: " + err.Error()
	}
	byGroup := map[string]kafka.GroupLag{} // kafka.Lag answers in group-name order, not ours
	for _, g := range lags {
		byGroup[g.Group] = g
	}
	var out []string
	for _, st := range stages {
		g, ok := byGroup[r.groups[st]]
		if !ok {
			continue
		}
		l := groupLag{records: g.TotalLag()}
		for _, p := range g.Partitions {
			switch {
			case p.LagTime == kafka.LagTimeUnknown:
				l.seconds = -1
			case l.seconds >= 0:
				l.seconds = max(l.seconds, p.LagTime.Seconds())
			}
		}
		if into != nil {
			into[st] = l
		}
		out = append(out, fmt.Sprintf("%s %d (%s)", st, l.records, lagSeconds(l.seconds)))
	}
	return strings.Join(out, ", ")
}

func lagSeconds(s float64) string {
	if s < 0 {
		return "? s"
	}
	return fmt.Sprintf("%.1f s", s)
}

// settle waits, up to o.settle after end, until every group's lag is under 5 s, and
// returns how long that took (-1 when it did not).
func (r *stepRunner) settle(ctx context.Context, end time.Time) time.Duration {
	for ctx.Err() == nil {
		lags := map[string]groupLag{}
		r.lagLine(ctx, lags)
		ok := len(lags) == len(r.groups)
		for _, l := range lags {
			ok = ok && l.seconds >= 0 && l.seconds < 5
		}
		if ok {
			return time.Since(end)
		}
		if time.Since(end) > r.o.settle {
			return -1
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return -1
}

// sample records each process's peak RSS into rss and returns its CPU seconds.
func (r *stepRunner) sample(ctx context.Context, rss map[string]float64) map[string]float64 {
	cpu := map[string]float64{}
	for _, l := range r.p.layout {
		pr := r.p.procs[l.name]
		if v, err := pr.metric(ctx, "process_cpu_seconds_total"); err == nil {
			cpu[l.name] = v
		}
		if v, err := pr.metric(ctx, "process_resident_memory_bytes"); err == nil {
			rss[l.name] = max(rss[l.name], v)
		}
	}
	return cpu
}

// profileSpan is how long a step's CPU profiles run: from the step's start for all
// of it but its last 2 s, so that the bursts of a stage that works at the minute's
// boundaries (synthesis, when a minute's windows close) are in it (a 10 s profile
// mid-step caught synthesis idle: 10 ms of samples) and the lag is still read as the
// step ends; at least 1 s (pprof's unit), at most the ops server's write timeout
// (60 s) less 5 s, which net/http/pprof refuses to outlast.
func profileSpan(step time.Duration) time.Duration {
	return min(max(step-2*time.Second, time.Second), 55*time.Second)
}

// profile takes a CPU profile of every process at once, for span, and records the
// files.
func (r *stepRunner) profile(ctx context.Context, rate int, span time.Duration, into map[string]string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, l := range r.p.layout {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(r.o.profiles, fmt.Sprintf("%s-%d.pprof", l.name, rate))
			if err := fetchProfile(ctx, "http://"+r.p.procs[l.name].addr()+"/debug/pprof/profile?seconds="+strconv.Itoa(int(span.Seconds())), path); err != nil {
				fmt.Fprintf(os.Stderr, "bench-pipeline: profiling %s: %v\n", l.name, err)
				return
			}
			mu.Lock()
			into[l.name] = path
			mu.Unlock()
		}()
	}
	wg.Wait()
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// top prints the ten functions a process spent most CPU in, and why it is shown.
func (r *stepRunner) top(why, profile string) {
	if profile == "" {
		return
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=10", larklineBin, profile).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-pipeline: pprof %s: %v\n%s", profile, err, out)
		return
	}
	fmt.Fprintf(os.Stderr, "bench-pipeline: %s; top 10 of its process (%s):\n%s\n", why, profile, out)
}

// windowLatencies fills each step's window end → first draft quantiles: the windows
// whose end falls in the step's load or its settle time.
func (r *stepRunner) windowLatencies(ctx context.Context, steps []stepResult) {
	rows, err := r.p.pool.Query(ctx, `SELECT (ai_metadata->>'window_end')::timestamptz, min(created_at)
		FROM workspace_timeline_entries WHERE source = 'ai' AND ai_metadata ? 'window_end'
		GROUP BY ai_metadata->>'chat_id', ai_metadata->>'window_end'`)
	if err != nil {
		r.b.Fatal(err)
	}
	defer rows.Close()
	by := make([][]time.Duration, len(steps))
	for rows.Next() {
		var end, first time.Time
		if err := rows.Scan(&end, &first); err != nil {
			r.b.Fatal(err)
		}
		for i, s := range steps {
			next := time.Now()
			if i+1 < len(steps) {
				next = steps[i+1].from
			}
			if !end.Before(s.from) && end.Before(next) {
				by[i] = append(by[i], first.Sub(end))
			}
		}
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		r.b.Fatal(err)
	}
	for i := range steps {
		slices.Sort(by[i])
		steps[i].drafts, steps[i].draftP50, steps[i].draftP99 = len(by[i]), quantile(by[i], 0.5), quantile(by[i], 0.99)
	}
}

// printStepsTable prints the steps as a Markdown table.
func printStepsTable(w io.Writer, steps []stepResult) {
	fmt.Fprintln(w, "| offered msg/s | sent msg/s | acked msg/s | failed POSTs | ack p50 / p99 from due (p99 from POST) | lag at step end: sink / windows / synthesis (records, s) | lag < 5 s after | window end → draft p50 / p99 (windows) | CPU cores: edge / sink / windows / synthesis / senders / machine | peak RSS MiB: edge / sink / windows / synthesis | load |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---|---|---|---|---|---|---:|")
	for _, s := range steps {
		lag := func(st string) string {
			l := s.lagEnd[st]
			return fmt.Sprintf("%d, %s", l.records, lagSeconds(l.seconds))
		}
		rec := "not within the settle time"
		if s.recovered >= 0 {
			rec = s.recovered.Round(time.Second).String()
		}
		procs := []string{procEdge, procSink, procWindows, procSynth}
		var cores, rss []string
		for _, n := range procs {
			cores = append(cores, fmt.Sprintf("%.2f", s.cores[n]))
			rss = append(rss, fmt.Sprintf("%.0f", s.rssMax[n]/(1<<20)))
		}
		cores = append(cores, fmt.Sprintf("%.2f", s.cores["bench"]), fmt.Sprintf("%.2f", s.cores["machine"]))
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %d | %s / %s (%s) | %s / %s / %s | %s | %s / %s (%d) | %s | %s | %s |\n",
			s.offered, float64(s.sent)/s.to.Sub(s.from).Seconds(), s.sustained, s.failed, s.ackP50.Round(100*time.Microsecond), s.ackP99.Round(100*time.Microsecond), s.serviceP99.Round(100*time.Microsecond),
			lag("sink"), lag("windows"), lag("synthesis"), rec,
			s.draftP50.Round(100*time.Millisecond), s.draftP99.Round(100*time.Millisecond), s.drafts,
			strings.Join(cores, " / "), strings.Join(rss, " / "), s.load)
	}
}

// BenchmarkPipelineScaleOut (issue #35) runs two windows replicas and two sink
// replicas on one broker (LARKLINE_LOAD_PARTITIONS, default 12) and measures:
//
//   - drain rate: a backlog of LARKLINE_LOAD_BACKLOG messages (default 100,000) is
//     produced while the windows and sink replicas are down; then one replica of
//     each starts: per group, the time to its first commit (start-up: joining the
//     group, recovering state) and the rate from then until it has committed the
//     whole backlog; then again with both replicas. Two cores bound the ratio: both
//     replicas, the broker and Postgres share them.
//   - rebalance: under LARKLINE_LOAD_RATE messages/s (default 2,000) with both
//     replicas up, one windows and one sink replica are killed (SIGKILL, kept down)
//     halfway through LARKLINE_LOAD_STEP; a stage's extra lag is its worst lag in
//     seconds after the kill (sampled every second, and followed past the step until
//     both lags are back under settledLag) less its worst in the 10 s before it (the
//     step starts once they are under it). The windows replicas run with
//     windows.hotStandby (D42) unless LARKLINE_LOAD_HOTSTANDBY=false.
//
// It fails only when a message or window is lost or doubled (checkInvariants), or
// when a lag does not settle under settledLag within minutes.
func BenchmarkPipelineScaleOut(b *testing.B) {
	o := stepsOptions(b)
	backlog, rate := 100_000, 2000
	if v := os.Getenv("LARKLINE_LOAD_BACKLOG"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("LARKLINE_LOAD_BACKLOG=%q: want a positive number", v)
		}
		backlog = n
	}
	if v := os.Getenv("LARKLINE_LOAD_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("LARKLINE_LOAD_RATE=%q: want a positive number", v)
		}
		rate = n
	}
	standby := true
	if v := os.Getenv("LARKLINE_LOAD_HOTSTANDBY"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			b.Fatalf("LARKLINE_LOAD_HOTSTANDBY=%q: want true or false", v)
		}
		standby = on
	}
	const (
		windowsA, windowsB = "windows-a", "windows-b"
		sinkA, sinkB       = "sink-a", "sink-b"
	)
	replicas := []string{windowsA, windowsB, sinkA, sinkB}
	sc := loadScenario(b, o.chats, 0, time.Now(), time.Minute)
	p := newPipeline(b, pipelineOptions{
		Scenario: sc, Live: true, Window: time.Minute, Timeout: time.Hour, Hold: replicas,
		Layout: []procSpec{
			{sinkA, []string{"workspaces", "sink"}}, {sinkB, []string{"sink"}},
			{windowsA, []string{"windows"}}, {windowsB, []string{"windows"}},
			{procSynth, []string{"synthesis"}}, {procEdge, []string{"ingest", "api"}},
		},
		Env: []string{
			"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__RECONCILIATIONENABLED=false",
			"LARKLINE_KAFKA__PARTITIONS=" + strconv.Itoa(o.partitions),
			"LARKLINE_LOG__LEVEL=warn",
			"LARKLINE_WINDOWS__HOTSTANDBY=" + strconv.FormatBool(standby),
		},
	})
	ctx := p.ctx
	r := newStepRunner(b, p, o)
	b.ResetTimer()

	// drain produces the backlog, starts names and measures, per stage, the time to
	// its group's first commit (start-up, joining, recovery) and the rate from then
	// until the group has committed the whole backlog.
	type drained struct{ startup, rate float64 }
	drain := func(names ...string) map[string]drained {
		adm := kadm.NewClient(r.cl)
		offsets := func() kadm.ListedOffsets {
			o, err := adm.ListEndOffsets(ctx, p.topic("evidence"))
			if err != nil || o.Error() != nil {
				b.Fatalf("evidence end offsets: %v %v", err, o.Error())
			}
			return o
		}
		begin := offsets()
		l := r.load(ctx, 50_000, time.Hour, backlog, nil) // as fast as the webhook takes them
		if l.acked != l.sent {
			b.Fatalf("backlog: %d of %d acknowledged", l.acked, l.sent)
		}
		ends := offsets()
		start := time.Now()
		for _, n := range names {
			p.procs[n].Start()
		}
		type progress struct {
			at       time.Time
			consumed int64
		}
		first := map[string]progress{}
		out := map[string]drained{}
		for len(out) < 2 && ctx.Err() == nil {
			for _, st := range []string{"windows", "sink"} {
				if _, ok := out[st]; ok {
					continue
				}
				committed, err := adm.FetchOffsets(ctx, r.groups[st])
				if err != nil {
					continue
				}
				now, n := time.Now(), consumedSince(committed, begin, ends)
				if _, ok := first[st]; !ok && n > 0 {
					first[st] = progress{now, n}
				}
				if f, ok := first[st]; ok && reached(committed, ends) {
					total := consumedSince(committed, begin, ends)
					d := drained{startup: f.at.Sub(start).Seconds(), rate: float64(total-f.consumed) / max(now.Sub(f.at).Seconds(), 0.001)}
					if f.consumed > total/2 {
						// Most of it was done by the first commit seen (a group that
						// commits seldom, or a backlog too small): the rate counts the
						// start-up too, a lower bound.
						d = drained{startup: -1, rate: float64(total) / now.Sub(start).Seconds()}
					}
					out[st] = d
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // the offsets are sampled to time a drain, not waited on as a condition
			}
		}
		fmt.Fprintf(os.Stderr, "bench-pipeline: drained %d messages with %v: %+v\n", backlog, names, out)
		return out
	}
	one := drain(windowsA, sinkA)
	for _, n := range []string{windowsA, sinkA} {
		p.procs[n].Stop()
	}
	two := drain(windowsA, windowsB, sinkA, sinkB)

	// Rebalance under load: each stage's worst lag (s) before and after the kill,
	// from lags settled after the drain to lags recovered after the kill.
	settled := func(what string, within time.Duration, sample func(map[string]groupLag)) {
		deadline := time.Now().Add(within)
		for ctx.Err() == nil {
			lags := map[string]groupLag{}
			line := r.lagLine(ctx, lags)
			if sample != nil {
				sample(lags)
			}
			ok := true
			for _, st := range []string{"windows", "sink"} {
				ok = ok && lags[st].seconds >= 0 && lags[st].seconds < settledLag.Seconds()
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("lag %s not under %s within %s: %s", what, settledLag, within, line)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // lag is sampled to find its peak, not waited on as a condition
			}
		}
	}
	settled("before the rebalance step", 5*time.Minute, nil)
	before, after := map[string]float64{}, map[string]float64{}
	// A sampler of its own reads the lags every second through the step, so that the
	// takeover's peak is seen (the load's progress line comes every 5 s), kills at
	// half the step and prints the seconds after the kill.
	var (
		killedAt time.Time
		timeline []string
		sampled  = make(chan struct{})
		stop     = make(chan struct{})
	)
	half := time.Now().Add(o.step / 2)
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second) // lag is sampled to find its peak, not waited on as a condition
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if killedAt.IsZero() && time.Now().After(half) {
				killedAt = time.Now()
				p.procs[windowsB].Kill()
				p.procs[sinkB].Kill()
				fmt.Fprintf(os.Stderr, "bench-pipeline: killed %s and %s\n", windowsB, sinkB)
				continue
			}
			lags := map[string]groupLag{}
			line := r.lagLine(ctx, lags)
			worst := before
			switch {
			case !killedAt.IsZero():
				worst = after
				timeline = append(timeline, fmt.Sprintf("+%.0fs %s", time.Since(killedAt).Seconds(), line))
			case time.Now().Before(half.Add(-10 * time.Second)):
				continue // the step's start-up: the 10 s before the kill are the baseline
			}
			for _, st := range []string{"windows", "sink"} {
				worst[st] = max(worst[st], lags[st].seconds)
			}
		}
	}()
	l := r.load(ctx, rate, o.step, 0, nil)
	close(stop)
	<-sampled
	// The survivors may take over after the step ended: follow the lag until it
	// recovers, its worst counting as after the kill.
	settled("after the kill", 5*time.Minute, func(lags map[string]groupLag) {
		for _, st := range []string{"windows", "sink"} {
			after[st] = max(after[st], lags[st].seconds)
		}
	})
	fmt.Fprintf(os.Stderr, "bench-pipeline: lag after the kill, every second until the step ended:\n  %s\n", strings.Join(timeline, "\n  "))
	b.StopTimer()
	g := p.waitDone(ctx, 15*time.Minute)
	if err := p.checkInvariants(ctx); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "\nbench-pipeline scale-out: %d chats, %d partitions; %s\n\n", o.chats, o.partitions, g)
	fmt.Fprintln(os.Stderr, "| stage | one replica: start-up s, records/s | two replicas: start-up s, records/s | ratio of rates |")
	fmt.Fprintln(os.Stderr, "|---|---:|---:|---:|")
	for _, st := range []string{"windows", "sink"} {
		startup := func(d drained) string {
			if d.startup < 0 {
				return "in the rate"
			}
			return fmt.Sprintf("%.1f", d.startup)
		}
		fmt.Fprintf(os.Stderr, "| %s | %s, %.0f | %s, %.0f | %.2f |\n", st, startup(one[st]), one[st].rate, startup(two[st]), two[st].rate, two[st].rate/one[st].rate)
	}
	fmt.Fprintf(os.Stderr, "\nrebalance at %d messages/s (%d acknowledged of %d; windows.hotStandby %v): worst lag before the kill, after, extra: windows %.1f, %.1f, %.1f s; sink %.1f, %.1f, %.1f s; load %s\n",
		rate, l.acked, l.sent, standby, before["windows"], after["windows"], max(0, after["windows"]-before["windows"]),
		before["sink"], after["sink"], max(0, after["sink"]-before["sink"]), loadAverage())
	b.ReportMetric(two["windows"].rate/one["windows"].rate, "windows_scale")
	b.ReportMetric(two["sink"].rate/one["sink"].rate, "sink_scale")
	b.ReportMetric(max(0, after["windows"]-before["windows"]), "windows_rebalance_extra_lag_s")
	b.ReportMetric(max(0, after["sink"]-before["sink"]), "sink_rebalance_extra_lag_s")
}

// settledLag is the lag in seconds below which the scale-out's rebalance starts, and
// below which it counts a stage as recovered after the kill.
const settledLag = 2 * time.Second

// reached reports whether the group's committed offsets are at or past every end.
func reached(committed kadm.OffsetResponses, ends kadm.ListedOffsets) bool {
	ok := true
	ends.Each(func(e kadm.ListedOffset) {
		if e.Offset == 0 {
			return // an empty partition: nothing to commit
		}
		c, found := committed.Lookup(e.Topic, e.Partition)
		ok = ok && found && c.Err == nil && c.At >= e.Offset
	})
	return ok
}

// consumedSince is how many records the group consumed from begin, counting each
// partition up to its end.
func consumedSince(committed kadm.OffsetResponses, begin, ends kadm.ListedOffsets) int64 {
	var n int64
	ends.Each(func(e kadm.ListedOffset) {
		c, found := committed.Lookup(e.Topic, e.Partition)
		b, ok := begin.Lookup(e.Topic, e.Partition)
		if !found || c.Err != nil || !ok {
			return
		}
		n += max(0, min(c.At, e.Offset)-b.Offset)
	})
	return n
}
