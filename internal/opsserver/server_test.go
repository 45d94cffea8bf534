package opsserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/opsserver"
	"github.com/larkline/larkline/internal/testenv"
)

func newServer(t *testing.T, opts opsserver.Options) *opsserver.Server {
	t.Helper()
	if opts.Addr == "" && opts.Listener == nil {
		opts.Addr = "127.0.0.1:0"
	}
	s, err := opsserver.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runServer starts Run in the background and returns a function that cancels it and
// returns Run's result.
func runServer(t *testing.T, s *opsserver.Server) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    opsserver.Options
		wantErr error // nil with fails: any error
		fails   bool
	}{
		{name: "loopback port 0", opts: opsserver.Options{Addr: "127.0.0.1:0"}},
		{name: "no address", opts: opsserver.Options{}, wantErr: opsserver.ErrInvalidOptions, fails: true},
		{name: "negative timeout", opts: opsserver.Options{Addr: "127.0.0.1:0", ShutdownTimeout: -time.Second}, wantErr: opsserver.ErrInvalidOptions, fails: true},
		{name: "negative header bytes", opts: opsserver.Options{Addr: "127.0.0.1:0", MaxHeaderBytes: -1}, wantErr: opsserver.ErrInvalidOptions, fails: true},
		{name: "unparsable address", opts: opsserver.Options{Addr: "127.0.0.1:notaport"}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := opsserver.New(tt.opts)
			if !tt.fails {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer s.Close()
				if strings.HasSuffix(s.Addr().String(), ":0") {
					t.Errorf("Addr = %v, want the bound port", s.Addr())
				}
				return
			}
			if err == nil {
				_ = s.Close()
				t.Fatal("New succeeded, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("New error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewAddressInUse(t *testing.T) {
	first := newServer(t, opsserver.Options{})
	if _, err := opsserver.New(opsserver.Options{Addr: first.Addr().String()}); err == nil {
		t.Fatal("New bound an address already in use")
	}
}

func TestNewDuplicateRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	newServer(t, opsserver.Options{Registry: reg})
	_, err := opsserver.New(opsserver.Options{Addr: "127.0.0.1:0", Registry: reg})
	if !errors.Is(err, opsserver.ErrInvalidOptions) {
		t.Fatalf("second server on one registry: error = %v, want ErrInvalidOptions", err)
	}
}

func TestHealthzAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	probe := prometheus.NewCounter(prometheus.CounterOpts{Name: "larkline_test_probe_total", Help: "probe"})
	reg.MustRegister(probe)
	probe.Add(3)
	s := newServer(t, opsserver.Options{Registry: reg})
	runServer(t, s)
	base := "http://" + s.Addr().String()

	code, hdr, body := get(t, base+opsserver.PathHealthz)
	if code != http.StatusOK || body != "ok\n" || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("/healthz = %d %q (headers %v)", code, body, hdr)
	}
	if code, _, body := get(t, base+opsserver.PathLivez); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/livez = %d %q, want /healthz's answer (the chart's liveness probe)", code, body)
	}
	code, _, body = get(t, base+opsserver.PathMetrics)
	if code != http.StatusOK || !strings.Contains(body, "larkline_test_probe_total 3") {
		t.Errorf("/metrics = %d, body lacks injected metric:\n%s", code, body)
	}
	if got := handlerRequests(t, reg, "GET "+opsserver.PathHealthz); got != 1 {
		t.Errorf("requests counted for /healthz = %v, want 1", got)
	}
	resp, err := http.Post(base+opsserver.PathHealthz, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", resp.StatusCode)
	}
}

// handlerRequests sums larkline_http_requests_total for one mounted pattern.
func handlerRequests(t *testing.T, reg *prometheus.Registry, pattern string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "larkline_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" && l.GetValue() == pattern {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func TestNoRegistryNoMetricsEndpoint(t *testing.T) {
	s := newServer(t, opsserver.Options{})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, opsserver.PathMetrics, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/metrics without registry = %d, want 404", rec.Code)
	}
}

func TestReadyz(t *testing.T) {
	errDown := errors.New("dial tcp 10.0.0.1:5432: password=hunter2 refused")
	tests := []struct {
		name        string
		checks      map[string]func(context.Context) error
		wantCode    int
		wantStatus  string
		wantFailing []string
		wantFailure map[string]string
	}{
		{name: "no checks is ready", wantCode: 200, wantStatus: opsserver.StatusReady},
		{
			name:       "all pass",
			checks:     map[string]func(context.Context) error{"kafka": ok, "postgres": ok},
			wantCode:   200,
			wantStatus: opsserver.StatusReady,
		},
		{
			name: "one fails, one times out, one panics",
			checks: map[string]func(context.Context) error{
				"kafka":    ok,
				"postgres": func(context.Context) error { return errDown },
				"lark":     func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
				"cache":    func(context.Context) error { panic("boom") },
			},
			wantCode:    503,
			wantStatus:  opsserver.StatusNotReady,
			wantFailing: []string{"cache", "lark", "postgres"},
			wantFailure: map[string]string{"postgres": "error", "lark": "timeout", "cache": "panic"},
		},
		{
			name: "check ignoring its context still times out",
			checks: map[string]func(context.Context) error{
				"stuck": func(context.Context) error { select {} },
			},
			wantCode:    503,
			wantStatus:  opsserver.StatusNotReady,
			wantFailing: []string{"stuck"},
			wantFailure: map[string]string{"stuck": "timeout"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, opsserver.Options{ReadinessTimeout: 50 * time.Millisecond})
			for name, c := range tt.checks {
				if err := s.AddReadiness(name, c); err != nil {
					t.Fatal(err)
				}
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, opsserver.PathReadyz, nil))
			if rec.Code != tt.wantCode {
				t.Errorf("code = %d, want %d", rec.Code, tt.wantCode)
			}
			raw := rec.Body.String()
			if strings.Contains(raw, "hunter2") || strings.Contains(raw, "10.0.0.1") {
				t.Errorf("readiness body leaks the check error: %s", raw)
			}
			var body opsserver.Readiness
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", raw, err)
			}
			if body.Status != tt.wantStatus {
				t.Errorf("status = %q, want %q", body.Status, tt.wantStatus)
			}
			if strings.Join(body.Failing, ",") != strings.Join(tt.wantFailing, ",") {
				t.Errorf("failing = %v, want %v", body.Failing, tt.wantFailing)
			}
			if len(body.Checks) != len(tt.checks) {
				t.Errorf("checks listed = %d, want %d", len(body.Checks), len(tt.checks))
			}
			for _, c := range body.Checks {
				if want := tt.wantFailure[c.Name]; c.Failure != want || c.OK != (want == "") {
					t.Errorf("check %s = ok %v failure %q, want failure %q", c.Name, c.OK, c.Failure, want)
				}
			}
		})
	}
}

func ok(context.Context) error { return nil }

func TestReadinessFailureMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newServer(t, opsserver.Options{Registry: reg})
	if err := s.AddReadiness("postgres", func(context.Context) error { return errors.New("down") }); err != nil {
		t.Fatal(err)
	}
	s.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, opsserver.PathReadyz, nil))
	const want = `
# HELP larkline_readiness_check_failures_total Failed readiness checks, by check name and failure class (error, timeout, panic).
# TYPE larkline_readiness_check_failures_total counter
larkline_readiness_check_failures_total{check="postgres",failure="error"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "larkline_readiness_check_failures_total"); err != nil {
		t.Error(err)
	}
}

func TestRegistrationErrors(t *testing.T) {
	s := newServer(t, opsserver.Options{})
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if err := s.Handle("POST /lark/events", h); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{"nil handler", s.Handle("/api/", nil)},
		{"empty pattern", s.Handle("", h)},
		{"duplicate pattern", s.Handle("POST /lark/events", h)},
		{"conflicts with ops endpoint", s.Handle("GET /healthz", h)},
		{"invalid pattern", s.Handle("GET /{bad", h)},
		{"unnamed check", s.AddReadiness("", ok)},
		{"nil check", s.AddReadiness("kafka", nil)},
	}
	if err := s.AddReadiness("kafka", ok); err != nil {
		t.Fatalf("AddReadiness: %v", err)
	}
	tests = append(tests, struct {
		name string
		err  error
	}{"duplicate check", s.AddReadiness("kafka", ok)})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, opsserver.ErrInvalidHandler) {
				t.Errorf("error = %v, want ErrInvalidHandler", tt.err)
			}
		})
	}
}

func TestMountedHandlerServed(t *testing.T) {
	s := newServer(t, opsserver.Options{Registry: prometheus.NewRegistry()})
	if err := s.Handle("GET /api/v1/hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	})); err != nil {
		t.Fatal(err)
	}
	runServer(t, s)
	code, _, body := get(t, "http://"+s.Addr().String()+"/api/v1/hello")
	if code != 200 || body != "hi" {
		t.Errorf("mounted handler = %d %q", code, body)
	}
	code, _, _ = get(t, "http://"+s.Addr().String()+"/nope")
	if code != http.StatusNotFound {
		t.Errorf("unknown path = %d, want 404", code)
	}
}

// TestGracefulShutdownDrains proves an in-flight request completes after Run's
// context is cancelled, that /readyz reports draining meanwhile, and that new
// connections are refused once Run returned.
func TestGracefulShutdownDrains(t *testing.T) {
	s := newServer(t, opsserver.Options{ShutdownTimeout: time.Minute})
	entered := make(chan struct{})
	release := make(chan struct{})
	if err := s.Handle("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		if r.Context().Err() != nil {
			http.Error(w, "request context cancelled by shutdown", 500)
			return
		}
		_, _ = io.WriteString(w, "done")
	})); err != nil {
		t.Fatal(err)
	}
	stop := runServer(t, s)
	base := "http://" + s.Addr().String()

	type result struct {
		code int
		body string
		err  error
	}
	slow := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			slow <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		slow <- result{code: resp.StatusCode, body: string(b), err: err}
	}()
	<-entered

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	// While draining, readiness answers 503 (checked through the handler: the
	// listener no longer accepts).
	waitDraining(t, s)

	close(release)
	r := <-slow
	if r.err != nil || r.code != 200 || r.body != "done" {
		t.Errorf("in-flight request = %d %q %v, want 200 done", r.code, r.body, r.err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Run = %v, want nil after a clean drain", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("listener still accepts after Run returned")
	}
}

func waitDraining(t *testing.T, s *opsserver.Server) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "the server reporting draining", func() bool {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, opsserver.PathReadyz, nil))
		return rec.Code == http.StatusServiceUnavailable && strings.Contains(rec.Body.String(), opsserver.StatusShuttingDown)
	})
}

func TestShutdownTimeoutCutsStuckRequest(t *testing.T) {
	s := newServer(t, opsserver.Options{ShutdownTimeout: 20 * time.Millisecond})
	entered := make(chan struct{})
	if err := s.Handle("GET /stuck", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // released only when the connection is closed
	})); err != nil {
		t.Fatal(err)
	}
	stop := runServer(t, s)
	go func() {
		resp, err := http.Get("http://" + s.Addr().String() + "/stuck")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if err := stop(); !errors.Is(err, opsserver.ErrShutdownTimeout) {
		t.Errorf("Run = %v, want ErrShutdownTimeout", err)
	}
}

func TestRunLifecycleErrors(t *testing.T) {
	t.Run("second Run", func(t *testing.T) {
		s := newServer(t, opsserver.Options{})
		runServer(t, s)
		// A served request proves the first Run is serving.
		if code, _, _ := get(t, "http://"+s.Addr().String()+opsserver.PathHealthz); code != 200 {
			t.Fatalf("/healthz = %d", code)
		}
		if err := s.Run(t.Context()); !errors.Is(err, opsserver.ErrAlreadyRunning) {
			t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
		}
	})
	t.Run("Run after Close", func(t *testing.T) {
		s := newServer(t, opsserver.Options{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Run(t.Context()); !errors.Is(err, opsserver.ErrClosed) {
			t.Errorf("Run after Close = %v, want ErrClosed", err)
		}
		if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
			t.Error("listener accepts after Close")
		}
	})
	t.Run("Close during Run", func(t *testing.T) {
		s := newServer(t, opsserver.Options{})
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background()) }()
		if code, _, _ := get(t, "http://"+s.Addr().String()+opsserver.PathHealthz); code != 200 {
			t.Fatalf("/healthz = %d", code)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, opsserver.ErrClosed) {
			t.Errorf("Run after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("injected listener", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := newServer(t, opsserver.Options{Listener: ln})
		if s.Addr().String() != ln.Addr().String() {
			t.Errorf("Addr = %v, want the injected listener's %v", s.Addr(), ln.Addr())
		}
		stop := runServer(t, s)
		code, _, _ := get(t, "http://"+s.Addr().String()+opsserver.PathHealthz)
		if code != 200 {
			t.Errorf("/healthz = %d", code)
		}
		if err := stop(); err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}
