package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// routes lists every API route with a request that succeeds for an authorised caller
// of wsA on the fake store.
var apiRoutes = []struct {
	name, method, path, body string
}{
	{"evidence", http.MethodGet, "/api/v1/workspaces/%s/evidence", ""},
	{"timeline", http.MethodGet, "/api/v1/workspaces/%s/timeline", ""},
	{"patch entry", http.MethodPatch, "/api/v1/workspaces/%s/timeline/1", `{"status":"confirmed"}`},
	{"get summary", http.MethodGet, "/api/v1/workspaces/%s/summary", ""},
	{"put summary", http.MethodPut, "/api/v1/workspaces/%s/summary", `{"text":"All customers recovered."}`},
}

func seededFake() *fakeStore {
	f := newFakeStore(wsA, wsB, "ws-c")
	for _, ws := range f.workspaces {
		f.summaries[ws.ID] = storeSummary(ws.ID)
	}
	f.entries[1] = storeEntry(wsA, 1)
	f.entries[2] = storeEntry(wsB, 2)
	f.entries[3] = storeEntry("ws-c", 3)
	return f
}

func TestAccessRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		noTokens   bool
		auth       []string // Authorization header values; nil: none
		ws         string
		wantStatus int
		wantCode   string
		wantReach  bool // the request reaches the store beyond the workspace lookup
	}{
		{name: "no tokens configured, no header", noTokens: true, ws: "ws-a", wantStatus: 403, wantCode: codeAPIDisabled},
		{name: "no tokens configured, any token", noTokens: true, auth: []string{"Bearer " + tokAll}, ws: "ws-a", wantStatus: 403, wantCode: codeAPIDisabled},
		{name: "missing token", ws: "ws-a", wantStatus: 401, wantCode: codeMissingToken},
		{name: "empty bearer", auth: []string{"Bearer "}, ws: "ws-a", wantStatus: 401, wantCode: codeInvalidToken},
		{name: "other scheme", auth: []string{"Basic " + tokA}, ws: "ws-a", wantStatus: 401, wantCode: codeInvalidToken},
		{name: "bare token without scheme", auth: []string{tokA}, ws: "ws-a", wantStatus: 401, wantCode: codeInvalidToken},
		{name: "unknown token", auth: []string{"Bearer not-a-configured-token"}, ws: "ws-a", wantStatus: 401, wantCode: codeInvalidToken},
		{name: "the hash itself is not the token", auth: []string{"Bearer " + sha(tokA)}, ws: "ws-a", wantStatus: 401, wantCode: codeInvalidToken},
		{name: "two Authorization headers", auth: []string{"Bearer " + tokA, "Bearer " + tokA}, ws: "ws-a", wantStatus: 401, wantCode: codeInvalidToken},
		{name: "token of another workspace", auth: []string{"Bearer " + tokB}, ws: "ws-a", wantStatus: 403, wantCode: codeForbiddenWorkspace},
		{name: "scoped token on a third workspace", auth: []string{"Bearer " + tokA}, ws: "ws-c", wantStatus: 403, wantCode: codeForbiddenWorkspace},
		{name: "invalid workspace id", auth: []string{"Bearer " + tokAll}, ws: "ws%20a", wantStatus: 400, wantCode: codeInvalidWorkspaceID},
		{name: "scoped token, unknown workspace it lists", auth: []string{"Bearer " + tokA}, ws: "ws-absent", wantStatus: 404, wantCode: codeWorkspaceNotFound},
		{name: "wildcard token, unknown workspace", auth: []string{"Bearer " + tokAll}, ws: "ws-nowhere", wantStatus: 404, wantCode: codeWorkspaceNotFound},
		{name: "scoped token on its workspace", auth: []string{"Bearer " + tokA}, ws: "ws-a", wantStatus: 200, wantReach: true},
		{name: "wildcard token on any workspace", auth: []string{"Bearer " + tokAll}, ws: "ws-c", wantStatus: 200, wantReach: true},
		{name: "scheme is case-insensitive", auth: []string{"bearer " + tokA}, ws: "ws-a", wantStatus: 200, wantReach: true},
		{name: "surrounding spaces are ignored", auth: []string{"  Bearer   " + tokA + "  "}, ws: "ws-a", wantStatus: 200, wantReach: true},
	}
	for _, tc := range cases {
		for _, rt := range apiRoutes {
			t.Run(tc.name+"/"+rt.name, func(t *testing.T) {
				t.Parallel()
				f := seededFake()
				// Entry 1 is in ws-a; for other workspaces patch their own entry.
				path := strings.Replace(rt.path, "%s", tc.ws, 1)
				if rt.name == "patch entry" && tc.ws == "ws-c" {
					path = strings.Replace(path, "/timeline/1", "/timeline/3", 1)
				}
				s, _ := newTestServer(t, f, func(o *Options) {
					if tc.noTokens {
						o.Tokens = nil
					}
				})
				res := do(t, s, req{method: rt.method, path: path, body: rt.body, header: http.Header{"Authorization": tc.auth}})
				if res.status != tc.wantStatus {
					t.Fatalf("status %d, want %d: %s", res.status, tc.wantStatus, res.body)
				}
				if tc.wantCode != "" {
					if got := res.errorCode(t); got != tc.wantCode {
						t.Fatalf("code %q, want %q", got, tc.wantCode)
					}
				}
				if res.status == http.StatusUnauthorized && !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 without a Bearer challenge: %q", res.header.Get("WWW-Authenticate"))
				}
				calls := f.callNames()
				reached := slices.ContainsFunc(calls, func(c string) bool { return c != "GetWorkspace" })
				if reached != tc.wantReach {
					t.Errorf("store calls %v; want the handler reached: %v", calls, tc.wantReach)
				}
				if tc.wantStatus == 401 || tc.wantStatus == 403 || tc.wantStatus == 400 {
					if len(calls) != 0 {
						t.Errorf("a refused request touched the store: %v", calls)
					}
				}
			})
		}
	}
}

func TestRefusalsAreCountedAndLoggedWithoutTokens(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s, logs := newTestServer(t, seededFake(), func(o *Options) { o.Registry = reg })
	do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline"})
	do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: "wrong-token-secret"})
	do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: tokB})
	do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: tokB})

	if n, err := testutil.GatherAndCount(reg, "larkline_api_auth_refusals_total"); err != nil || n != 3 {
		t.Fatalf("registry holds %d refusal series (%v), want 3", n, err)
	}
	for reason, want := range map[string]float64{codeMissingToken: 1, codeInvalidToken: 1, codeForbiddenWorkspace: 2} {
		if got := testutil.ToFloat64(s.metrics.refusals.WithLabelValues(reason)); got != want {
			t.Errorf("refusals{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	out := logs.String()
	for _, secret := range []string{tokB, "wrong-token-secret", sha(tokB)} {
		if strings.Contains(out, secret) {
			t.Fatalf("logs carry a token or its hash:\n%s", out)
		}
	}
	if !strings.Contains(out, `"token":"ops-b"`) || !strings.Contains(out, `"reason":"forbidden_workspace"`) {
		t.Errorf("the forbidden request is not audited by token name:\n%s", out)
	}
}

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	good := Token{Name: "ops", SHA256: sha("x"), Workspaces: []string{"ws-a"}}
	cases := []struct {
		name   string
		mutate func(*Options)
		ok     bool
	}{
		{"valid", func(*Options) {}, true},
		{"no tokens is allowed (the API refuses everything)", func(o *Options) { o.Tokens = nil }, true},
		{"upper-case hash is accepted", func(o *Options) {
			o.Tokens = []Token{{Name: "u", SHA256: strings.ToUpper(sha("x")), Workspaces: []string{"*"}}}
		}, true},
		{"nil store", func(o *Options) { o.Store = nil }, false},
		{"token without name", func(o *Options) { o.Tokens = []Token{{SHA256: sha("x"), Workspaces: []string{"*"}}} }, false},
		{"bad token name", func(o *Options) { o.Tokens = []Token{{Name: "a b", SHA256: sha("x"), Workspaces: []string{"*"}}} }, false},
		{"duplicate name", func(o *Options) { o.Tokens = []Token{good, {Name: "ops", SHA256: sha("y"), Workspaces: []string{"*"}}} }, false},
		{"duplicate hash", func(o *Options) {
			o.Tokens = []Token{good, {Name: "ops2", SHA256: sha("x"), Workspaces: []string{"*"}}}
		}, false},
		{"short hash", func(o *Options) { o.Tokens = []Token{{Name: "s", SHA256: "abc", Workspaces: []string{"*"}}} }, false},
		{"non-hex hash", func(o *Options) {
			o.Tokens = []Token{{Name: "s", SHA256: strings.Repeat("z", 64), Workspaces: []string{"*"}}}
		}, false},
		{"no workspaces", func(o *Options) { o.Tokens = []Token{{Name: "s", SHA256: sha("x")}} }, false},
		{"wildcard not alone", func(o *Options) { o.Tokens = []Token{{Name: "s", SHA256: sha("x"), Workspaces: []string{"*", "ws-a"}}} }, false},
		{"invalid workspace id", func(o *Options) { o.Tokens = []Token{{Name: "s", SHA256: sha("x"), Workspaces: []string{"ws a"}}} }, false},
		{"no cursor key", func(o *Options) { o.CursorKey = nil }, false},
		{"empty cursor key", func(o *Options) { o.CursorKey = []byte{} }, false},
		{"short cursor key", func(o *Options) { o.CursorKey = []byte("short") }, false},
		{"good cursor key", func(o *Options) { o.CursorKey = []byte("0123456789abcdef") }, true},
		{"negative store timeout", func(o *Options) { o.StoreTimeout = -1 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := Options{Store: newFakeStore(), Tokens: []Token{good}, CursorKey: testCursorKey}
			tc.mutate(&opts)
			_, err := New(opts)
			if tc.ok && err != nil {
				t.Fatalf("New: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New: %v, want ErrInvalidOptions", err)
			}
		})
	}
	t.Run("metrics registered twice", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		if _, err := New(Options{Store: newFakeStore(), Registry: reg, CursorKey: testCursorKey}); err != nil {
			t.Fatal(err)
		}
		if _, err := New(Options{Store: newFakeStore(), Registry: reg, CursorKey: testCursorKey}); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("second New on one registry: %v, want ErrInvalidOptions", err)
		}
	})
}

// TestTokenScopes (issue #29): a token without a scope is read-only: it reads the
// timeline, the summary and the evidence, and every change is refused with 403
// forbidden_scope before anything is read or written; curate and admin tokens may
// change. An unknown scope is refused at construction.
func TestTokenScopes(t *testing.T) {
	const (
		tokRead   = "read-token-0123456789"
		tokCurate = "curate-token-0123456789"
	)
	st := newFakeStore(wsA)
	s, _ := newTestServer(t, st, func(o *Options) {
		o.Tokens = []Token{
			{Name: "reader", SHA256: sha(tokRead), Workspaces: []string{"*"}}, // no scope: read
			{Name: "curator", SHA256: sha(tokCurate), Workspaces: []string{"*"}, Scope: ScopeCurate},
		}
	})
	tests := []struct {
		name, method, path, token, body string
		forbidden                       bool
	}{
		{"read the timeline", http.MethodGet, "/api/v1/workspaces/ws-a/timeline", tokRead, "", false},
		{"read the evidence", http.MethodGet, "/api/v1/workspaces/ws-a/evidence", tokRead, "", false},
		{"read-only token edits an entry", http.MethodPatch, "/api/v1/workspaces/ws-a/timeline/1", tokRead, `{"title":"x"}`, true},
		{"read-only token writes the summary", http.MethodPut, "/api/v1/workspaces/ws-a/summary", tokRead, `{"text":"x"}`, true},
		{"curate token edits an entry", http.MethodPatch, "/api/v1/workspaces/ws-a/timeline/1", tokCurate, `{"title":"x"}`, false},
		{"curate token writes the summary", http.MethodPut, "/api/v1/workspaces/ws-a/summary", tokCurate, `{"text":"x"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, s, req{method: tc.method, path: tc.path, token: tc.token, body: tc.body})
			refused := res.status == http.StatusForbidden && res.errorCode(t) == codeForbiddenScope
			if refused != tc.forbidden {
				t.Fatalf("answer %d %s, want forbidden_scope %v", res.status, res.body, tc.forbidden)
			}
		})
	}
	if _, err := New(Options{Store: st, CursorKey: testCursorKey,
		Tokens: []Token{{Name: "x", SHA256: sha("x"), Workspaces: []string{"*"}, Scope: "root"}}}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("unknown scope: %v, want ErrInvalidOptions", err)
	}
}
