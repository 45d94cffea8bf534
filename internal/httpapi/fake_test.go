package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/logtest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// fakeStore is an in-memory Store. Its keyset listing follows the store's contract
// ((occurred_at, id) order, Next only when more rows exist). err, when set, is returned
// by every call after GetWorkspace (or by GetWorkspace too with errOnWorkspace).
type fakeStore struct {
	mu             sync.Mutex
	workspaces     map[ids.WorkspaceID]store.Workspace
	evidence       []store.Evidence
	entries        map[int64]store.Entry
	summaries      map[ids.WorkspaceID]store.Summary
	err            error
	errOnWorkspace bool
	calls          []string
}

func newFakeStore(wss ...ids.WorkspaceID) *fakeStore {
	f := &fakeStore{
		workspaces: map[ids.WorkspaceID]store.Workspace{},
		entries:    map[int64]store.Entry{},
		summaries:  map[ids.WorkspaceID]store.Summary{},
	}
	for _, ws := range wss {
		f.workspaces[ws] = store.Workspace{ID: ws, Type: "incident", Status: store.WorkspaceFiring, CreatedAt: t0}
	}
	return f
}

func (f *fakeStore) record(name string) error {
	f.calls = append(f.calls, name)
	return f.err
}

func (f *fakeStore) callNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeStore) GetWorkspace(_ context.Context, ws ids.WorkspaceID) (store.Workspace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "GetWorkspace")
	if f.errOnWorkspace {
		return store.Workspace{}, f.err
	}
	w, ok := f.workspaces[ws]
	if !ok {
		return store.Workspace{}, store.ErrNotFound
	}
	return w, nil
}

func (f *fakeStore) ListEvidence(_ context.Context, ws ids.WorkspaceID, kind store.EvidenceKind, after *store.Cursor, limit int) (store.EvidencePage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ListEvidence"); err != nil {
		return store.EvidencePage{}, err
	}
	var rows []store.Evidence
	for _, e := range f.evidence {
		if e.WorkspaceID == ws && e.Kind() == kind && (after == nil || after.Less(e.Cursor())) {
			rows = append(rows, e)
		}
	}
	slices.SortFunc(rows, func(a, b store.Evidence) int {
		if a.Cursor().Less(b.Cursor()) {
			return -1
		}
		return 1
	})
	var p store.EvidencePage
	if len(rows) > limit {
		rows = rows[:limit]
		c := rows[limit-1].Cursor()
		p.Next = &c
	}
	p.Items = rows
	return p, nil
}

func (f *fakeStore) ListVisibleEntries(_ context.Context, ws ids.WorkspaceID) ([]store.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ListVisibleEntries"); err != nil {
		return nil, err
	}
	var out []store.Entry
	for _, e := range f.entries {
		if e.Workspace == ws && e.Status != store.EntryStatusHidden {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b store.Entry) int {
		if (store.Cursor{OccurredAt: a.OccurredAt, ID: a.ID}).Less(store.Cursor{OccurredAt: b.OccurredAt, ID: b.ID}) {
			return -1
		}
		return 1
	})
	return out, nil
}

func (f *fakeStore) HumanEditEntry(_ context.Context, ws ids.WorkspaceID, id int64, p store.EntryPatch) (store.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("HumanEditEntry"); err != nil {
		return store.Entry{}, err
	}
	e, ok := f.entries[id]
	if !ok || e.Workspace != ws {
		return store.Entry{}, store.ErrNotFound
	}
	if p.Status != nil {
		e.Status = *p.Status
	}
	if p.Kind != nil {
		e.Kind = *p.Kind
	}
	if p.Title != nil {
		e.Title = *p.Title
	}
	if p.Body != nil {
		e.Body = *p.Body
	}
	if p.OccurredAt != nil {
		e.OccurredAt = *p.OccurredAt
	}
	now := t0.Add(time.Hour)
	e.HumanEditedAt, e.UpdatedAt = &now, now
	f.entries[id] = e
	return e, nil
}

func (f *fakeStore) GetSummary(_ context.Context, ws ids.WorkspaceID) (store.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("GetSummary"); err != nil {
		return store.Summary{}, err
	}
	s, ok := f.summaries[ws]
	if !ok {
		return store.Summary{}, store.ErrNotFound
	}
	return s, nil
}

func (f *fakeStore) PutHumanSummary(_ context.Context, ws ids.WorkspaceID, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("PutHumanSummary"); err != nil {
		return err
	}
	f.summaries[ws] = store.Summary{Workspace: ws, Source: store.EntryFromHuman, Text: text, UpdatedAt: t0.Add(time.Hour)}
	return nil
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// Test tokens: the token text and the Token holding its hash.
const (
	tokAll   = "tok-all-workspaces-0123456789"
	tokA     = "tok-only-ws-a-0123456789"
	tokB     = "tok-only-ws-b-0123456789"
	wsA      = ids.WorkspaceID("ws-a")
	wsB      = ids.WorkspaceID("ws-b")
	wsAbsent = ids.WorkspaceID("ws-absent")
)

func sha(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

func testTokens() []Token {
	return []Token{
		{Name: "all", SHA256: sha(tokAll), Workspaces: []string{AllWorkspaces}, Scope: ScopeAdmin},
		{Name: "ops-a", SHA256: sha(tokA), Workspaces: []string{string(wsA), string(wsAbsent)}, Scope: ScopeCurate},
		{Name: "ops-b", SHA256: sha(tokB), Workspaces: []string{string(wsB)}, Scope: ScopeCurate},
	}
}

// testCursorKey is the cursor key of the tests' servers.
var testCursorKey = []byte("a-test-cursor-key-of-32-bytes!!!")

func newTestServer(t *testing.T, st Store, mutate func(*Options)) (*Server, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	opts := Options{
		Store:          st,
		Tokens:         testTokens(),
		EvidenceListed: true,
		CursorKey:      testCursorKey,
		Logger:         slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, logs
}

// response is a recorded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("answer %d is not a JSON error: %q (%v)", r.status, r.body, err)
	}
	return e.Error.Code
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want JSON", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

type req struct {
	method, path, token, body, contentType string
	header                                 http.Header
}

func do(t *testing.T, h http.Handler, rq req) response {
	t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	if rq.method == "" {
		rq.method = http.MethodGet
	}
	r := httptest.NewRequest(rq.method, rq.path, body)
	if rq.body != "" {
		ct := rq.contentType
		if ct == "" {
			ct = "application/json"
		}
		r.Header.Set("Content-Type", ct)
	}
	if rq.token != "" {
		r.Header.Set("Authorization", "Bearer "+rq.token)
	}
	for k, vs := range rq.header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

func (f *fakeStore) ServingVersion(context.Context) (string, error) {
	return ids.DefaultProcessorVersion, f.record("ServingVersion")
}

func (f *fakeStore) GetVersion(_ context.Context, name string) (store.ProcessorVersion, error) {
	if err := f.record("GetVersion"); err != nil {
		return store.ProcessorVersion{}, err
	}
	return store.ProcessorVersion{}, store.ErrNotFound
}

func (f *fakeStore) DiffVersions(context.Context, string, string, ids.WorkspaceID) ([]store.WorkspaceDiff, error) {
	return nil, f.record("DiffVersions")
}
