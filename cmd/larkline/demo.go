package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/connectors/lark/reconcile"
	"github.com/larkline/larkline/connectors/workspaces"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/pgcluster"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// demoRoles is the whole pipeline, in one process.
var demoRoles = []ids.Stage{ids.StageWorkspaces, ids.StageIngest, ids.StageReconcile, ids.StageSink,
	ids.StageWindows, ids.StageSynthesis, ids.StageAPI, ids.StageLag}

type demoFlags struct {
	http, apiToken, scenario, dataDir, format, logLevel string
	once                                                bool
	timeout                                             time.Duration
}

// runDemo runs the whole pipeline on the embedded default: an in-process Kafka
// (kfake) with a data directory, an in-memory schema registry (srfake), a private
// PostgreSQL, and larktest replaying an incident chat through the real webhook path
// and the history API.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseDemoFlags(args, stderr)
	if err != nil {
		return err
	}
	// Progress and logs go to stderr; with --once stdout carries only the result. The
	// pipeline's logger, the delivery goroutine and the progress loop all write it, so
	// writes are serialised (a test's stderr is a bytes.Buffer).
	stderr = &lockedWriter{w: stderr}
	log, err := logging.New(stderr, f.logLevel, "text")
	if err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	d := &demo{f: f, log: log, stdout: stdout, stderr: stderr, started: time.Now()}
	defer d.close()
	if err := d.startServices(ctx); err != nil {
		return err
	}
	if err := demoSetup(ctx, d.cfg, d.sc); err != nil {
		return err
	}
	r, err := startRoles(ctx, d.cfg, log, demoRoles)
	if err != nil {
		return err
	}
	defer func() { _ = r.stop() }()
	return d.run(ctx, r)
}

// parseDemoFlags parses and checks larkline demo's flags.
func parseDemoFlags(args []string, stderr io.Writer) (demoFlags, error) {
	var f demoFlags
	fs := flag.NewFlagSet("larkline demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.http, "http", "127.0.0.1:8080", "address serving the webhook, API, web page, /metrics, /healthz and /readyz")
	fs.StringVar(&f.apiToken, "api-token", "", "API token the demo accepts (default: a random one, printed)")
	fs.StringVar(&f.scenario, "scenario", "", "scenario file (JSON Lines, docs/scenario.md); default: the bundled incident chat")
	fs.StringVar(&f.dataDir, "data-dir", "", "keep Kafka and Postgres data here across runs (default: a temporary directory removed at exit)")
	fs.BoolVar(&f.once, "once", false, "wait until every non-empty window is terminal, print the result and exit")
	fs.StringVar(&f.format, "format", "markdown", "result format with --once: markdown or json")
	fs.DurationVar(&f.timeout, "timeout", 110*time.Second, "with --once, give up (exit 1) after this long")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of the pipeline's logs on stderr: debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	if f.format != "markdown" && f.format != "json" {
		return f, fmt.Errorf("%w: --format must be markdown or json", errUsage)
	}
	return f, nil
}

// demo is one run of larkline demo: its services, configuration and tokens, and
// what close must undo (in reverse order).
type demo struct {
	f              demoFlags
	log            *slog.Logger
	stdout, stderr io.Writer
	started        time.Time

	cfg               *config.Config
	sc                *larktest.Scenario
	lk                *larktest.Server
	token, adminToken string
	undo              []func()
}

func (d *demo) say(format string, a ...any) { fmt.Fprintf(d.stderr, "demo: "+format+"\n", a...) }

func (d *demo) close() {
	for i := len(d.undo) - 1; i >= 0; i-- {
		d.undo[i]()
	}
}

// startServices makes the data directory, shifts the scenario so that every window
// can close now, and starts Kafka (kfake), the schema registry (srfake), Postgres
// and the local Lark, filling the demo configuration in as it goes.
func (d *demo) startServices(ctx context.Context) error {
	dir := d.f.dataDir
	if dir == "" {
		// under the system temp dir: the Postgres server runs as the postgres user
		var err error
		if dir, err = os.MkdirTemp("", "larkline-demo-"); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		d.undo = append(d.undo, func() { os.RemoveAll(dir) })
	}
	sc, err := loadScenario(d.f.scenario)
	if err != nil {
		return err
	}
	d.cfg = demoConfig()
	l := d.cfg.Services.Workspace.Timeline.Lark
	sc, shift, err := sc.ShiftBefore(time.Now().Add(-(l.SynthesisWindow + l.SynthesisWindowCloseGrace)), l.SynthesisWindow)
	if err != nil {
		return err
	}
	d.sc = sc
	d.say("scenario shifted by %s so every window can close now (%d messages, %d workspaces)", shift.Round(time.Minute), len(sc.Messages()), len(sc.Workspaces()))

	// Kafka: kfake, persisted in the data directory.
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(filepath.Join(dir, "kafka")))
	if err != nil {
		return fmt.Errorf("starting the in-process Kafka: %w", err)
	}
	d.undo = append(d.undo, kf.Close)
	d.cfg.Kafka.Brokers = kf.ListenAddrs()
	d.say("in-process Kafka (kfake) at %s, data in %s", strings.Join(d.cfg.Kafka.Brokers, ","), filepath.Join(dir, "kafka"))

	// Schema registry: franz-go's in-memory one, so that the demo writes the
	// Confluent wire format every deployment with a registry writes, registering
	// its schemas on first use (schemas.autoRegister's default).
	sreg := srfake.New()
	d.undo = append(d.undo, sreg.Close)
	d.cfg.Schemas.Registry.URL = sreg.URL()
	d.say("in-memory schema registry (franz-go srfake) at %s", sreg.URL())

	// Postgres: a private cluster in the data directory.
	// Without --data-dir the cluster is throwaway: if the demo is killed, the
	// reaper that stops the server also deletes its data.
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "postgres"), Throwaway: d.f.dataDir == "", Logger: d.log})
	if err != nil {
		return fmt.Errorf("starting the embedded Postgres: %w", err)
	}
	d.undo = append(d.undo, func() { _ = pg.Stop(context.WithoutCancel(ctx)) })
	d.cfg.Postgres.DSN = config.Secret(pg.DSN())
	d.say("embedded Postgres (%s binaries) in %s", pg.Kind, filepath.Join(dir, "postgres"))

	if err := d.startLark(); err != nil {
		return err
	}
	d.setTokens()
	d.cfg.HTTP.Listen = d.f.http
	d.cfg.HTTP.APIListen, d.cfg.HTTP.WebhookListen = d.f.http, d.f.http // the demo shares one loopback listener
	d.cfg.Windows.StateDir = filepath.Join(dir, "windows")
	if err := validateConfig(d.cfg); err != nil {
		return fmt.Errorf("demo configuration: %w", err)
	}
	return nil
}

func randomSecret() string { b := make([]byte, 16); _, _ = rand.Read(b); return hex.EncodeToString(b) }

// startLark starts the local Lark with fresh app credentials.
func (d *demo) startLark() error {
	app := d.sc.App()
	c := &d.cfg.Lark
	c.AppID, c.BotOpenID = app.AppID, app.BotOpenID
	c.AppSecret, c.VerificationToken, c.EncryptKey = config.Secret(randomSecret()), config.Secret(randomSecret()), config.Secret(randomSecret())
	lk, err := larktest.New(larktest.Options{
		AppSecret: c.AppSecret.Value(), VerificationToken: c.VerificationToken.Value(),
		EncryptKey: c.EncryptKey.Value(), Scenario: d.sc,
		RetrySchedule: []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}, DuplicateDelay: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := lk.Start(); err != nil {
		return err
	}
	d.undo = append(d.undo, func() { lk.Close() })
	d.lk = lk
	c.OpenBaseURL = lk.URL()
	return nil
}

// setTokens sets the API token (the flag's, or a random one) and a random admin token.
func (d *demo) setTokens() {
	d.token = d.f.apiToken
	if d.token == "" {
		d.token = randomSecret()
	}
	sum := sha256.Sum256([]byte(d.token))
	d.cfg.HTTP.APITokens = []config.APIToken{{Name: "demo", SHA256: hex.EncodeToString(sum[:]), Workspaces: []string{config.AllWorkspaces}, Scope: "curate"}}
	d.adminToken = randomSecret()
	asum := sha256.Sum256([]byte(d.adminToken))
	d.cfg.HTTP.AdminTokenSHA256 = hex.EncodeToString(asum[:])
}

// run delivers the scenario's events to the running pipeline and reports progress
// every second; with --once it returns when the pipeline is done (or the timeout
// passed) after printing the result.
func (d *demo) run(ctx context.Context, r *running) error {
	addr := r.rt.ops.Addr().String()
	d.say("pipeline running (%s)", joinRoles(demoRoles, ", "))
	delivered := make(chan error, 1)
	go func() {
		rep, err := d.lk.Deliver(ctx, "http://"+addr+d.cfg.Lark.WebhookPath)
		if err == nil {
			d.say("webhook deliveries done: %d events", len(rep.Deliveries))
		}
		delivered <- err
	}()
	var wsIDs []ids.WorkspaceID
	for _, w := range d.sc.Workspaces() {
		wsIDs = append(wsIDs, w.ID)
	}
	if !d.f.once {
		d.say("open http://%s/workspaces/%s#token=%s", addr, wsIDs[0], d.token)
		d.say("API token: %s   admin token: %s", d.token, d.adminToken)
		d.say("metrics: http://%s/metrics   health: http://%s/readyz", addr, addr)
		d.say("Ctrl-C to stop")
	}
	pool, err := r.rt.pool(ctx)
	if err != nil {
		return err
	}
	st, err := store.New(pool)
	if err != nil {
		return err
	}
	// --once is finished when the pipeline says so, whatever the scenario's rules
	// make of its messages (workspace status, creation time, the 72-hour bound, chat
	// type): webhook deliveries done, a reconciliation pass started after the feed
	// applied the bindings and after the scenario's last change, every consumer
	// group caught up, every non-empty window terminal.
	w := newDemoWaiter(d.cfg, d.sc, r.rt.reconciler, st, wsIDs)
	defer w.close()
	deadline := time.Now().Add(d.f.timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.done:
			return fmt.Errorf("the pipeline stopped: %w", r.wait())
		case err := <-delivered:
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("delivering the scenario's events: %w", err)
			}
			delivered = nil
		case <-tick.C:
		}
		ds := w.check(ctx, delivered == nil)
		d.say("%5.1fs  evidence %d  windows terminal %d/%d (failed %d)  entries %d  waiting for: %s",
			time.Since(d.started).Seconds(), ds.progress.Evidence, ds.terminal(), ds.progress.Windows, ds.progress.Exhausted,
			ds.progress.VisibleEntries, orNone(ds.waiting))
		switch {
		case !d.f.once:
		case len(ds.waiting) == 0:
			return d.finish(ctx, pool, wsIDs, nil)
		case time.Now().After(deadline):
			return d.finish(ctx, pool, wsIDs, ds.waiting)
		}
	}
}

// finish prints the result of --once: complete when nothing is waiting, else the
// timeout's error naming what still was. Failed windows make it an error too.
func (d *demo) finish(ctx context.Context, pool *pgxpool.Pool, wsIDs []ids.WorkspaceID, waiting []string) error {
	res, err := collectDemoResult(ctx, pool, wsIDs)
	if err != nil {
		return err
	}
	if len(waiting) > 0 {
		res.WaitingFor = waiting
		if err := writeDemoResult(d.stdout, res, d.f.format); err != nil {
			return err
		}
		return fmt.Errorf("not finished after %s: waiting for %s", d.f.timeout, strings.Join(waiting, "; "))
	}
	res.Complete = true
	if err := writeDemoResult(d.stdout, res, d.f.format); err != nil {
		return err
	}
	d.say("finished in %.1fs", time.Since(d.started).Seconds())
	for _, w := range res.Workspaces {
		for _, win := range w.Windows {
			if win.Status == "failed" {
				return errors.New("some windows failed")
			}
		}
	}
	return nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func loadScenario(path string) (*larktest.Scenario, error) {
	if path == "" {
		return larktest.Incident()
	}
	return larktest.LoadFile(path)
}

// demoConfig is the embedded default: every feature on, tuned to finish quickly.
func demoConfig() *config.Config {
	cfg := config.Default()
	l := &cfg.Services.Workspace.Timeline.Lark
	l.Enabled, l.EventIngestionEnabled, l.ReconciliationEnabled = true, true, true
	l.EvidenceListedInAPI = true
	l.SynthesisScanInterval = 2 * time.Second
	l.ReconcileInterval = 20 * time.Second
	l.Environment = "demo"
	cfg.Kafka.Partitions, cfg.Kafka.ReplicationFactor = 3, 1
	// kfake answers some newer sarama request versions in a way sarama cannot decode
	// ("invalid byteslice length" in the consumer group); 2.1.0 is the oldest Kafka 4
	// accepts and kfake serves it correctly.
	cfg.Kafka.SaramaVersion = "2.1.0"
	cfg.Kafka.Producer.Linger = 0
	cfg.Kafka.Consumer.FetchMaxWait = 100 * time.Millisecond
	cfg.Lark.Mode = config.LarkModeWebhook
	cfg.Synthesis.Synthesizer = config.SynthesizerRules
	cfg.Log.Level, cfg.Log.Format = "warn", "text"
	return cfg
}

// demoSetup creates the topics and schema, and publishes the scenario's workspaces and
// bindings to the workspace feed, the way a ticket system would.
func demoSetup(ctx context.Context, cfg *config.Config, sc *larktest.Scenario) error {
	cl, err := newKafkaClient(cfg, "demo-setup")
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := kafka.EnsureTopics(ctx, kadm.NewClient(cl), kafka.DefaultTopicSpecs(topicNames(cfg), cfg.Kafka.Partitions, cfg.Kafka.ReplicationFactor))
	if err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return err
	}
	codecs, err := newCodecs(cfg)
	if err != nil {
		return err
	}
	pub, err := workspaces.NewPublisher(workspaces.PublisherOptions{
		Kafka: kafkaOptions(cfg, "demo-publish").opts, Topic: cfg.Kafka.Topics.Workspaces, Codec: codecs.Workspace,
	})
	if err != nil {
		return err
	}
	defer pub.Close()
	for _, w := range sc.Workspaces() {
		var chats []ids.ChatID
		for _, b := range sc.Bindings() {
			if b.WorkspaceID == w.ID {
				chats = append(chats, b.ChatID)
			}
		}
		slices.Sort(chats)
		if _, err := pub.Publish(ctx, schemas.WorkspaceRecord{
			ID: w.ID, Type: w.Type, Status: w.Status, CreatedAt: w.CreatedAt, Version: 1,
			Chats: chats, UpdatedAt: time.Now().UTC(),
		}); err != nil {
			return fmt.Errorf("publishing workspace %s: %w", w.ID, err)
		}
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, "; ")
}

// demoWaiter judges from the pipeline itself whether a demo run is finished.
type demoWaiter struct {
	cfg        *config.Config
	rec        *reconcile.Reconciler
	st         *store.Store
	workspaces []ids.WorkspaceID
	groups     []string
	// lastChange is the scenario's last message, edit or recall; a pass must start
	// after it (plus the settle delay) to have read it.
	lastChange time.Time
	// feedApplied is when the workspaces group was first seen caught up: a pass that
	// started earlier may have missed bindings.
	feedApplied time.Time
	lag         *kgo.Client
}

type demoStatus struct {
	progress store.Progress
	waiting  []string
}

func (s demoStatus) terminal() int {
	return s.progress.Completed + s.progress.Ignored + s.progress.Exhausted
}

func newDemoWaiter(cfg *config.Config, sc *larktest.Scenario, rec *reconcile.Reconciler, st *store.Store, ws []ids.WorkspaceID) *demoWaiter {
	w := &demoWaiter{cfg: cfg, rec: rec, st: st, workspaces: ws, groups: larklineGroups(cfg)}
	for _, m := range sc.Messages() {
		w.lastChange = maxTime(w.lastChange, m.CreateTime, m.RecallTime)
	}
	for _, e := range sc.Edits() {
		w.lastChange = maxTime(w.lastChange, e.UpdateTime)
	}
	return w
}

func maxTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// check returns what the pipeline has not finished yet (nothing: done).
func (w *demoWaiter) check(ctx context.Context, delivered bool) demoStatus {
	var s demoStatus
	if !delivered {
		s.waiting = append(s.waiting, "webhook deliveries")
	}
	lags, err := w.groupLags(ctx)
	switch {
	case err != nil:
		s.waiting = append(s.waiting, "consumer lag unavailable: "+err.Error())
	case len(lags) > 0:
		s.waiting = append(s.waiting, "consumer groups "+strings.Join(lags, ", "))
	}
	feedBehind := err != nil || slices.ContainsFunc(lags, func(g string) bool { return strings.HasPrefix(g, groupName(w.cfg, groupWorkspaces)+" ") })
	if !feedBehind && w.feedApplied.IsZero() {
		w.feedApplied = time.Now()
	}
	if w.rec == nil {
		s.waiting = append(s.waiting, "a reconciler in this process")
	} else if lp, ok := w.rec.LastPass(); !ok || w.feedApplied.IsZero() || !lp.Started.After(w.feedApplied) ||
		!lp.Started.After(w.lastChange.Add(reconcile.DefaultSettle)) {
		s.waiting = append(s.waiting, "a reconciliation pass after the bindings and the last message")
	} else if n := lp.Failed(); n > 0 {
		s.waiting = append(s.waiting, fmt.Sprintf("a reconciliation pass without failures (%d chats failed)", n))
	}
	l := w.cfg.Services.Workspace.Timeline.Lark
	p, err := w.st.Progress(ctx, w.workspaces, l.SynthesisWindow, w.cfg.Windows.ProcessorVersion, l.SynthesisWindowMaxAttempts)
	if err != nil {
		s.waiting = append(s.waiting, "progress unavailable: "+err.Error())
		return s
	}
	s.progress = p
	if s.terminal() < p.Windows {
		s.waiting = append(s.waiting, fmt.Sprintf("windows %d/%d terminal", s.terminal(), p.Windows))
	}
	return s
}

// groupLags names the consumer groups that are not caught up ("group (lag N)").
func (w *demoWaiter) groupLags(ctx context.Context) ([]string, error) {
	if w.lag == nil {
		cl, err := newKafkaClient(w.cfg, "demo-lag")
		if err != nil {
			return nil, err
		}
		w.lag = cl
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	gs, err := kafka.Lag(ctx, w.lag, w.groups, kafka.LagOptions{MaxTimestampFetches: new(0)})
	if err != nil {
		return nil, err
	}
	var behind []string
	for _, g := range gs {
		var lag int64
		bad := g.Err != nil || g.Members == 0
		for _, p := range g.Partitions {
			if p.Err != nil {
				bad = true
			}
			lag += max(p.Lag, 0)
		}
		if bad || lag > 0 {
			behind = append(behind, fmt.Sprintf("%s (lag %d, members %d)", g.Group, lag, g.Members))
		}
	}
	return behind, nil
}

func (w *demoWaiter) close() {
	if w.lag != nil {
		w.lag.Close()
	}
}
