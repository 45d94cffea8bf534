package opsserver_test

import (
	"context"
	"net/http"
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
