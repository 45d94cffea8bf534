package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// flipChar changes the base64url character at i to another valid one.
func flipChar(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func storeEntry(ws ids.WorkspaceID, id int64) store.Entry {
	return store.Entry{
		ID: id, Workspace: ws, OccurredAt: t0.Add(time.Duration(id) * time.Minute), Kind: "mitigation",
		Title: fmt.Sprintf("Entry %d title", id), Body: "body", Source: store.EntryFromAI, Status: store.EntryStatusDraft,
		Fingerprint: fmt.Sprintf("fp-%d", id), CreatedAt: t0, UpdatedAt: t0, EvidenceIDs: []int64{id * 10},
	}
}

func storeSummary(ws ids.WorkspaceID) store.Summary {
	return store.Summary{Workspace: ws, Source: store.EntryFromAI, Text: "AI summary of " + string(ws), UpdatedAt: t0}
}

func storeEvidence(ws ids.WorkspaceID, id int64, at time.Time) store.Evidence {
	msg := fmt.Sprintf("om_%d", id)
	return store.Evidence{
		ID: id, WorkspaceID: ws, Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
		SourceKey: ids.MessageSourceKey("oc_chat", ids.MessageID(msg)), ChatID: "oc_chat",
		OccurredAt: at, SourceUpdatedAt: at, ObservedAt: at, ActorID: "ou_alice", ActorDisplayName: "Alice",
		Content: "message " + msg, ContentHash: "hash-" + msg, Metadata: json.RawMessage(`{"chat_id":"oc_chat"}`),
	}
}

// evidenceItem mirrors the documented item shape; decoding with DisallowUnknownFields
// proves the answer has no other field.
type evidenceItem struct {
	ID               int64           `json:"id"`
	Source           string          `json:"source"`
	SourceType       string          `json:"source_type"`
	SourceKey        string          `json:"source_key"`
	OccurredAt       time.Time       `json:"occurred_at"`
	ActorID          string          `json:"actor_id"`
	ActorDisplayName string          `json:"actor_display_name"`
	Content          string          `json:"content"`
	ContentHash      string          `json:"content_hash"`
	Metadata         json.RawMessage `json:"metadata"`
	Deleted          bool            `json:"deleted"`
}

type evidencePage struct {
	Items      []evidenceItem `json:"items"`
	NextCursor *string        `json:"next_cursor"`
}

// pageAll walks the evidence listing of ws with limit and returns the ids in order and
// the number of pages.
func pageAll(t *testing.T, h http.Handler, ws ids.WorkspaceID, token string, limit int, first url.Values) ([]int64, int) {
	t.Helper()
	var got []int64
	q := first
	if q == nil {
		q = url.Values{}
	}
	q.Set("limit", fmt.Sprint(limit))
	for pages := 1; ; pages++ {
		res := do(t, h, req{path: "/api/v1/workspaces/" + string(ws) + "/evidence?" + q.Encode(), token: token})
		if res.status != http.StatusOK {
			t.Fatalf("page %d: status %d: %s", pages, res.status, res.body)
		}
		var p evidencePage
		res.decode(t, &p)
		if len(p.Items) > limit {
			t.Fatalf("page %d has %d items > limit %d", pages, len(p.Items), limit)
		}
		for _, it := range p.Items {
			got = append(got, it.ID)
		}
		if p.NextCursor == nil {
			if strings.Contains(string(res.body), "next_cursor") {
				t.Fatalf("last page names next_cursor: %s", res.body)
			}
			return got, pages
		}
		if len(p.Items) != limit {
			t.Fatalf("page %d is short (%d < %d) but has a next_cursor", pages, len(p.Items), limit)
		}
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		q = url.Values{"cursor": {*p.NextCursor}, "limit": {fmt.Sprint(limit)}}
	}
}

func TestEvidencePagingOnFake(t *testing.T) {
	t.Parallel()
	f := newFakeStore(wsA, wsB)
	// Ids out of time order, many sharing a timestamp.
	var want []int64
	for i, at := range []time.Duration{0, 0, 0, 0, 0, time.Second, time.Second, 2 * time.Second, 0, 3 * time.Second} {
		f.evidence = append(f.evidence, storeEvidence(wsA, int64(100-i), t0.Add(at)))
		f.evidence = append(f.evidence, storeEvidence(wsB, int64(200+i), t0.Add(at)))
	}
	position := map[int64]store.Cursor{}
	for _, e := range f.evidence {
		if e.WorkspaceID == wsA {
			want = append(want, e.ID)
			position[e.ID] = e.Cursor()
		}
	}
	slices.SortFunc(want, func(a, b int64) int {
		if position[a].Less(position[b]) {
			return -1
		}
		return 1
	})
	s, _ := newTestServer(t, f, nil)
	for _, limit := range []int{1, 3, 10, 200} {
		got, pages := pageAll(t, s, wsA, tokA, limit, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: ids %v, want %v", limit, got, want)
		}
		if wantPages := max(1, (len(want)+limit-1)/limit); pages != wantPages {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	t.Run("default limit", func(t *testing.T) {
		res := do(t, s, req{path: "/api/v1/workspaces/ws-a/evidence", token: tokA})
		var p evidencePage
		res.decode(t, &p)
		if len(p.Items) != len(want) || p.NextCursor != nil {
			t.Fatalf("default page: %d items, next %v", len(p.Items), p.NextCursor)
		}
		it := p.Items[0]
		if it.Source != "lark" || it.SourceType != "lark_message" || it.ActorDisplayName != "Alice" ||
			!strings.HasPrefix(it.SourceKey, "chat/oc_chat/message/") || string(it.Metadata) != `{"chat_id":"oc_chat"}` {
			t.Fatalf("item shape: %+v", it)
		}
	})
	t.Run("since starts at a time, inclusive", func(t *testing.T) {
		got, _ := pageAll(t, s, wsA, tokA, 2, url.Values{"since": {t0.Add(time.Second).Format(time.RFC3339)}})
		if !slices.Equal(got, want[len(want)-4:]) {
			t.Fatalf("since: %v, want %v", got, want[len(want)-4:])
		}
	})
}

func TestEvidenceQueryValidation(t *testing.T) {
	t.Parallel()
	f := newFakeStore(wsA, wsB)
	for i := range 5 {
		f.evidence = append(f.evidence, storeEvidence(wsA, int64(i+1), t0), storeEvidence(wsB, int64(i+11), t0))
	}
	s, _ := newTestServer(t, f, nil)
	first := func(ws ids.WorkspaceID, tok string, srv http.Handler) string {
		res := do(t, srv, req{path: "/api/v1/workspaces/" + string(ws) + "/evidence?limit=1", token: tok})
		var p evidencePage
		res.decode(t, &p)
		if p.NextCursor == nil {
			t.Fatal("no next_cursor")
		}
		return *p.NextCursor
	}
	cur := first(wsA, tokA, s)
	curB := first(wsB, tokAll, s)
	keyed, _ := newTestServer(t, f, func(o *Options) { o.CursorKey = []byte("another-key-0123456789") })
	cases := []struct {
		name     string
		query    string
		srv      http.Handler
		want     int
		wantCode string
	}{
		{"limit 0", "limit=0", s, 400, codeInvalidLimit},
		{"negative limit", "limit=-3", s, 400, codeInvalidLimit},
		{"limit above the maximum", fmt.Sprintf("limit=%d", MaxPageSize+1), s, 400, codeInvalidLimit},
		{"non-numeric limit", "limit=ten", s, 400, codeInvalidLimit},
		{"maximum limit", fmt.Sprintf("limit=%d", MaxPageSize), s, 200, ""},
		{"valid cursor", "cursor=" + cur, s, 200, ""},
		{"cursor with one character changed", "cursor=" + flipChar(cur, 3), s, 400, codeInvalidCursor},
		{"cursor with its MAC changed", "cursor=" + flipChar(cur, len(cur)-2), s, 400, codeInvalidCursor},
		{"truncated cursor", "cursor=" + cur[:len(cur)-4], s, 400, codeInvalidCursor},
		{"cursor with padding", "cursor=" + url.QueryEscape(cur+"="), s, 400, codeInvalidCursor},
		{"cursor of another workspace", "cursor=" + curB, s, 400, codeInvalidCursor},
		{"cursor from a server with another key", "cursor=" + cur, keyed, 400, codeInvalidCursor},
		{"store cursor format is not accepted", "cursor=" + url.QueryEscape(store.Cursor{OccurredAt: t0, ID: 1}.String()), s, 400, codeInvalidCursor},
		{"garbage cursor", "cursor=%2F%2F%2F", s, 400, codeInvalidCursor},
		{"since and cursor together", "since=2026-03-01T10:00:00Z&cursor=" + cur, s, 400, codeInvalidSince},
		{"since not RFC 3339", "since=yesterday", s, 400, codeInvalidSince},
		{"since with offset", "since=" + url.QueryEscape("2026-03-01T18:00:00+08:00"), s, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, tc.srv, req{path: "/api/v1/workspaces/ws-a/evidence?" + tc.query, token: tokA})
			if res.status != tc.want {
				t.Fatalf("status %d, want %d: %s", res.status, tc.want, res.body)
			}
			if tc.wantCode != "" && res.errorCode(t) != tc.wantCode {
				t.Fatalf("code %q, want %q", res.errorCode(t), tc.wantCode)
			}
		})
	}
}

func TestEvidenceListingDisabled(t *testing.T) {
	t.Parallel()
	f := newFakeStore(wsA)
	f.evidence = append(f.evidence, storeEvidence(wsA, 1, t0))
	s, _ := newTestServer(t, f, func(o *Options) { o.EvidenceListed = false })
	for _, q := range []string{"", "?limit=5", "?cursor=abc"} {
		res := do(t, s, req{path: "/api/v1/workspaces/ws-a/evidence" + q, token: tokA})
		if res.status != http.StatusNotFound || res.errorCode(t) != codeEvidenceListingDisabled {
			t.Fatalf("%q: %d %s", q, res.status, res.body)
		}
	}
	if slices.Contains(f.callNames(), "ListEvidence") {
		t.Fatal("evidence was read although listing is disabled")
	}
	// The access rules still come first.
	if res := do(t, s, req{path: "/api/v1/workspaces/ws-a/evidence", token: tokB}); res.status != http.StatusForbidden {
		t.Fatalf("foreign token: %d", res.status)
	}
	// The timeline says so, for the page.
	var tl timelineJSON
	do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: tokA}).decode(t, &tl)
	if tl.EvidenceListed {
		t.Fatal("timeline says evidence is listed")
	}
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	f := newFakeStore(wsA, wsB)
	s, _ := newTestServer(t, f, nil)

	t.Run("empty", func(t *testing.T) {
		res := do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: tokA})
		if res.status != 200 || !strings.Contains(string(res.body), `"entries":[]`) {
			t.Fatalf("empty timeline: %d %s", res.status, res.body)
		}
	})

	f.entries[3] = storeEntry(wsA, 3)
	f.entries[1] = storeEntry(wsA, 1)
	hidden := storeEntry(wsA, 2)
	hidden.Status = store.EntryStatusHidden
	f.entries[2] = hidden
	f.entries[4] = storeEntry(wsB, 4)
	edited := storeEntry(wsA, 5)
	at := t0.Add(time.Hour)
	edited.HumanEditedAt, edited.Status, edited.EvidenceIDs = &at, store.EntryStatusConfirmed, nil
	f.entries[5] = edited

	var tl timelineJSON
	res := do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: tokA})
	res.decode(t, &tl)
	var got []int64
	for _, e := range tl.Entries {
		got = append(got, e.ID)
	}
	if !slices.Equal(got, []int64{1, 3, 5}) {
		t.Fatalf("entries %v, want [1 3 5] (time order, hidden and foreign left out)", got)
	}
	if tl.Workspace.ID != wsA || tl.Workspace.Status != "firing" || !tl.EvidenceListed {
		t.Fatalf("workspace %+v listed %v", tl.Workspace, tl.EvidenceListed)
	}
	e := tl.Entries[0]
	if e.Kind != "mitigation" || e.Status != "draft" || e.Source != "ai" || e.HumanEdited || e.HumanEditedAt != nil ||
		!slices.Equal(e.EvidenceIDs, []int64{10}) || !e.OccurredAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("entry 1: %+v", e)
	}
	if last := tl.Entries[2]; !last.HumanEdited || last.HumanEditedAt == nil || last.EvidenceIDs == nil {
		t.Fatalf("entry 5: %+v", last)
	}
	if !strings.Contains(string(res.body), `"evidence_ids":[]`) {
		t.Fatalf("an entry without evidence must carry an empty list: %s", res.body)
	}
}

func TestPatchEntry(t *testing.T) {
	t.Parallel()
	longTitle := strings.Repeat("t", store.MaxEntryTitleBytes+1)
	cases := []struct {
		name        string
		path        string
		body        string
		contentType string
		want        int
		wantCode    string
		check       func(t *testing.T, e entryJSON)
	}{
		{name: "confirm", body: `{"status":"confirmed"}`, want: 200, check: func(t *testing.T, e entryJSON) {
			if e.Status != "confirmed" || !e.HumanEdited || e.Title != "Entry 1 title" {
				t.Fatalf("%+v", e)
			}
		}},
		{name: "hide", body: `{"status":"hidden"}`, want: 200, check: func(t *testing.T, e entryJSON) {
			if e.Status != "hidden" || !e.HumanEdited {
				t.Fatalf("%+v", e)
			}
		}},
		{name: "edit text, kind and time", body: `{"title":"  Rolled back v42  ","body":"Error rate back to 0.1%","kind":"root_cause","occurred_at":"2026-03-01T18:30:00+08:00"}`, want: 200,
			check: func(t *testing.T, e entryJSON) {
				if e.Title != "Rolled back v42" || e.Body != "Error rate back to 0.1%" || e.Kind != "root_cause" ||
					!e.OccurredAt.Equal(time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)) || !e.HumanEdited || e.Status != "draft" {
					t.Fatalf("%+v", e)
				}
			}},
		{name: "null fields are left alone", body: `{"title":null,"status":"confirmed"}`, want: 200, check: func(t *testing.T, e entryJSON) {
			if e.Title != "Entry 1 title" {
				t.Fatalf("%+v", e)
			}
		}},
		{name: "empty body object", body: `{}`, want: 400, wantCode: codeEmptyPatch},
		{name: "only nulls", body: `{"title":null}`, want: 400, wantCode: codeEmptyPatch},
		{name: "unknown status", body: `{"status":"done"}`, want: 400, wantCode: codeInvalidField},
		{name: "blank title", body: `{"title":"   "}`, want: 400, wantCode: codeInvalidField},
		{name: "title too long", body: `{"title":"` + longTitle + `"}`, want: 400, wantCode: codeInvalidField},
		{name: "NUL in body", body: `{"body":"a\u0000b"}`, want: 400, wantCode: codeInvalidField},
		{name: "bad kind", body: `{"kind":"Root Cause"}`, want: 400, wantCode: codeInvalidField},
		{name: "bad time", body: `{"occurred_at":"10:30"}`, want: 400, wantCode: codeInvalidField},
		{name: "unknown field", body: `{"titel":"x"}`, want: 400, wantCode: codeInvalidBody},
		{name: "wrong type", body: `{"title":5}`, want: 400, wantCode: codeInvalidBody},
		{name: "array body", body: `[{"title":"x"}]`, want: 400, wantCode: codeInvalidBody},
		{name: "not JSON", body: `title=x`, want: 400, wantCode: codeInvalidBody},
		{name: "truncated JSON", body: `{"title":"x"`, want: 400, wantCode: codeInvalidBody},
		{name: "two objects", body: `{"title":"x"}{"title":"y"}`, want: 400, wantCode: codeInvalidBody},
		{name: "no body", body: "", contentType: "application/json", want: 400, wantCode: codeInvalidBody},
		{name: "form content type", body: `{"title":"x"}`, contentType: "application/x-www-form-urlencoded", want: 415, wantCode: codeUnsupportedMediaType},
		{name: "JSON with charset", body: `{"title":"x"}`, contentType: "application/json; charset=utf-8", want: 200},
		{name: "body too large", body: `{"body":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, want: 413, wantCode: codeBodyTooLarge},
		{name: "entry of another workspace", path: "/api/v1/workspaces/ws-a/timeline/2", body: `{"status":"confirmed"}`, want: 404, wantCode: codeEntryNotFound},
		{name: "missing entry", path: "/api/v1/workspaces/ws-a/timeline/99", body: `{"status":"confirmed"}`, want: 404, wantCode: codeEntryNotFound},
		{name: "entry id zero", path: "/api/v1/workspaces/ws-a/timeline/0", body: `{"status":"confirmed"}`, want: 400, wantCode: codeInvalidEntryID},
		{name: "entry id not a number", path: "/api/v1/workspaces/ws-a/timeline/abc", body: `{"status":"confirmed"}`, want: 400, wantCode: codeInvalidEntryID},
		{name: "entry id overflows", path: "/api/v1/workspaces/ws-a/timeline/99999999999999999999", body: `{"status":"confirmed"}`, want: 400, wantCode: codeInvalidEntryID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeStore(wsA, wsB)
			f.entries[1] = storeEntry(wsA, 1)
			f.entries[2] = storeEntry(wsB, 2)
			s, logs := newTestServer(t, f, nil)
			path := tc.path
			if path == "" {
				path = "/api/v1/workspaces/ws-a/timeline/1"
			}
			rq := req{method: http.MethodPatch, path: path, token: tokA, body: tc.body, contentType: tc.contentType}
			if tc.body == "" {
				rq.header = http.Header{"Content-Type": {tc.contentType}}
			}
			res := do(t, s, rq)
			if res.status != tc.want {
				t.Fatalf("status %d, want %d: %s", res.status, tc.want, res.body)
			}
			if tc.wantCode != "" && res.errorCode(t) != tc.wantCode {
				t.Fatalf("code %q, want %q (%s)", res.errorCode(t), tc.wantCode, res.body)
			}
			if res.status != http.StatusOK {
				if e := f.entries[1]; e.HumanEditedAt != nil {
					t.Fatalf("a rejected patch changed the entry: %+v", e)
				}
				return
			}
			var e entryJSON
			res.decode(t, &e)
			if tc.check != nil {
				tc.check(t, e)
			}
			out := logs.String()
			if !strings.Contains(out, "timeline entry edited by a person") || !strings.Contains(out, `"token":"ops-a"`) {
				t.Errorf("no audit line:\n%s", out)
			}
			for _, text := range []string{"Rolled back", "Error rate", "Entry 1 title"} {
				if strings.Contains(out, text) {
					t.Fatalf("logs carry entry text %q:\n%s", text, out)
				}
			}
		})
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	f := newFakeStore(wsA)
	s, logs := newTestServer(t, f, nil)
	get := func() response { return do(t, s, req{path: "/api/v1/workspaces/ws-a/summary", token: tokA}) }

	if res := get(); res.status != 404 || res.errorCode(t) != codeSummaryNotFound {
		t.Fatalf("no summary: %d %s", res.status, res.body)
	}
	f.summaries[wsA] = storeSummary(wsA)
	var sum summaryJSON
	get().decode(t, &sum)
	if sum.Source != "ai" || sum.Text != "AI summary of ws-a" || sum.WorkspaceID != wsA {
		t.Fatalf("AI summary: %+v", sum)
	}

	bad := []struct {
		name, body string
		want       int
		code       string
	}{
		{"no text field", `{}`, 400, codeInvalidField},
		{"null text", `{"text":null}`, 400, codeInvalidField},
		{"text too long", `{"text":"` + strings.Repeat("s", store.MaxSummaryBytes+1) + `"}`, 400, codeInvalidField},
		{"NUL in text", `{"text":"\u0000"}`, 400, codeInvalidField},
		{"unknown field", `{"text":"x","source":"ai"}`, 400, codeInvalidBody},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, s, req{method: http.MethodPut, path: "/api/v1/workspaces/ws-a/summary", token: tokA, body: tc.body})
			if res.status != tc.want || res.errorCode(t) != tc.code {
				t.Fatalf("%d %s", res.status, res.body)
			}
		})
	}
	if slices.Contains(f.callNames(), "PutHumanSummary") {
		t.Fatal("a rejected summary reached the store")
	}

	res := do(t, s, req{method: http.MethodPut, path: "/api/v1/workspaces/ws-a/summary", token: tokA,
		body: `{"text":"Checkout errors since 10:02; rolled back at 10:20."}`})
	if res.status != 200 {
		t.Fatalf("put: %d %s", res.status, res.body)
	}
	res.decode(t, &sum)
	if sum.Source != "human" || sum.Text != "Checkout errors since 10:02; rolled back at 10:20." {
		t.Fatalf("put answer: %+v", sum)
	}
	get().decode(t, &sum)
	if sum.Source != "human" {
		t.Fatalf("get after put: %+v", sum)
	}
	if out := logs.String(); strings.Contains(out, "Checkout errors") || !strings.Contains(out, "summary written by a person") {
		t.Fatalf("summary audit log:\n%s", out)
	}
}

func TestStoreFailures(t *testing.T) {
	t.Parallel()
	secret := "customer card 4242 leaked"
	cases := []struct {
		name          string
		err           error
		onWorkspace   bool
		want          int
		code          string
		wantSQLState  string
		wantRetryHint bool
	}{
		{"serialization failure is retryable", &pgconn.PgError{Code: "40001", Message: secret}, false, 503, codeStoreUnavailable, "40001", true},
		{"deadline is retryable", fmt.Errorf("list: %w", context.DeadlineExceeded), false, 503, codeStoreUnavailable, "", true},
		{"constraint violation is internal", &pgconn.PgError{Code: "23514", Message: secret, Detail: secret}, false, 500, codeInternal, "23514", false},
		{"too many rows is internal", fmt.Errorf("%w: more than 10000", store.ErrTooMany), false, 500, codeInternal, "", false},
		{"workspace lookup down", &pgconn.PgError{Code: "57P01", Message: secret}, true, 503, codeStoreUnavailable, "57P01", true},
	}
	for _, tc := range cases {
		for _, rt := range apiRoutes {
			t.Run(tc.name+"/"+rt.name, func(t *testing.T) {
				t.Parallel()
				f := seededFake()
				f.err, f.errOnWorkspace = tc.err, tc.onWorkspace
				s, logs := newTestServer(t, f, nil)
				res := do(t, s, req{method: rt.method, path: strings.Replace(rt.path, "%s", "ws-a", 1), token: tokA, body: rt.body})
				if res.status != tc.want || res.errorCode(t) != tc.code {
					t.Fatalf("%d %s", res.status, res.body)
				}
				if got := res.header.Get("Retry-After") != ""; got != tc.wantRetryHint {
					t.Errorf("Retry-After present %v, want %v", got, tc.wantRetryHint)
				}
				out := logs.String()
				if strings.Contains(out, secret) || strings.Contains(string(res.body), secret) {
					t.Fatalf("store error text leaked:\nlog: %s\nbody: %s", out, res.body)
				}
				if !strings.Contains(out, "timeline API store call failed") || !strings.Contains(out, `"workspace":"ws-a"`) {
					t.Fatalf("failure not logged with its workspace:\n%s", out)
				}
				if tc.wantSQLState != "" && !strings.Contains(out, `"sqlstate":"`+tc.wantSQLState+`"`) {
					t.Fatalf("failure logged without its SQLSTATE:\n%s", out)
				}
			})
		}
	}
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, seededFake(), nil)
	cases := []struct {
		name, method, path string
		want               int
		code, allow        string
	}{
		{"unknown API route", http.MethodGet, "/api/v1/workspaces/ws-a/nothing", 404, codeNotFound, ""},
		{"API prefix only", http.MethodGet, "/api/v1/workspaces/", 404, codeNotFound, ""},
		{"POST evidence", http.MethodPost, "/api/v1/workspaces/ws-a/evidence", 405, codeMethodNotAllowed, "GET, HEAD"},
		{"DELETE timeline", http.MethodDelete, "/api/v1/workspaces/ws-a/timeline", 405, codeMethodNotAllowed, "GET, HEAD"},
		{"GET entry", http.MethodGet, "/api/v1/workspaces/ws-a/timeline/1", 405, codeMethodNotAllowed, "PATCH"},
		{"POST summary", http.MethodPost, "/api/v1/workspaces/ws-a/summary", 405, codeMethodNotAllowed, "GET, HEAD, PUT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, s, req{method: tc.method, path: tc.path, token: tokA})
			if res.status != tc.want || res.errorCode(t) != tc.code || res.header.Get("Allow") != tc.allow {
				t.Fatalf("%d allow %q: %s", res.status, res.header.Get("Allow"), res.body)
			}
		})
	}
}

func TestRequestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s, _ := newTestServer(t, seededFake(), func(o *Options) { o.Registry = reg })
	do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: tokA})
	do(t, s, req{path: "/api/v1/workspaces/ws-a/timeline", token: tokA})
	do(t, s, req{path: "/api/v1/workspaces/ws-b/timeline", token: tokA})
	do(t, s, req{path: "/api/v1/workspaces/ws-a/nothing", token: tokA})
	do(t, s, req{path: "/workspaces/ws-a"})
	do(t, s, req{path: "/elsewhere"})

	for _, c := range []struct {
		route, code string
		want        float64
	}{
		{"GET " + routeTimeline, "200", 2},
		{"GET " + routeTimeline, "403", 1},
		{apiPrefix, "404", 1},
		{routePage, "200", 1},
		{routeUnmatched, "404", 1},
	} {
		if got := testutil.ToFloat64(s.metrics.requests.WithLabelValues(c.route, c.code)); got != c.want {
			t.Errorf("requests{route=%q,code=%s} = %v, want %v", c.route, c.code, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "larkline_api_request_duration_seconds"); err != nil || n != 4 {
		t.Errorf("duration series: %d (%v), want 4 routes", n, err)
	}
	// Labels never carry workspace ids.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "ws-") {
					t.Fatalf("metric %s has a workspace id in label %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func TestCompareRejectsBadVersions(t *testing.T) {
	t.Parallel()
	f := newFakeStore(wsA)
	s, _ := newTestServer(t, f, nil)
	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"", 400, codeInvalidVersion},
		{"?version=v%2F2", 400, codeInvalidVersion},
		{"?version=v9", 404, codeVersionNotFound},
	} {
		res := do(t, s, req{path: "/api/v1/workspaces/ws-a/compare" + tc.query, token: tokA})
		if res.status != tc.status || res.errorCode(t) != tc.code {
			t.Errorf("compare%s: %d %s, want %d %s", tc.query, res.status, res.body, tc.status, tc.code)
		}
	}
}
