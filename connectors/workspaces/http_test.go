package workspaces

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

const adminToken = "s3cret-admin-token"

func tokenDigest(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

type apiClient struct {
	t     *testing.T
	h     http.Handler
	token string // "" sends no Authorization header
}

type apiResponse struct {
	code   int
	header http.Header
	body   []byte
}

func (c apiClient) do(method, path, body string) apiResponse {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return serve(c.h, req)
}

// serve has h answer req, for requests apiClient.do does not build.
func serve(h http.Handler, req *http.Request) apiResponse {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return apiResponse{code: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// errorCode decodes the {"error":{"code","message"}} shape and fails if it is not that.
func (r apiResponse) errorCode(t *testing.T) string {
	t.Helper()
	var e ErrorBody
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("response %d %q is not an error body: %v", r.code, r.body, err)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error content type %q", ct)
	}
	return e.Error.Code
}

func newHandler(t *testing.T, st *store.Store, digest string, reg *prometheus.Registry) http.Handler {
	t.Helper()
	h, err := NewHandler(newAdmin(t, st), HandlerOptions{AdminTokenSHA256: digest, Registry: reg, MaxBodyBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// every route of the API, with a body it accepts.
var adminRoutes = []struct{ method, path, body string }{
	{http.MethodPut, "/api/v1/admin/workspaces/INC-1", `{"type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z"}`},
	{http.MethodPatch, "/api/v1/admin/workspaces/INC-1", `{"status":"recovered"}`},
	{http.MethodGet, "/api/v1/admin/workspaces/INC-1", ""},
	{http.MethodPut, "/api/v1/admin/workspaces/INC-1/chats/oc_1", ""},
	{http.MethodDelete, "/api/v1/admin/workspaces/INC-1/chats/oc_1", ""},
	{http.MethodGet, "/api/v1/admin/chats/oc_1/bindings", ""},
	{http.MethodGet, "/api/v1/admin/no/such/route", ""},
	{http.MethodPost, "/api/v1/admin/workspaces/INC-1", ""},
}

func TestAdminAPIAuth(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	enabled := newHandler(t, st, tokenDigest(adminToken), nil)
	disabled := newHandler(t, st, "", nil)
	cases := []struct {
		name     string
		h        http.Handler
		header   string // Authorization; "" sends none
		wantCode int
		wantErr  string
	}{
		{"missing token", enabled, "", http.StatusUnauthorized, CodeMissingToken},
		{"not a bearer token", enabled, "Basic " + adminToken, http.StatusUnauthorized, CodeMissingToken},
		{"empty bearer token", enabled, "Bearer ", http.StatusUnauthorized, CodeMissingToken},
		{"wrong token", enabled, "Bearer not-the-token", http.StatusForbidden, CodeInvalidToken},
		{"the digest itself is not the token", enabled, "Bearer " + tokenDigest(adminToken), http.StatusForbidden, CodeInvalidToken},
		{"no token configured refuses a missing token", disabled, "", http.StatusForbidden, CodeAdminDisabled},
		{"no token configured refuses any token", disabled, "Bearer " + adminToken, http.StatusForbidden, CodeAdminDisabled},
	}
	for _, tc := range cases {
		for _, rt := range adminRoutes {
			t.Run(tc.name+"/"+rt.method+" "+rt.path, func(t *testing.T) {
				req := httptest.NewRequest(rt.method, rt.path, strings.NewReader(rt.body))
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				resp := serve(tc.h, req)
				if resp.code != tc.wantCode || resp.errorCode(t) != tc.wantErr {
					t.Fatalf("%d %s, want %d %s", resp.code, resp.body, tc.wantCode, tc.wantErr)
				}
				if tc.wantCode == http.StatusUnauthorized && !strings.HasPrefix(resp.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 without a Bearer challenge: %q", resp.header.Get("WWW-Authenticate"))
				}
			})
		}
	}
	// Two Authorization headers are malformed, even if one holds the token.
	req := httptest.NewRequest(http.MethodGet, "/api/v1/admin/chats/oc_1/bindings", nil)
	req.Header.Add("Authorization", "Bearer "+adminToken)
	req.Header.Add("Authorization", "Bearer other")
	if r := serve(enabled, req); r.code != http.StatusUnauthorized || r.errorCode(t) != CodeMissingToken {
		t.Fatalf("two Authorization headers: %d %s", r.code, r.body)
	}
	// Refused requests changed nothing.
	if _, err := st.GetWorkspace(context.Background(), "INC-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused request wrote INC-1: %v", err)
	}
	// The right token passes authentication on every route.
	c := apiClient{t: t, h: enabled, token: adminToken}
	for _, rt := range adminRoutes {
		if r := c.do(rt.method, rt.path, rt.body); r.code == http.StatusUnauthorized || r.code == http.StatusForbidden {
			t.Errorf("%s %s with the admin token: %d %s", rt.method, rt.path, r.code, r.body)
		}
	}
}

func TestNewHandlerRejectsAMalformedDigest(t *testing.T) {
	t.Parallel()
	a, err := NewAdmin(&store.Store{}, AdminOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"abc", strings.Repeat("z", 64), strings.Repeat("a", 62)} {
		if _, err := NewHandler(a, HandlerOptions{AdminTokenSHA256: d}); !errors.Is(err, ErrInvalidOptions) || strings.Contains(err.Error(), d) {
			t.Errorf("digest %q: %v, want ErrInvalidOptions not quoting the digest", d, err)
		}
	}
	if _, err := NewHandler(nil, HandlerOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("nil admin: %v", err)
	}
}

func TestAdminAPIErrors(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	c := apiClient{t: t, h: newHandler(t, st, tokenDigest(adminToken), nil), token: adminToken}
	if r := c.do(http.MethodPut, "/api/v1/admin/workspaces/INC-1", `{"type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z","version":5}`); r.code != http.StatusCreated {
		t.Fatalf("create INC-1: %d %s", r.code, r.body)
	}
	const ws = "/api/v1/admin/workspaces/INC-2"
	cases := []struct {
		name          string
		method, path  string
		body, ctype   string
		wantStatus    int
		wantCode      string
		wantInMessage string
	}{
		{"malformed JSON", http.MethodPut, ws, `{"type":`, "", 400, CodeInvalidBody, "incomplete"},
		{"syntax error", http.MethodPut, ws, `{"type" "x"}`, "", 400, CodeInvalidBody, "syntax"},
		{"empty body", http.MethodPut, ws, ``, "", 400, CodeInvalidBody, "empty"},
		{"two objects", http.MethodPut, ws, `{"type":"a","status":"firing","created_at":"2025-03-04T09:00:00Z"} {}`, "", 400, CodeInvalidBody, "after"},
		{"unknown field", http.MethodPut, ws, `{"type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z","owner":"x"}`, "", 400, CodeInvalidBody, "owner"},
		{"wrong JSON type", http.MethodPut, ws, `{"type":5,"status":"firing","created_at":"2025-03-04T09:00:00Z"}`, "", 400, CodeInvalidBody, "type"},
		{"not JSON content", http.MethodPut, ws, `type=incident`, "text/plain", 415, CodeUnsupportedMediaType, "application/json"},
		{"body too large", http.MethodPut, ws, `{"type":"` + strings.Repeat("x", 2048) + `"}`, "", 413, CodeBodyTooLarge, "1024"},
		{"missing type", http.MethodPut, ws, `{"status":"firing","created_at":"2025-03-04T09:00:00Z"}`, "", 400, CodeInvalidField, "type"},
		{"empty type", http.MethodPut, ws, `{"type":"","status":"firing","created_at":"2025-03-04T09:00:00Z"}`, "", 400, CodeInvalidField, "type"},
		{"missing status", http.MethodPut, ws, `{"type":"incident","created_at":"2025-03-04T09:00:00Z"}`, "", 400, CodeInvalidField, "status"},
		{"unknown status", http.MethodPut, ws, `{"type":"incident","status":"open","created_at":"2025-03-04T09:00:00Z"}`, "", 400, CodeInvalidField, "status"},
		{"missing created_at", http.MethodPut, ws, `{"type":"incident","status":"firing"}`, "", 400, CodeInvalidField, "created_at"},
		{"created_at not RFC 3339", http.MethodPut, ws, `{"type":"incident","status":"firing","created_at":"04/03/2025"}`, "", 400, CodeInvalidField, "created_at"},
		{"created_at in the future", http.MethodPut, ws, `{"type":"incident","status":"firing","created_at":"2025-03-04T11:00:00Z"}`, "", 400, CodeInvalidField, "future"},
		{"version not positive", http.MethodPut, ws, `{"type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z","version":0}`, "", 400, CodeInvalidField, "version"},
		{"stale version", http.MethodPut, "/api/v1/admin/workspaces/INC-1", `{"type":"incident","status":"recovered","created_at":"2025-03-04T09:00:00Z","version":5}`, "", 409, CodeStaleVersion, "5"},
		{"bad workspace id in the path", http.MethodGet, "/api/v1/admin/workspaces/INC%201", "", "", 400, CodeInvalidField, "workspace_id"},
		{"escaped slash in a workspace id", http.MethodGet, "/api/v1/admin/workspaces/a%2Fb", "", "", 400, CodeInvalidField, "workspace_id"},
		{"get a missing workspace", http.MethodGet, ws, "", "", 404, CodeWorkspaceNotFound, "INC-2"},
		{"patch a missing workspace", http.MethodPatch, ws, `{"status":"recovered"}`, "", 404, CodeWorkspaceNotFound, "INC-2"},
		{"patch an unknown status", http.MethodPatch, "/api/v1/admin/workspaces/INC-1", `{"status":"resolved"}`, "", 400, CodeInvalidField, "status"},
		{"patch without status", http.MethodPatch, "/api/v1/admin/workspaces/INC-1", `{}`, "", 400, CodeInvalidField, "status"},
		{"bind a chat id that is not a Lark chat id", http.MethodPut, "/api/v1/admin/workspaces/INC-1/chats/om_1", "", "", 400, CodeInvalidField, "chat_id"},
		{"bind to a missing workspace", http.MethodPut, ws + "/chats/oc_1", "", "", 404, CodeWorkspaceNotFound, "does not exist"},
		{"unbind a binding that does not exist", http.MethodDelete, "/api/v1/admin/workspaces/INC-1/chats/oc_1", "", "", 404, CodeBindingNotFound, "oc_1"},
		{"bindings of a bad chat id", http.MethodGet, "/api/v1/admin/chats/chat-1/bindings", "", "", 400, CodeInvalidField, "chat_id"},
		{"unknown route", http.MethodGet, "/api/v1/admin/workspaces", "", "", 404, CodeNotFound, "route"},
		{"method not allowed", http.MethodPost, "/api/v1/admin/workspaces/INC-1", "", "", 405, CodeMethodNotAllowed, "POST"},
		{"method not allowed on a binding", http.MethodGet, "/api/v1/admin/workspaces/INC-1/chats/oc_1", "", "", 405, CodeMethodNotAllowed, "GET"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			r := serve(c.h, req)
			if r.code != tc.wantStatus || r.errorCode(t) != tc.wantCode {
				t.Fatalf("%d %s, want %d %s", r.code, r.body, tc.wantStatus, tc.wantCode)
			}
			if !strings.Contains(string(r.body), tc.wantInMessage) {
				t.Errorf("message %s does not mention %q", r.body, tc.wantInMessage)
			}
			if tc.wantStatus == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
	// Nothing of the rejected requests was written.
	if _, err := st.GetWorkspace(context.Background(), "INC-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("INC-2 was written: %v", err)
	}
	if got, err := st.GetWorkspace(context.Background(), "INC-1"); err != nil || got.Status != store.WorkspaceFiring || got.Version != 5 {
		t.Fatalf("INC-1 changed: %+v %v", got, err)
	}
}

// TestAdminAPIChangesAreVisibleAndNotified: a binding added through the admin API is
// visible to store.BindingsForChat when the response arrives and is announced on the
// bindings channel; so are a status change to recovered and an unbind.
func TestAdminAPIChangesAreVisibleAndNotified(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	reg := prometheus.NewRegistry()
	c := apiClient{t: t, h: newHandler(t, st, tokenDigest(adminToken), reg), token: adminToken}
	n := listen(t, st)
	const ws, chat = ids.WorkspaceID("INC-9"), ids.ChatID("oc_admin_api")
	put := `{"type":"incident","status":"firing","created_at":"2025-03-04T09:00:00Z"}`
	r := c.do(http.MethodPut, "/api/v1/admin/workspaces/INC-9", put)
	var got workspaceJSON
	if r.code != http.StatusCreated || json.Unmarshal(r.body, &got) != nil || got.ID != "INC-9" || got.Status != "firing" || got.Version != 1 ||
		!got.CreatedAt.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := c.do(http.MethodPut, "/api/v1/admin/workspaces/INC-9", put); r.code != http.StatusOK {
		t.Fatalf("repeated create: %d %s", r.code, r.body)
	}

	r = c.do(http.MethodPut, "/api/v1/admin/workspaces/INC-9/chats/oc_admin_api", "")
	var bound bindingJSON
	if r.code != http.StatusCreated || json.Unmarshal(r.body, &bound) != nil || !bound.Added || bound.ChatID != string(chat) || bound.WorkspaceID != string(ws) {
		t.Fatalf("bind: %d %s", r.code, r.body)
	}
	if b, ok := bindingOf(t, st, chat, ws); !ok || b.Workspace.Status != store.WorkspaceFiring {
		t.Fatalf("binding after the API bind: %+v %t", b, ok)
	}
	n.waitFor(t, chat)
	if r := c.do(http.MethodPut, "/api/v1/admin/workspaces/INC-9/chats/oc_admin_api", ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"added":false`) {
		t.Fatalf("repeated bind: %d %s", r.code, r.body)
	}

	r = c.do(http.MethodPatch, "/api/v1/admin/workspaces/INC-9", `{"status":"recovered"}`)
	if r.code != http.StatusOK || json.Unmarshal(r.body, &got) != nil || got.Status != "recovered" || got.Version != 1 {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	if b, ok := bindingOf(t, st, chat, ws); !ok || b.Workspace.Status != store.WorkspaceRecovered {
		t.Fatalf("binding after the API status change: %+v %t", b, ok)
	}
	n.waitFor(t, chat)

	r = c.do(http.MethodGet, "/api/v1/admin/workspaces/INC-9", "")
	var details workspaceDetailsJSON
	if r.code != http.StatusOK || json.Unmarshal(r.body, &details) != nil || len(details.Chats) != 1 || details.Chats[0] != string(chat) || details.Status != "recovered" {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	r = c.do(http.MethodGet, "/api/v1/admin/chats/oc_admin_api/bindings", "")
	var list chatBindingsJSON
	if r.code != http.StatusOK || json.Unmarshal(r.body, &list) != nil || len(list.Bindings) != 1 ||
		list.Bindings[0].Workspace.ID != string(ws) || list.Bindings[0].Workspace.Status != "recovered" || list.Bindings[0].BoundAt.IsZero() {
		t.Fatalf("bindings: %d %s", r.code, r.body)
	}

	if r := c.do(http.MethodDelete, "/api/v1/admin/workspaces/INC-9/chats/oc_admin_api", ""); r.code != http.StatusNoContent {
		t.Fatalf("unbind: %d %s", r.code, r.body)
	}
	if _, ok := bindingOf(t, st, chat, ws); ok {
		t.Fatal("binding still visible after the API unbind")
	}
	n.waitFor(t, chat)
	r = c.do(http.MethodGet, "/api/v1/admin/chats/oc_admin_api/bindings", "")
	if r.code != http.StatusOK || !strings.Contains(string(r.body), `"bindings":[]`) {
		t.Fatalf("bindings after unbind: %d %s", r.code, r.body)
	}

	for _, m := range []struct {
		route, code string
		want        float64
	}{
		{"PUT /api/v1/admin/workspaces/{id}", "201", 1},
		{"PUT /api/v1/admin/workspaces/{id}", "200", 1},
		{"PUT /api/v1/admin/workspaces/{id}/chats/{chat_id}", "201", 1},
		{"PATCH /api/v1/admin/workspaces/{id}", "200", 1},
		{"DELETE /api/v1/admin/workspaces/{id}/chats/{chat_id}", "204", 1},
		{"GET /api/v1/admin/chats/{chat_id}/bindings", "200", 2},
	} {
		if got := testutil.ToFloat64(adminRequests(t, reg, m.route, m.code)); got != m.want {
			t.Errorf("larkline_admin_requests_total{route=%q,code=%q} = %v, want %v", m.route, m.code, got, m.want)
		}
	}
}

func adminRequests(t *testing.T, reg *prometheus.Registry, route, code string) prometheus.Collector {
	t.Helper()
	m, err := newAdminMetrics(reg) // returns the registered collector
	if err != nil {
		t.Fatal(err)
	}
	return m.requests.WithLabelValues(route, code)
}

// TestAdminScopeTokens (issue #29): an API token of scope admin passes the admin API
// like the admin token; a read or curate token (not listed) does not, and an
// admin-scope token does not enable a disabled API.
func TestAdminScopeTokens(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	const scoped, reader = "admin-scope-token-0123", "read-scope-token-0123"
	h, err := NewHandler(newAdmin(t, st), HandlerOptions{AdminTokenSHA256: tokenDigest(adminToken),
		AdminScopeTokenSHA256: []string{tokenDigest(scoped)}})
	if err != nil {
		t.Fatal(err)
	}
	off, err := NewHandler(newAdmin(t, st), HandlerOptions{AdminScopeTokenSHA256: []string{tokenDigest(scoped)}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		h     http.Handler
		token string
		ok    bool
	}{
		{"admin-scope API token", h, scoped, true},
		{"read-scope API token", h, reader, false},
		{"admin-scope token, admin API disabled", off, scoped, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := apiClient{t: t, h: tc.h, token: tc.token}.do(http.MethodGet, "/api/v1/admin/chats/oc_1/bindings", "")
			if passed := r.code != http.StatusUnauthorized && r.code != http.StatusForbidden; passed != tc.ok {
				t.Fatalf("%d %s, want authenticated %v", r.code, r.body, tc.ok)
			}
		})
	}
	if _, err := NewHandler(newAdmin(t, st), HandlerOptions{AdminScopeTokenSHA256: []string{"abc"}}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("malformed admin-scope digest: %v", err)
	}
}
