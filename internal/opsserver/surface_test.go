package opsserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/opsserver"
)

// TestReadyzCached (issue #29): within the cache TTL, however many requests come,
// the checks run once; concurrent requests share one run.
func TestReadyzCached(t *testing.T) {
	var calls atomic.Int64
	s := newServer(t, opsserver.Options{ReadinessCacheTTL: time.Hour})
	if err := s.AddReadiness("postgres", func(context.Context) error { calls.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	runServer(t, s)
	url := "http://" + s.Addr().String() + opsserver.PathReadyz
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			resp, err := http.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("the check ran %d times for 20 requests, want 1", n)
	}
}

// TestBareServer (issue #29): a bare server serves only what is mounted on it.
func TestBareServer(t *testing.T) {
	s := newServer(t, opsserver.Options{Bare: true})
	if err := s.Handle("POST /lark/events", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})); err != nil {
		t.Fatal(err)
	}
	runServer(t, s)
	base := "http://" + s.Addr().String()
	for _, path := range []string{opsserver.PathMetrics, opsserver.PathReadyz, opsserver.PathHealthz, "/api/v1/workspaces/x/timeline"} {
		if code, _, _ := get(t, base+path); code != http.StatusNotFound {
			t.Errorf("GET %s on a bare server: %d, want 404", path, code)
		}
	}
	resp, err := http.Post(base+"/lark/events", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the mounted handler answered %d", resp.StatusCode)
	}
	if _, err := opsserver.New(opsserver.Options{Addr: "127.0.0.1:0", Bare: true, Registry: prometheus.NewRegistry()}); err == nil {
		t.Fatal("a bare server with a registry was accepted")
	}
}

// TestProfiles: Go's profiles are served on the ops listener only when Profiling is
// on, and never by a bare server.
func TestProfiles(t *testing.T) {
	for _, tt := range []struct {
		name      string
		profiling bool
		want      int
	}{
		{"off by default", false, http.StatusNotFound},
		{"on", true, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, opsserver.Options{Profiling: tt.profiling})
			runServer(t, s)
			base := "http://" + s.Addr().String() + opsserver.PathProfiles
			for _, path := range []string{"", "heap?debug=1", "goroutine?debug=1", "cmdline", "symbol"} {
				code, _, body := get(t, base+path)
				if code != tt.want {
					t.Errorf("GET %s: %d, want %d", path, code, tt.want)
				}
				if tt.want == http.StatusOK && path == "heap?debug=1" && !strings.Contains(body, "heap profile") {
					t.Errorf("GET %s is not a heap profile: %.80q", path, body)
				}
			}
		})
	}
	if _, err := opsserver.New(opsserver.Options{Addr: "127.0.0.1:0", Bare: true, Profiling: true}); !errors.Is(err, opsserver.ErrInvalidOptions) {
		t.Fatalf("a bare server with profiles: error = %v, want ErrInvalidOptions", err)
	}
}
