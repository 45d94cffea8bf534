package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWebPageAndAssets(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, seededFake(), nil)
	cases := []struct {
		name, path  string
		want        int
		contentType string
		contains    string
	}{
		{"page", "/workspaces/ws-a", 200, "text/html; charset=utf-8", `<script src="/static/app.js" defer></script>`},
		{"page of an unknown workspace is still the page", "/workspaces/ws-unknown", 200, "text/html; charset=utf-8", "No timeline entries yet"},
		{"page with an invalid workspace id", "/workspaces/ws%20a", 404, "", ""},
		{"script", "/static/app.js", 200, "text/javascript; charset=utf-8", `"Authorization": "Bearer "`},
		{"style", "/static/app.css", 200, "text/css; charset=utf-8", ".kind-root_cause"},
		{"icon", "/static/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"unknown asset", "/static/nope.js", 404, "", ""},
		{"no directory listing", "/static/", 404, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, s, req{path: tc.path})
			if res.status != tc.want {
				t.Fatalf("status %d, want %d", res.status, tc.want)
			}
			if tc.want != 200 {
				return
			}
			if ct := res.header.Get("Content-Type"); ct != tc.contentType {
				t.Errorf("Content-Type %q, want %q", ct, tc.contentType)
			}
			if !strings.Contains(string(res.body), tc.contains) {
				t.Errorf("body lacks %q", tc.contains)
			}
			if res.header.Get("X-Content-Type-Options") != "nosniff" || res.header.Get("ETag") == "" {
				t.Errorf("headers: %v", res.header)
			}
			etag := res.header.Get("ETag")
			again := do(t, s, req{path: tc.path, header: http.Header{"If-None-Match": {etag}}})
			if again.status != http.StatusNotModified {
				t.Errorf("revalidation with the ETag: %d, want 304", again.status)
			}
		})
	}
	t.Run("page security headers", func(t *testing.T) {
		res := do(t, s, req{path: "/workspaces/ws-a"})
		csp := res.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if res.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("Referrer-Policy %q", res.header.Get("Referrer-Policy"))
		}
	})
	t.Run("the page needs no token and serves no data", func(t *testing.T) {
		res := do(t, s, req{path: "/workspaces/ws-a"})
		for _, data := range []string{"Entry 1 title", "AI summary of ws-a"} {
			if strings.Contains(string(res.body), data) {
				t.Fatalf("the static page carries workspace data %q", data)
			}
		}
	})
}

// muxMounter adapts a ServeMux to Mounter, reporting conflicts as errors.
type muxMounter struct{ mux *http.ServeMux }

func (m muxMounter) Handle(pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	m.mux.Handle(pattern, h)
	return nil
}

func TestMountOnASharedMux(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, seededFake(), nil)
	shared := http.NewServeMux()
	// An admin route of another package under the same prefix, mounted first.
	shared.HandleFunc("PUT /api/v1/workspaces/{workspace}/bindings", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	if err := s.Mount(muxMounter{shared}); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	if err := s.Mount(muxMounter{shared}); err == nil {
		t.Fatal("mounting twice must report the conflict")
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/api/v1/workspaces/ws-a/timeline", 200},
		{http.MethodPut, "/api/v1/workspaces/ws-a/bindings", http.StatusTeapot},
		{http.MethodGet, "/workspaces/ws-a", 200},
		{http.MethodGet, "/static/app.css", 200},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		r.Header.Set("Authorization", "Bearer "+tokA)
		w := httptest.NewRecorder()
		shared.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, w.Code, c.want)
		}
	}
}
