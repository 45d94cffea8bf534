package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

var larklineBin string

// TestMain builds cmd/larkline, or uses the binary LARKLINE_TEST_E2E_BIN names (to
// test a release build).
func TestMain(m *testing.M) {
	if bin := os.Getenv("LARKLINE_TEST_E2E_BIN"); bin != "" {
		larklineBin = bin
		testenv.Main(m)
	}
	dir, err := os.MkdirTemp("", "larkline-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	larklineBin = filepath.Join(dir, "larkline")
	build := exec.Command("go", "build", "-o", larklineBin, "github.com/larkline/larkline/cmd/larkline")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building cmd/larkline:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testenv.Main(m, func() { os.RemoveAll(dir) })
}

// Stage process names of the default layout.
const (
	procEdge      = "edge"      // ingest + api: the webhook
	procSink      = "sink"      // workspaces + sink
	procWindows   = "windows"   // the Goka window processor
	procSynth     = "synthesis" // the synthesis consumer
	procReconcile = "reconcile" // history reconciliation
)

// procSpec is one process of a deployment's layout: its name and roles.
type procSpec struct {
	name  string
	roles []string
}

// layout is the default deployment: one process per stage.
var layout = []procSpec{
	{procSink, []string{"workspaces", "sink"}},
	{procWindows, []string{"windows"}},
	{procSynth, []string{"synthesis"}},
	{procReconcile, []string{"reconcile"}},
	{procEdge, []string{"ingest", "api"}},
}

// pipelineOptions shape one test's pipeline.
type pipelineOptions struct {
	// Scenario is played by larktest; it is shifted so that its last window can close
	// now (default: the bundled incident chat).
	Scenario *larktest.Scenario
	// Brokers and DSN default to the harness's real broker and a fresh database.
	Brokers []string
	DSN     string
	// ProcessDSN is the database as the processes reach it (default DSN); the test's
	// own checks always use DSN.
	ProcessDSN string
	// ModelURL selects the OpenAI-compatible synthesizer at this base URL; empty
	// selects the rules synthesizer.
	ModelURL string
	// ModelForVersions keeps the rules synthesizer for the deployment but configures
	// ModelURL's endpoint and key, for processor versions that choose openai.
	ModelForVersions bool
	// Env overrides configuration keys for every process (LARKLINE_…=value).
	Env []string
	// Live keeps the scenario's times as they are (events are posted as they happen)
	// instead of shifting them into the past so that every window can close at once.
	Live bool
	// Window is synthesisWindow (default 10 minutes).
	Window time.Duration
	// Ineligible names scenario workspaces the pipeline must ignore (recovered,
	// archived, or created more than 72 hours before the messages).
	Ineligible []ids.WorkspaceID
	// Hold names processes that are not started by start (a test starts them).
	Hold []string
	// RetrySchedule of larktest's webhook redeliveries (default 1s, 2s, 4s, 8s, 15s, 30s).
	RetrySchedule []time.Duration
	// Layout replaces the default process layout (it must keep procEdge, the webhook).
	Layout []procSpec
	// Timeout bounds the whole test's pipeline context (default 10 minutes).
	Timeout time.Duration
	// Prefix names the deployment's topics (<prefix>.<name>) and groups (<prefix>-<role>);
	// default e2e-<random>.
	Prefix string
	// KafkaClient replaces the test's own Kafka client settings (seed brokers
	// included): a secured broker's admin.
	KafkaClient []kgo.Opt
	// Prepare runs after the configuration is written and before `topics ensure`:
	// a platform team creating the topics (kafka.manageTopics: false).
	Prepare func(ctx context.Context, p *pipeline)
}

// pipeline is one running larkline deployment.
type pipeline struct {
	t       testing.TB
	ctx     context.Context
	dir     string
	cfgPath string
	prefix  string
	version string
	env     []string
	sc      *larktest.Scenario
	lark    *larktest.Server
	procs   map[string]*proc
	layout  []procSpec
	pool    *pgxpool.Pool
	store   *store.Store
	human   humanContent
	window  time.Duration
	brokers []string
	// kafkaOpts, when set, are the test's own client settings (pipelineOptions.KafkaClient)
	kafkaOpts []kgo.Opt
	// ineligible workspaces get no evidence
	ineligible []ids.WorkspaceID

	appSecret, verification, encrypt string
}

const (
	testWindow = 10 * time.Minute
	testGrace  = 5 * time.Second
)

// newPipeline sets up topics, schema, workspaces and bindings through the operator
// commands, then starts every process of the layout (except held ones) and waits until
// they are ready. Everything stops at the test's cleanup.
func newPipeline(t testing.TB, o pipelineOptions) *pipeline {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	t.Cleanup(cancel)
	if o.Scenario == nil {
		sc, err := larktest.Incident()
		if err != nil {
			t.Fatal(err)
		}
		o.Scenario = sc
	}
	if o.Window == 0 {
		o.Window = testWindow
	}
	sc := o.Scenario
	if !o.Live {
		var err error
		if sc, _, err = o.Scenario.ShiftBefore(time.Now().Add(-(o.Window + testGrace + time.Second)), o.Window); err != nil {
			t.Fatalf("shifting the scenario: %v", err)
		}
	}
	if o.Brokers == nil {
		o.Brokers = testenv.KafkaBrokers(t)
	}
	if o.DSN == "" {
		o.DSN = testenv.PostgresDSN(t)
	}
	if o.RetrySchedule == nil {
		o.RetrySchedule = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 30 * time.Second}
	}
	if o.ProcessDSN == "" {
		o.ProcessDSN = o.DSN
	}
	if o.Layout == nil {
		o.Layout = layout
	}
	p := &pipeline{t: t, ctx: ctx, dir: t.TempDir(), sc: sc, procs: map[string]*proc{}, layout: o.Layout,
		window: o.Window, brokers: o.Brokers, ineligible: o.Ineligible}
	p.prefix = "e2e-" + randHex(4)
	if o.Prefix != "" {
		p.prefix = o.Prefix
	}
	p.kafkaOpts = o.KafkaClient
	p.version = "v1"

	secret := func() string { return randHex(16) }
	appSecret, verification, encrypt := secret(), secret(), secret()
	p.appSecret, p.verification, p.encrypt = appSecret, verification, encrypt
	lk, err := larktest.New(larktest.Options{
		AppID:     "cli_" + p.prefix[4:], // the SDK caches tokens per app id, process-wide
		AppSecret: appSecret, VerificationToken: verification, EncryptKey: encrypt,
		Scenario: sc, RetrySchedule: o.RetrySchedule, DuplicateDelay: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close() })
	p.lark = lk

	p.cfgPath = filepath.Join(p.dir, "larkline.yaml")
	cfg := p.config(o, lk, appSecret, verification, encrypt)
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p.env = append([]string{"LARKLINE_CONFIG=" + p.cfgPath}, o.Env...)

	if o.Prepare != nil {
		o.Prepare(ctx, p)
	}
	p.cli(ctx, "topics", "ensure")
	p.cli(ctx, "migrate")
	pool, err := pgxpool.New(ctx, o.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	p.pool = pool
	if len(sc.Workspaces()) <= 10 {
		// through the operator commands, so that they are exercised too
		for _, w := range sc.Workspaces() {
			p.cli(ctx, "workspaces", "put", "--id", string(w.ID), "--type", w.Type, "--status", w.Status,
				"--created-at", w.CreatedAt.UTC().Format(time.RFC3339))
		}
		for _, b := range sc.Bindings() {
			p.cli(ctx, "bind", "add", "--workspace", string(b.WorkspaceID), "--chat", string(b.ChatID))
		}
	} else {
		p.bulkWorkspaces(ctx) // load tests: thousands of commands would take minutes
	}
	if p.store, err = store.New(pool); err != nil {
		t.Fatal(err)
	}
	p.human = p.writeHumanContent(ctx)

	for _, l := range p.layout {
		pr := newProc(t, l.name, l.roles, nil, p.env, p.dir)
		pr.env = append(pr.env, "LARKLINE_WINDOWS__STATEDIR="+filepath.Join(p.dir, "state-"+l.name))
		p.procs[l.name] = pr
		if slices.Contains(o.Hold, l.name) {
			pr.held = true
		}
	}
	t.Cleanup(p.close)
	for _, l := range p.layout {
		go p.procs[l.name].supervise()
	}
	for _, l := range p.layout {
		if !slices.Contains(o.Hold, l.name) {
			p.waitReady(l.name)
		}
	}
	return p
}

// bulkWorkspaces writes the scenario's workspaces and bindings in two statements.
func (p *pipeline) bulkWorkspaces(ctx context.Context) {
	p.t.Helper()
	var wid, wtype, wstatus []string
	var wcreated []time.Time
	for _, w := range p.sc.Workspaces() {
		wid, wtype, wstatus, wcreated = append(wid, string(w.ID)), append(wtype, w.Type), append(wstatus, w.Status), append(wcreated, w.CreatedAt)
	}
	var bws, bchat []string
	for _, b := range p.sc.Bindings() {
		bws, bchat = append(bws, string(b.WorkspaceID)), append(bchat, string(b.ChatID))
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO workspaces (id, type, status, created_at, version)
		SELECT * , 1 FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])`, wid, wtype, wstatus, wcreated); err != nil {
		p.t.Fatalf("inserting workspaces: %v", err)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO workspace_chat_bindings (workspace_id, chat_id)
		SELECT * FROM unnest($1::text[], $2::text[])`, bws, bchat); err != nil {
		p.t.Fatalf("inserting bindings: %v", err)
	}
}

// config is the deployment's configuration file: every feature on, short intervals.
func (p *pipeline) config(o pipelineOptions, lk *larktest.Server, appSecret, verification, encrypt string) map[string]any {
	token := sha256.Sum256([]byte(apiToken))
	admin := sha256.Sum256([]byte(adminToken))
	synthesis := map[string]any{"synthesizer": "rules"}
	if o.ModelURL != "" {
		synthesis = map[string]any{"synthesizer": "openai", "openai": map[string]any{
			"baseURL": o.ModelURL, "model": "e2e-model", "apiKey": "e2e-not-a-secret", "timeout": "5s", "maxRetries": 1,
		}}
		if o.ModelForVersions {
			synthesis["synthesizer"] = "rules"
		}
	}
	topic := func(s string) string { return p.prefix + "." + s }
	return map[string]any{
		"services": map[string]any{"workspace": map[string]any{"timeline": map[string]any{"lark": map[string]any{
			"enabled": true, "eventIngestionEnabled": true, "reconciliationEnabled": true,
			"synthesisWindow": p.window.String(), "synthesisWindowCloseGrace": testGrace.String(),
			"synthesisScanInterval": "2s", "reconcileInterval": "10s", "synthesisStaleTimeout": "3m",
			"environment": "e2e", "workspaceTypes": []string{"incident"}, "evidenceListedInAPI": true,
		}}}},
		"kafka": map[string]any{
			"brokers": o.Brokers, "clientID": p.prefix, "groupPrefix": p.prefix,
			"topics": map[string]any{
				"evidence": topic("evidence"), "windowsClosed": topic("windows-closed"), "checkpoints": topic("checkpoints"),
				"workspaces": topic("workspaces"), "deadLetter": topic("deadletter"),
			},
			"partitions": 3, "replicationFactor": 1,
			"producer": map[string]any{"linger": "0s"},
			"consumer": map[string]any{"fetchMaxWait": "100ms", "sessionTimeout": "10s", "rebalanceTimeout": "10s"},
		},
		"postgres": map[string]any{"dsn": o.ProcessDSN, "maxConns": 4, "connectTimeout": "3s"},
		"lark": map[string]any{
			"mode": "webhook", "appID": lk.AppID(), "appSecret": appSecret, "verificationToken": verification,
			"encryptKey": encrypt, "botOpenID": p.sc.App().BotOpenID, "openBaseURL": lk.URL(),
			"api": map[string]any{"requestsPerSecond": 50, "burst": 20, "maxBackoff": "2s"},
		},
		"http": map[string]any{
			"listen":           "127.0.0.1:0",
			"apiTokens":        []any{map[string]any{"name": "e2e", "sha256": hex.EncodeToString(token[:]), "workspaces": []string{"*"}}},
			"adminTokenSHA256": hex.EncodeToString(admin[:]),
		},
		"synthesis": synthesis,
		"windows":   map[string]any{"processorVersion": p.version},
		"log":       map[string]any{"level": "debug", "format": "json"},
	}
}

const (
	apiToken   = "e2e-api-token"
	adminToken = "e2e-admin-token"
)

// cli runs a one-shot larkline command with the deployment's configuration.
func (p *pipeline) cli(ctx context.Context, args ...string) string {
	p.t.Helper()
	return p.cliEnv(ctx, p.t, nil, args...)
}

// cliEnv is cli with more configuration overrides, failing t.
func (p *pipeline) cliEnv(ctx context.Context, t testing.TB, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, larklineBin, args...)
	cmd.Env = append(append(larklineEnv(), p.env...), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("larkline %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func (p *pipeline) waitReady(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
	defer cancel()
	if err := p.procs[name].ready(ctx); err != nil {
		p.t.Fatalf("%v\n--- %s log tail ---\n%s", err, name, p.procs[name].logTail(40))
	}
}

func (p *pipeline) close() {
	for _, l := range slices.Backward(p.layout) {
		if pr := p.procs[l.name]; pr != nil {
			pr.close()
		}
	}
	if p.t.Failed() {
		for _, l := range p.layout {
			p.t.Logf("--- %s log tail ---\n%s", l.name, p.procs[l.name].logTail(25))
		}
	}
}

// webhookURL is the edge process's Lark callback URL.
func (p *pipeline) webhookURL() string { return "http://" + p.procs[procEdge].addr() + "/lark/events" }

// deliver posts the scenario's events to the webhook (with larktest's duplicates and
// redeliveries) and returns when every event was acknowledged or given up.
func (p *pipeline) deliver(ctx context.Context) larktest.Report {
	p.t.Helper()
	rep, err := p.lark.Deliver(ctx, p.webhookURL())
	if err != nil {
		p.t.Fatalf("delivering the scenario: %v", err)
	}
	if u := rep.Undelivered(); len(u) > 0 {
		p.t.Fatalf("%d events never acknowledged by the webhook (first %s)", len(u), u[0].EventID)
	}
	return rep
}

// sender posts events to the webhook the way the pipeline's larktest does.
func (p *pipeline) sender(schedule []time.Duration) *larktest.Sender {
	p.t.Helper()
	s, err := larktest.NewSender(larktest.SenderOptions{
		EncryptKey: p.encrypt, VerificationToken: p.verification, AppID: p.lark.AppID(), RetrySchedule: schedule,
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// restarts is every supervisor restart, by process.
func (p *pipeline) restarts() map[string]int {
	out := map[string]int{}
	for n, pr := range p.procs {
		if r := pr.Restarts(); r > 0 {
			out[n] = r
		}
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// eligibleWorkspaces are the scenario's workspaces the pipeline ingests for.
func (p *pipeline) eligibleWorkspaces() []ids.WorkspaceID {
	var out []ids.WorkspaceID
	for _, w := range p.sc.Workspaces() {
		if !slices.Contains(p.ineligible, w.ID) {
			out = append(out, w.ID)
		}
	}
	return out
}
