package opsserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/options"
)

// Paths of the endpoints the server owns.
const (
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
	// PathLivez is PathHealthz under the name Kubernetes components use (the Helm
	// chart's liveness probe).
	PathLivez  = "/livez"
	PathReadyz = "/readyz"
	// PathProfiles is where Options.Profiling mounts net/http/pprof.
	PathProfiles = "/debug/pprof/"
)

// Defaults applied to zero [Options] fields.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultReadinessTimeout  = 2 * time.Second
	DefaultShutdownTimeout   = 15 * time.Second
	DefaultReadinessCacheTTL = 2 * time.Second
)

var (
	// ErrInvalidOptions is returned (wrapped) by New for unusable options.
	ErrInvalidOptions = errors.New("invalid ops server options")
	// ErrInvalidHandler is returned (wrapped) by Handle and AddReadiness for a bad
	// pattern, a nil handler or check, or a name or pattern already taken.
	ErrInvalidHandler = errors.New("invalid handler registration")
	// ErrAlreadyRunning is returned by Run when it is called a second time.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
	// ErrClosed is returned by Run after Close.
	ErrClosed = errors.New("ops server closed")
	// ErrShutdownTimeout is returned (wrapped) by Run when in-flight requests did not
	// finish within the shutdown timeout and their connections were closed.
	ErrShutdownTimeout = errors.New("ops server shutdown timed out")
)

// Options configure a Server. Zero durations take the Default* values.
type Options struct {
	// Addr is the TCP address to listen on, such as "127.0.0.1:8080" or
	// "127.0.0.1:0". Required unless Listener is set.
	Addr string
	// Listener, when set, is served instead of listening on Addr. The server owns it
	// and closes it.
	Listener net.Listener
	// Registry is exposed on /metrics and receives the server's request metrics
	// (larkline_http_*, larkline_readiness_check_failures_total), so one registry
	// serves one Server. Nil: /metrics is not mounted and nothing is registered.
	Registry *prometheus.Registry
	// Logger receives server errors and failed readiness checks. Nil discards.
	Logger *slog.Logger

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// ReadinessTimeout bounds each readiness check.
	ReadinessTimeout time.Duration
	// ShutdownTimeout bounds the graceful drain after Run's context is cancelled.
	ShutdownTimeout time.Duration
	// ReadinessCacheTTL: a /readyz answer is reused for this long, and concurrent
	// requests share one run of the checks, so the network cannot make the process
	// ping its dependencies without bound (issue #29). Default
	// DefaultReadinessCacheTTL.
	ReadinessCacheTTL time.Duration
	// Bare serves only what is mounted with Handle: no /healthz, /readyz or
	// /metrics (a listener for the public webhook, or for the API, issue #29).
	// Registry must be nil then.
	Bare bool
	// Profiling mounts Go's profiles (net/http/pprof) under PathProfiles, for an
	// operator who must see where a stage spends its CPU. Off by default: a profile
	// costs CPU while it is taken and shows the process's code paths (never data).
	// Not with Bare.
	Profiling bool
}

// Server is the ops HTTP server. Its methods are safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	ln      net.Listener
	mux     *http.ServeMux
	srv     *http.Server
	metrics *requestMetrics

	// ready serializes readiness runs and holds the last answer (readyAt zero: none).
	ready struct {
		sync.Mutex
		at   time.Time
		body Readiness
	}

	life     *lifecycle.State
	mu       sync.Mutex
	checks   map[string]func(context.Context) error
	draining bool
}

// New validates opts, binds the listener and returns a Server ready to Run.
func New(opts Options) (*Server, error) {
	// The server owns an injected listener from here on, also when New fails.
	fail := func(err error) (*Server, error) {
		if opts.Listener != nil {
			_ = opts.Listener.Close()
		}
		return nil, err
	}
	if err := opts.withDefaults(); err != nil {
		return fail(err)
	}

	s := &Server{
		life:   lifecycle.New("ops server", lifecycle.Once, ErrClosed),
		opts:   opts,
		log:    logging.OrDiscard(opts.Logger),
		mux:    http.NewServeMux(),
		checks: make(map[string]func(context.Context) error),
	}
	if opts.Registry != nil {
		m, err := newRequestMetrics(opts.Registry)
		if err != nil {
			return fail(err)
		}
		s.metrics = m
	}
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}

	if !opts.Bare {
		if err := s.mountOps(); err != nil {
			return fail(err)
		}
	}

	s.ln = opts.Listener
	if s.ln == nil {
		ln, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			return nil, fmt.Errorf("ops server listening on %s: %w", opts.Addr, err)
		}
		s.ln = ln
	}
	return s, nil
}

// withDefaults fills the defaults of opts and reports every bad value at once.
func (opts *Options) withDefaults() error {
	p := new(options.Problems)
	p.Durations(
		options.Duration{Name: "ReadHeaderTimeout", V: &opts.ReadHeaderTimeout, Default: DefaultReadHeaderTimeout},
		options.Duration{Name: "ReadTimeout", V: &opts.ReadTimeout, Default: DefaultReadTimeout},
		options.Duration{Name: "WriteTimeout", V: &opts.WriteTimeout, Default: DefaultWriteTimeout},
		options.Duration{Name: "IdleTimeout", V: &opts.IdleTimeout, Default: DefaultIdleTimeout},
		options.Duration{Name: "ReadinessTimeout", V: &opts.ReadinessTimeout, Default: DefaultReadinessTimeout},
		options.Duration{Name: "ShutdownTimeout", V: &opts.ShutdownTimeout, Default: DefaultShutdownTimeout},
		options.Duration{Name: "ReadinessCacheTTL", V: &opts.ReadinessCacheTTL, Default: DefaultReadinessCacheTTL},
	)
	if opts.Bare && opts.Registry != nil {
		p.Add("Registry", nil, "must be nil for a bare server (one registry serves one Server)")
	}
	if opts.Bare && opts.Profiling {
		p.Add("Profiling", true, "must be off for a bare server (profiles belong on the ops listener)")
	}
	switch {
	case opts.MaxHeaderBytes < 0:
		p.Add("MaxHeaderBytes", opts.MaxHeaderBytes, "must not be negative")
	case opts.MaxHeaderBytes == 0:
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.Listener == nil && opts.Addr == "" {
		p.Add("Addr", nil, "or Listener must be set")
	}
	return p.Err(ErrInvalidOptions)
}

// mountOps mounts the ops endpoints: health, readiness, and the metrics of the
// registry when there is one.
func (s *Server) mountOps() error {
	if err := s.mount("GET "+PathHealthz, http.HandlerFunc(s.serveHealthz)); err != nil {
		return err
	}
	if err := s.mount("GET "+PathLivez, http.HandlerFunc(s.serveHealthz)); err != nil {
		return err
	}
	if err := s.mount("GET "+PathReadyz, http.HandlerFunc(s.serveReadyz)); err != nil {
		return err
	}
	if s.opts.Profiling {
		if err := s.mountProfiles(); err != nil {
			return err
		}
	}
	if s.opts.Registry == nil {
		return nil
	}
	h := promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
	return s.mount("GET "+PathMetrics, h)
}

// mountProfiles mounts net/http/pprof's handlers, as its init does on
// http.DefaultServeMux (which larkline never serves).
func (s *Server) mountProfiles() error {
	for path, h := range map[string]http.HandlerFunc{
		PathProfiles:             pprof.Index, // also every named profile: heap, goroutine, …
		PathProfiles + "cmdline": pprof.Cmdline,
		PathProfiles + "profile": pprof.Profile,
		PathProfiles + "symbol":  pprof.Symbol,
		PathProfiles + "trace":   pprof.Trace,
	} {
		if err := s.mount("GET "+path, h); err != nil {
			return err
		}
	}
	return nil
}

// Addr is the address the server listens on, with the port the system chose when
// the configured port was 0.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Handler is the server's full handler (its mux), for tests with httptest.
func (s *Server) Handler() http.Handler { return s.mux }

// Handle mounts h on pattern (http.ServeMux syntax, e.g. "POST /lark/events" or
// "/api/"). It returns a wrapped ErrInvalidHandler for a nil handler or a pattern the
// mux rejects, such as one that conflicts with an earlier registration.
func (s *Server) Handle(pattern string, h http.Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler for %q", ErrInvalidHandler, pattern)
	}
	return s.mount(pattern, h)
}

func (s *Server) mount(pattern string, h http.Handler) (err error) {
	if strings.TrimSpace(pattern) == "" {
		return fmt.Errorf("%w: empty pattern", ErrInvalidHandler)
	}
	if s.metrics != nil {
		h = s.metrics.instrument(pattern, h)
	}
	// ServeMux.Handle panics on an invalid or conflicting pattern; that is an error
	// of the caller's wiring, returned rather than crashing the process.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %q: %v", ErrInvalidHandler, pattern, r)
		}
	}()
	s.mux.Handle(pattern, h)
	return nil
}

// AddReadiness registers a named readiness check run by /readyz. The check gets a
// context bounded by the readiness timeout and returns nil when the dependency is
// usable. Names must be unique and non-empty; they appear in the /readyz body and in
// logs, so they must not contain secrets. A failing check's error is logged (never
// sent to the client), so it must not contain secrets either.
func (s *Server) AddReadiness(name string, check func(ctx context.Context) error) error {
	if name == "" || check == nil {
		return fmt.Errorf("%w: readiness check needs a name and a function (name %q)", ErrInvalidHandler, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.checks[name]; dup {
		return fmt.Errorf("%w: readiness check %q already registered", ErrInvalidHandler, name)
	}
	s.checks[name] = check
	return nil
}

// Run serves until ctx is cancelled, then stops accepting connections, answers
// /readyz with 503, and waits up to the shutdown timeout for in-flight requests.
// Requests are not cancelled by ctx; they are cut only if the drain times out, in
// which case Run returns a wrapped ErrShutdownTimeout. Run returns nil after a clean
// drain and an error when serving fails. It may be called once.
func (s *Server) Run(ctx context.Context) error {
	ctx, end, err := s.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()

	s.srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.srv.Serve(s.ln) }()

	select {
	case err := <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			return ErrClosed
		}
		return fmt.Errorf("ops server serving on %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}

	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	err = s.srv.Shutdown(shutdownCtx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-serveErr
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w after %v: %w", ErrShutdownTimeout, s.opts.ShutdownTimeout, err)
		}
		return fmt.Errorf("ops server shutting down: %w", err)
	}
	return nil
}

// Close stops the server at once: it closes the listener and every connection
// without draining, and waits for a running Run to return. Use it when Run was never
// started or to abandon a drain.
func (s *Server) Close() error {
	err := s.srv.Close() // closes listeners Serve was given and all connections
	s.life.Close()       // Run returns at once: its Serve or Shutdown sees the server closed
	if lerr := s.ln.Close(); lerr != nil && !errors.Is(lerr, net.ErrClosed) {
		err = errors.Join(err, lerr) // Run never served it
	}
	if err != nil {
		return fmt.Errorf("closing ops server: %w", err)
	}
	return nil
}

func (s *Server) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// Readiness is the JSON body of /readyz.
type Readiness struct {
	// Status is "ready", "not ready" or "shutting down".
	Status string `json:"status"`
	// Checks lists every registered check, sorted by name.
	Checks []CheckResult `json:"checks"`
	// Failing names the checks that did not pass, sorted.
	Failing []string `json:"failing,omitempty"`
}

// CheckResult is the outcome of one readiness check.
type CheckResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Failure classifies a failed check: "error", "timeout" or "panic". The error
	// itself is logged, never returned to the client.
	Failure    string  `json:"failure,omitempty"`
	DurationMS float64 `json:"durationMs"`
}

// Readiness statuses.
const (
	StatusReady        = "ready"
	StatusNotReady     = "not ready"
	StatusShuttingDown = "shutting down"
)

func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	body := s.readiness(r.Context())
	code := http.StatusOK
	switch {
	case draining:
		body.Status, code = StatusShuttingDown, http.StatusServiceUnavailable
	case len(body.Failing) > 0:
		body.Status, code = StatusNotReady, http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// readiness runs the checks, or returns the answer of a run less than
// ReadinessCacheTTL old; concurrent callers wait for one run.
func (s *Server) readiness(ctx context.Context) Readiness {
	s.ready.Lock()
	defer s.ready.Unlock()
	if !s.ready.at.IsZero() && time.Since(s.ready.at) < s.opts.ReadinessCacheTTL {
		return s.ready.body
	}
	// The checks run for the server, not for this request: a caller that hangs up
	// does not fail them for the others sharing the answer.
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	fns := make([]func(context.Context) error, 0, len(s.checks))
	for name := range s.checks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fns = append(fns, s.checks[name])
	}
	s.mu.Unlock()

	body := Readiness{Status: StatusReady, Checks: make([]CheckResult, len(names))}
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() { body.Checks[i] = s.runCheck(ctx, names[i], fns[i]) })
	}
	wg.Wait()
	for _, c := range body.Checks {
		if !c.OK {
			body.Failing = append(body.Failing, c.Name)
		}
	}
	s.ready.at, s.ready.body = time.Now(), body
	return body
}

func (s *Server) runCheck(parent context.Context, name string, check func(context.Context) error) CheckResult {
	ctx, cancel := context.WithTimeout(parent, s.opts.ReadinessTimeout)
	defer cancel()
	start := time.Now()
	type outcome struct {
		err      error
		panicked bool
	}
	done := make(chan outcome, 1) // buffered: a check that ignores ctx cannot block forever on send
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{err: fmt.Errorf("panic: %v", r), panicked: true}
			}
		}()
		done <- outcome{err: check(ctx)}
	}()

	res := CheckResult{Name: name}
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		o = outcome{err: ctx.Err()}
	}
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	switch {
	case o.err == nil:
		res.OK = true
		return res
	case o.panicked:
		res.Failure = "panic"
	case errors.Is(o.err, context.DeadlineExceeded) && ctx.Err() != nil:
		res.Failure = "timeout"
	default:
		res.Failure = "error"
	}
	s.log.Warn("readiness check failed", "check", name, "failure", res.Failure, "error", o.err)
	if s.metrics != nil {
		s.metrics.readinessFailures.WithLabelValues(name, res.Failure).Inc()
	}
	return res
}
