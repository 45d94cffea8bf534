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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/ids"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/pgcluster"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/workspaces"
	"github.com/larkline/larkline/schemas"
)

// demoRoles is the whole pipeline, in one process.
var demoRoles = []string{"workspaces", "ingest", "reconcile", "sink", "windows", "synthesize", "api", "lag"}

type demoFlags struct {
	http, apiToken, scenario, dataDir, format, logLevel string
	once                                                bool
	timeout                                             time.Duration
}

// runDemo runs the whole pipeline on the embedded default: an in-process Kafka
// (kfake) with a data directory, a private PostgreSQL, and larktest replaying an
// incident chat through the real webhook path and the history API.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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
		return err
	}
	if f.format != "markdown" && f.format != "json" {
		return fmt.Errorf("%w: --format must be markdown or json", errUsage)
	}
	var missing []string
	for _, r := range demoRoles {
		if _, ok := roleBuilders[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the pipeline is not wired yet: roles %s are missing from this build", strings.Join(missing, ", "))
	}
	// Progress and logs go to stderr; with --once stdout carries only the result. The
	// pipeline's logger, the delivery goroutine and the progress loop all write it, so
	// writes are serialised (a test's stderr is a bytes.Buffer).
	stderr = &lockedWriter{w: stderr}
	log, err := logging.New(stderr, f.logLevel, "text")
	if err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "demo: "+format+"\n", a...) }
	started := time.Now()

	dir := f.dataDir
	if dir == "" {
		// under the system temp dir: the Postgres server runs as the postgres user
		if dir, err = os.MkdirTemp("", "larkline-demo-"); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}

	sc, err := loadScenario(f.scenario)
	if err != nil {
		return err
	}
	cfg := demoConfig()
	l := cfg.Services.Workspace.Timeline.Lark
	sc, shift, err := sc.ShiftBefore(time.Now().Add(-(l.SynthesisWindow + l.SynthesisWindowCloseGrace)), l.SynthesisWindow)
	if err != nil {
		return err
	}
	say("scenario shifted by %s so every window can close now (%d messages, %d workspaces)", shift.Round(time.Minute), len(sc.Messages()), len(sc.Workspaces()))

	// Kafka: kfake, persisted in the data directory.
	kf, err := kfake.NewCluster(kfake.NumBrokers(1)) // TRYX
	if err != nil {
		return fmt.Errorf("starting the in-process Kafka: %w", err)
	}
	defer kf.Close()
	cfg.Kafka.Brokers = kf.ListenAddrs()
	say("in-process Kafka (kfake) at %s, data in %s", strings.Join(cfg.Kafka.Brokers, ","), filepath.Join(dir, "kafka"))

	// Postgres: a private cluster in the data directory.
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "postgres"), Logger: log})
	if err != nil {
		return fmt.Errorf("starting the embedded Postgres: %w", err)
	}
	defer func() { _ = pg.Stop(context.WithoutCancel(ctx)) }()
	cfg.Postgres.DSN = config.Secret(pg.DSN())
	say("embedded Postgres (%s binaries) in %s", pg.Kind, filepath.Join(dir, "postgres"))

	// The local Lark.
	secret := func() string { b := make([]byte, 16); _, _ = rand.Read(b); return hex.EncodeToString(b) }
	app := sc.App()
	cfg.Lark.AppID, cfg.Lark.BotOpenID = app.AppID, app.BotOpenID
	cfg.Lark.AppSecret, cfg.Lark.VerificationToken, cfg.Lark.EncryptKey = config.Secret(secret()), config.Secret(secret()), config.Secret(secret())
	lk, err := larktest.New(larktest.Options{
		AppSecret: cfg.Lark.AppSecret.Value(), VerificationToken: cfg.Lark.VerificationToken.Value(),
		EncryptKey: cfg.Lark.EncryptKey.Value(), Scenario: sc,
		RetrySchedule: []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}, DuplicateDelay: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := lk.Start(); err != nil {
		return err
	}
	defer lk.Close()
	cfg.Lark.OpenBaseURL = lk.URL()

	token := f.apiToken
	if token == "" {
		token = secret()
	}
	sum := sha256.Sum256([]byte(token))
	cfg.HTTP.APITokens = []config.APIToken{{Name: "demo", SHA256: hex.EncodeToString(sum[:]), Workspaces: []string{config.AllWorkspaces}}}
	adminToken := secret()
	asum := sha256.Sum256([]byte(adminToken))
	cfg.HTTP.AdminTokenSHA256 = hex.EncodeToString(asum[:])
	cfg.HTTP.Listen = f.http
	cfg.Windows.StateDir = filepath.Join(dir, "windows")
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("demo configuration: %w", err)
	}

	if err := demoSetup(ctx, cfg, sc); err != nil {
		return err
	}
	r, err := startRoles(ctx, cfg, log, demoRoles)
	if err != nil {
		return err
	}
	defer func() { _ = r.stop() }()
	addr := r.rt.ops.Addr().String()
	say("pipeline running (%s)", strings.Join(demoRoles, ", "))

	delivered := make(chan error, 1)
	go func() {
		rep, err := lk.Deliver(ctx, "http://"+addr+cfg.Lark.WebhookPath)
		if err == nil {
			say("webhook deliveries done: %d events", len(rep.Deliveries))
		}
		delivered <- err
	}()

	var wsIDs []ids.WorkspaceID
	for _, w := range sc.Workspaces() {
		wsIDs = append(wsIDs, w.ID)
	}
	if !f.once {
		say("open http://%s/workspaces/%s#token=%s", addr, wsIDs[0], token)
		say("API token: %s   admin token: %s", token, adminToken)
		say("metrics: http://%s/metrics   health: http://%s/readyz", addr, addr)
		say("Ctrl-C to stop")
	}

	pool, err := r.rt.pool(ctx)
	if err != nil {
		return err
	}
	st, err := store.New(pool)
	if err != nil {
		return err
	}
	expected := expectedEvidence(sc)
	deadline := time.Now().Add(f.timeout)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	done := false
	for !done {
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
		p, err := st.Progress(ctx, wsIDs, l.SynthesisWindow, cfg.Windows.ProcessorVersion, l.SynthesisWindowMaxAttempts)
		if err != nil {
			say("progress unavailable: %v", err)
			continue
		}
		// terminal: completed, ignored, or failed with no attempt left
		terminal := p.Completed + p.Ignored + p.Exhausted
		say("%5.1fs  evidence %d/%d  windows terminal %d/%d (failed %d)  entries %d",
			time.Since(started).Seconds(), p.Evidence, expected, terminal, p.Windows, p.Exhausted, p.VisibleEntries)
		if f.once {
			done = p.Evidence >= expected && p.Windows > 0 && terminal >= p.Windows && delivered == nil
			if !done && time.Now().After(deadline) {
				return fmt.Errorf("not finished after %s: evidence %d/%d, windows terminal %d/%d", f.timeout, p.Evidence, expected, terminal, p.Windows)
			}
		}
	}
	res, err := collectDemoResult(ctx, pool, wsIDs)
	if err != nil {
		return err
	}
	if err := writeDemoResult(stdout, res, f.format); err != nil {
		return err
	}
	say("finished in %.1fs", time.Since(started).Seconds())
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
		Kafka: kafkaOptions(cfg, "demo-publish"), Topic: cfg.Kafka.Topics.Workspaces, Codec: codecs.Workspace,
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

// expectedEvidence is one evidence row per message of a bound chat and bound workspace.
func expectedEvidence(sc *larktest.Scenario) int {
	perChat := map[ids.ChatID]int{}
	for _, b := range sc.Bindings() {
		perChat[b.ChatID]++
	}
	n := 0
	for _, m := range sc.Messages() {
		n += perChat[m.ChatID]
	}
	return n
}
