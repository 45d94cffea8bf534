package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/larkline/larkline/connectors/deadletters"
	"github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/reconcile"
	"github.com/larkline/larkline/connectors/workspaces"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/httpapi"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lagexport"
	"github.com/larkline/larkline/internal/opsserver"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/retention"
	"github.com/larkline/larkline/processors/synthesis"
	"github.com/larkline/larkline/processors/windows"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// component is anything a role runs: Run until ctx ends and drain, then Close.
type component interface {
	Run(ctx context.Context) error
	Close() error
}

// runtime is what roles share in one process.
type runtime struct {
	opts *roleOptions
	log  *slog.Logger
	reg  *prometheus.Registry
	ops  *opsserver.Server
	// apiSrv and hookSrv serve the timeline API and the webhook: ops itself when
	// their address is http.listen's, else their own bare listeners (issue #29).
	apiSrv, hookSrv *opsserver.Server
	codecs          *schemas.Codecs

	// reconciler is set when this process runs the reconcile role; the admin API's
	// manual refresh uses it.
	reconciler *reconcile.Reconciler
	// larkStack is shared by the ingest and reconcile roles (see lark).
	larkStack *larkStack
	// client and chats: the one SDK client and chat type check (larkClient,
	// chatGuard), shared by every role that calls Lark.
	client *larkapi.Client
	chats  *chats.Guard

	poolOnce sync.Once
	pgPool   *pgxpool.Pool
	poolErr  error
}

// pool opens the process's one Postgres pool on first use, checks that the schema
// is up to date (it never migrates: `larkline migrate` does, as the schema's owner;
// roles can run with DML rights only) and registers its readiness.
func (rt *runtime) pool(ctx context.Context) (*pgxpool.Pool, error) {
	rt.poolOnce.Do(func() {
		if rt.opts.poolMissing != nil {
			rt.poolErr = rt.opts.poolMissing
			return
		}
		p, err := store.OpenPool(ctx, rt.opts.pool)
		if err != nil {
			rt.poolErr = err
			return
		}
		if err := store.CheckSchema(ctx, p); err != nil {
			p.Close()
			rt.poolErr = err
			return
		}
		rt.pgPool = p
		if rt.ops != nil {
			rt.poolErr = rt.ops.AddReadiness("postgres", p.Ping)
		}
	})
	return rt.pgPool, rt.poolErr
}

// store is a store over the process's pool.
func (rt *runtime) store(ctx context.Context) (*store.Store, error) {
	pool, err := rt.pool(ctx)
	if err != nil {
		return nil, err
	}
	return store.New(pool)
}

func (rt *runtime) close() {
	if rt.pgPool != nil {
		rt.pgPool.Close()
	}
}

// roleBuilders builds each role's components; every role registers its readiness.
// A role is a stage and has its name (ids.Stage, D30).
var roleBuilders = map[ids.Stage]func(ctx context.Context, rt *runtime) ([]component, error){
	ids.StageWindows:    buildWindows,
	ids.StageWorkspaces: buildWorkspaces,
	ids.StageAPI:        buildAPI,
	ids.StageSynthesis:  buildSynthesis,
	ids.StageLag:        buildLag,
	ids.StageRetention:  buildRetention,
	ids.StageIngest:     buildIngest,
	ids.StageReconcile:  buildReconcile,
	ids.StageSink:       buildSink,
}

// formerRoles are role names a configuration may still carry: each is refused with
// the name that replaced it.
var formerRoles = map[string]ids.Stage{"synthesize": ids.StageSynthesis}

// joinRoles is roles as the flag spells them.
func joinRoles(roles []ids.Stage, sep string) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, sep)
}

func knownRoles() []string {
	names := make([]string, 0, len(roleBuilders))
	for n := range roleBuilders {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return names
}

func runRoles(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := newFlags("run", stderr)
	rolesFlag := fs.String("roles", "", "comma-separated roles to run in this process: "+strings.Join(knownRoles(), ","))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var roles []ids.Stage
	for _, name := range strings.Split(*rolesFlag, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		r := ids.Stage(name)
		if now, ok := formerRoles[name]; ok {
			return fmt.Errorf("%w: role %q is now called %q (docs/decisions.md D30)", errUsage, name, now)
		}
		if _, ok := roleBuilders[r]; !ok {
			return fmt.Errorf("%w: unknown role %q (known: %s)", errUsage, name, strings.Join(knownRoles(), ", "))
		}
		if !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		return fmt.Errorf("%w: --roles is required (known: %s)", errUsage, strings.Join(knownRoles(), ", "))
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	return serveRoles(ctx, cfg, log, roles)
}

// serveRoles runs the ops server and the roles until ctx ends or one fails, then
// drains them all.
func serveRoles(ctx context.Context, cfg *config.Config, log *slog.Logger, roles []ids.Stage) error {
	r, err := startRoles(ctx, cfg, log, roles)
	if err != nil {
		return err
	}
	return r.wait()
}

// running is a started set of roles.
type running struct {
	rt     *runtime
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	errs   []error
}

// startRoles builds every role, starts the ops server and the components, and returns
// at once. The first component that fails cancels the others.
func startRoles(ctx context.Context, cfg *config.Config, log *slog.Logger, roles []ids.Stage) (*running, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo(roles))
	ops, err := opsserver.New(opsserver.Options{Addr: cfg.HTTP.Listen, Registry: reg, Logger: log, Profiling: cfg.HTTP.Profiling})
	if err != nil {
		return nil, err
	}
	codecs, err := newCodecs(cfg)
	if err != nil {
		_ = ops.Close()
		return nil, err
	}
	if !cfg.Schemas.AutoRegister {
		// The schemas must be registered already: a subject that lacks its schema
		// stops the process here, named, not at its first record.
		if err := codecs.Prepare(ctx); err != nil {
			_ = ops.Close()
			return nil, fmt.Errorf("schemas.autoRegister is false: %w", err)
		}
	}
	rt := &runtime{opts: newRoleOptions(cfg), log: log, reg: reg, ops: ops, codecs: codecs}
	// Readiness reflects the broker too: a process whose roles cannot reach Kafka
	// should not receive webhook traffic or count as up.
	probe, err := newKafkaClient(cfg, "readiness")
	if err != nil {
		_ = ops.Close()
		return nil, err
	}
	// Refused permissions stop the process here, each named, rather than as retries
	// deep inside a client (issue #21).
	if err := checkAccess(ctx, probe, roleAccess(cfg, roles)); err != nil {
		probe.Close()
		_ = ops.Close()
		return nil, err
	}
	if err := ops.AddReadiness("kafka", probe.Ping); err != nil {
		probe.Close()
		_ = ops.Close()
		return nil, err
	}
	comps := []component{held(probe.Close)}
	// The API and the webhook on their own listeners, unless they share one.
	byAddr := map[string]*opsserver.Server{cfg.HTTP.Listen: ops}
	for _, l := range []struct {
		addr string
		dst  **opsserver.Server
	}{{cfg.HTTP.APIListen, &rt.apiSrv}, {cfg.HTTP.WebhookListen, &rt.hookSrv}} {
		if l.addr == "" {
			l.addr = cfg.HTTP.Listen
		}
		if srv, ok := byAddr[l.addr]; ok {
			*l.dst = srv
			continue
		}
		srv, err := opsserver.New(opsserver.Options{Addr: l.addr, Bare: true, Logger: log})
		if err != nil {
			for _, c := range comps {
				_ = c.Close()
			}
			_ = ops.Close()
			return nil, err
		}
		byAddr[l.addr], *l.dst = srv, srv
		comps = append(comps, srv)
	}
	closeAll := func() {
		for _, c := range slices.Backward(comps) {
			if err := c.Close(); err != nil {
				log.Warn("closing a component", "err", err)
			}
		}
		rt.close()
	}
	for _, r := range roles {
		cs, err := roleBuilders[r](ctx, rt)
		if err != nil {
			closeAll()
			_ = ops.Close()
			return nil, fmt.Errorf("starting role %s: %w", r, err)
		}
		comps = append(comps, cs...)
	}
	logRetentionDecision(cfg, roles, log)
	log.Info("larkline running", "roles", joinRoles(roles, ","), "http", ops.Addr().String(),
		"api", rt.apiSrv.Addr().String(), "webhook", rt.hookSrv.Addr().String())

	ctx, cancel := context.WithCancel(ctx)
	r := &running{rt: rt, cancel: cancel, done: make(chan struct{})}
	fail := func(err error) {
		if err == nil || errors.Is(err, context.Canceled) {
			return
		}
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
		cancel() // one failed component stops the process: its supervisor restarts it
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); fail(ops.Run(ctx)) }()
	for _, c := range comps {
		wg.Add(1)
		go func() { defer wg.Done(); fail(c.Run(ctx)) }()
	}
	go func() {
		wg.Wait()
		closeAll()
		log.Info("larkline stopped")
		close(r.done)
	}()
	return r, nil
}

// logRetentionDecision logs, in every process, that retention was turned off and
// where that setting came from: retention is on by default, so off is a decision
// someone made, and it keeps chat text past the retention period (issue #19).
//
// With retention on, a process that runs no retention role warns too (issue #29):
// retention happens only where that role runs, so a deployment whose processes all
// leave it out keeps chat text forever although the setting says otherwise.
func logRetentionDecision(cfg *config.Config, roles []ids.Stage, log *slog.Logger) {
	const key = "services.workspace.timeline.lark.retention.enabled"
	r := cfg.Services.Workspace.Timeline.Lark.Retention
	switch {
	case !r.Enabled:
		log.Warn("evidence retention is turned off by configuration: chat text is kept past the retention period until it is turned on",
			"key", key, "origin", cfg.Origin(key), "evidence_retention", r.EvidenceRetention.String())
	case !slices.Contains(roles, ids.StageRetention):
		log.Warn("evidence retention is on but this process runs no retention role: make sure one process runs it, or chat text is kept past the retention period",
			"roles", joinRoles(roles, ","), "evidence_retention", r.EvidenceRetention.String())
	}
}

// stop cancels every component and waits for them to drain.
func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

// wait blocks until every component returned and reports their failures.
func (r *running) wait() error {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

func gokaFor(rt *runtime, suffix string) (*kafka.Goka, error) {
	o := rt.opts.goka
	o.Options = rt.opts.kafkaFor(suffix)
	o.Logger = rt.log
	return kafka.NewGoka(o)
}

// newWindowsProcessor builds the window processor of one version, with the geometry
// the version recorded, LevelDB state under windows.stateDir/<version> and its metrics
// on reg.
func newWindowsProcessor(rt *runtime, version string, window, grace time.Duration, reg *prometheus.Registry) (*windows.Processor, error) {
	g, err := gokaFor(rt, "windows-"+version)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(rt.opts.stateDir, version)
	copts, err := kafka.NewClientOptions(rt.opts.kafkaFor("windows-" + version + "-publisher"))
	if err != nil {
		return nil, err
	}
	o := rt.opts.windows
	o.ProcessorVersion, o.Window, o.Grace = version, window, grace
	o.Client, o.Brokers = copts, rt.opts.kafka.Brokers
	o.Codecs, o.Emitter = rt.codecs, g.EmitterOptions()
	o.Logger, o.Registry = rt.log.With("processor_version", version), reg
	o.Goka = append(g.ProcessorOptions(), goka.WithStorageBuilder(storage.DefaultBuilder(dir)))
	return windows.New(o)
}

// buildWorkspaces runs the workspace feed consumer and mounts the admin API.
func buildWorkspaces(ctx context.Context, rt *runtime) ([]component, error) {
	st, err := rt.store(ctx)
	if err != nil {
		return nil, err
	}
	applier, err := workspaces.NewApplier(st)
	if err != nil {
		return nil, err
	}
	guard, err := rt.chatGuard() // bindings of p2p chats are refused (issue #17)
	if err != nil {
		return nil, err
	}
	fo := rt.opts.workspaces
	fo.Codecs, fo.Applier, fo.Chats, fo.Logger, fo.Registry = rt.codecs, applier, guard, rt.log, rt.reg
	feed, err := workspaces.NewConsumer(fo)
	if err != nil {
		return nil, err
	}
	admin, err := workspaces.NewAdmin(st, workspaces.AdminOptions{Logger: rt.log, Chats: guard})
	if err != nil {
		return nil, err
	}
	ho := rt.opts.admin
	ho.Logger, ho.Registry, ho.Refresh = rt.log, rt.reg, rt.refresh
	h, err := workspaces.NewHandler(admin, ho)
	if err != nil {
		return nil, err
	}
	if err := rt.ops.Handle(workspaces.AdminPathPrefix, h); err != nil {
		return nil, err
	}
	return []component{feed}, nil
}

// held keeps a resource a role's components share (a Kafka client) until the role
// stops: its Run waits for ctx, its Close releases the resource.
type held func()

func (held) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (h held) Close() error                { h(); return nil }

// buildAPI mounts the timeline API and the web page on the ops server.
func buildAPI(ctx context.Context, rt *runtime) ([]component, error) {
	st, err := rt.store(ctx)
	if err != nil {
		return nil, err
	}
	o := rt.opts.api
	if o.CursorKey, err = cursorKey(rt.opts.cursorKey, rt.log); err != nil {
		return nil, err
	}
	o.Store, o.Logger, o.Registry = st, rt.log, rt.reg
	api, err := httpapi.New(o)
	if err != nil {
		return nil, err
	}
	if len(o.Tokens) == 0 {
		rt.log.Warn("timeline API refuses every request: no http.apiTokens configured")
	}
	return nil, api.Mount(rt.apiSrv)
}

// cursorKey is http.cursorKey, or a random key generated now (with a warning) when
// none is configured: cursors then do not survive a restart and are not accepted by
// another replica, but nobody can forge one (issue #19).
func cursorKey(k string, log *slog.Logger) ([]byte, error) {
	if k != "" {
		return []byte(k), nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating a cursor key: %w", err)
	}
	log.Warn("no http.cursorKey configured: generated a random key for API page cursors; cursors will not survive a restart and differ between api replicas (set http.cursorKey or http.cursorKeyFile)")
	return key, nil
}

// buildSynthesis runs the synthesis worker with the configured synthesizer (and each
// processor version's own, when it has one).
func buildSynthesis(ctx context.Context, rt *runtime) ([]component, error) {
	st, err := rt.store(ctx)
	if err != nil {
		return nil, err
	}
	syn, sum, err := newSynthesizer(rt.opts.synthesizer, "", rt.log, rt.reg)
	if err != nil {
		return nil, err
	}
	// Version 3 closed windows wait for the evidence sink's committed offsets.
	progress, err := newClient(rt.opts.kafkaFor("synthesis-sink-progress"))
	if err != nil {
		return nil, err
	}
	o := rt.opts.synthesis
	o.SinkProgress = &synthesis.KadmSinkProgress{Admin: kadm.NewClient(progress), Group: rt.opts.sink.Group, Topic: rt.opts.topics.Evidence}
	o.Store, o.Codecs, o.Synthesizer, o.Summarizer = st, rt.codecs, syn, sum
	// A processor version with settings of its own synthesizes with them (D31).
	o.Versions = &versionSettings{base: rt.opts.synthesizer, store: st, log: rt.log}
	o.Logger, o.Registry = rt.log, rt.reg
	w, err := synthesis.New(o)
	if err != nil {
		progress.Close()
		return nil, err
	}
	return []component{held(progress.Close), w}, nil // closed in reverse: the worker, then the client
}

// buildLag exports consumer lag of larkline's groups (one instance per deployment).
func buildLag(_ context.Context, rt *runtime) ([]component, error) {
	lo := rt.opts.lag
	lo.Logger, lo.Registry = rt.log, rt.reg
	exp, err := lagexport.New(lo)
	if err != nil {
		return nil, err
	}
	// The dead-letter metrics (issue #19): one exporter per deployment, like lag.
	dlc, err := newClient(rt.opts.kafkaFor("deadletters"))
	if err != nil {
		exp.Close()
		return nil, err
	}
	dl, err := deadletters.NewExporter(deadletters.ExporterOptions{Client: dlc, Codec: rt.codecs.DeadLetter,
		Topic: rt.opts.topics.DeadLetter, Registry: rt.reg, Logger: rt.log})
	if err != nil {
		dlc.Close()
		exp.Close()
		return nil, err
	}
	return []component{exp, held(dlc.Close), dl}, nil // closed in reverse: the dead-letter exporter, its client, the lag exporter
}

// buildRetention runs the retention job every interval when it is enabled (the
// default; turning it off is logged by every process at start).
func buildRetention(ctx context.Context, rt *runtime) ([]component, error) {
	if !rt.opts.retentionOn {
		// Not even built: its metrics would otherwise report a job that never succeeds.
		rt.log.Warn("retention role started but retention is disabled (services.workspace.timeline.lark.retention.enabled): it does nothing")
		return nil, nil
	}
	job, err := newRetentionJob(ctx, rt)
	if err != nil {
		return nil, err
	}
	return []component{job}, nil
}

func newRetentionJob(ctx context.Context, rt *runtime) (*retention.Job, error) {
	pool, err := rt.pool(ctx)
	if err != nil {
		return nil, err
	}
	o := rt.opts.retention
	o.Pool, o.Codecs, o.Logger, o.Registry = pool, rt.codecs, rt.log, rt.reg
	return retention.New(o)
}

// refresh is the admin API's manual refresh, served by this process's reconciler.
func (rt *runtime) refresh(ctx context.Context, ws ids.WorkspaceID) (any, error) {
	if rt.reconciler == nil {
		return nil, fmt.Errorf("%w: run the reconcile role in the same process as workspaces", workspaces.ErrRefreshUnavailable)
	}
	rep, err := rt.reconciler.Refresh(ctx, ws)
	switch {
	case errors.Is(err, reconcile.ErrUnknownWorkspace):
		return nil, fmt.Errorf("%w: %v", workspaces.ErrWorkspaceNotFound, err)
	case errors.Is(err, reconcile.ErrNotEnabled):
		return nil, fmt.Errorf("%w: %v", workspaces.ErrRefreshUnavailable, err)
	}
	return rep, err
}
