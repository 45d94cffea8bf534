package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/logtest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newRealStore returns a store on a fresh, migrated database of its own.
func newRealStore(t testing.TB) *store.Store {
	t.Helper()
	return teststore.New(t)
}

func mustWorkspace(t testing.TB, st *store.Store, ws ids.WorkspaceID) {
	t.Helper()
	w := store.Workspace{ID: ws, Type: "incident", Status: store.WorkspaceFiring, CreatedAt: t0.Add(-time.Hour)}
	if _, err := st.UpsertWorkspace(context.Background(), w, 1); err != nil {
		t.Fatalf("upsert workspace %s: %v", ws, err)
	}
}

type message struct {
	id, sender, senderName, text string
	at                           time.Time
	recalled                     bool
}

// mustEvidence stores Lark message evidence and returns the row ids in input order.
func mustEvidence(t testing.TB, st *store.Store, ws ids.WorkspaceID, msgs ...message) []int64 {
	t.Helper()
	batch := make([]store.Evidence, len(msgs))
	for i, m := range msgs {
		hash := fmt.Sprintf("h-%s-%s-%v", m.id, m.text, m.recalled)
		batch[i] = store.Evidence{
			WorkspaceID: ws, Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
			SourceKey:  ids.MessageSourceKey("oc_incident", ids.MessageID(m.id)),
			OccurredAt: m.at, ActorID: m.sender, ActorDisplayName: m.senderName,
			Content: m.text, ContentHash: hash, Deleted: m.recalled, SynthesisEligible: !m.recalled,
			Metadata: json.RawMessage(fmt.Sprintf(`{"chat_id":"oc_incident","message_id":%q,"message_type":"text"}`, m.id)),
		}
	}
	out, err := st.UpsertEvidence(context.Background(), batch)
	if err != nil {
		t.Fatalf("upsert evidence: %v", err)
	}
	idsOut := make([]int64, len(out))
	for i, o := range out {
		idsOut[i] = o.ID
	}
	return idsOut
}

// client calls a live test server.
type client struct {
	t    *testing.T
	base string
}

func serve(t *testing.T, st Store, mutate func(*Options)) (*client, *logtest.Buffer) {
	t.Helper()
	s, logs := newTestServer(t, st, mutate)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &client{t: t, base: srv.URL}, logs
}

func (c *client) do(method, path, token, body string) response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (c *client) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := c.do(r.Method, r.URL.RequestURI(), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "")
		for k, v := range res.header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.status)
		_, _ = w.Write(res.body)
	})
}

func TestIntegrationEvidencePagingWithEqualTimestamps(t *testing.T) {
	t.Parallel()
	st := newRealStore(t)
	ctx := context.Background()
	mustWorkspace(t, st, wsA)
	mustWorkspace(t, st, wsB)

	// 40 messages: 18 share t0 exactly, 10 share t0+1µs, the rest spread out; written in
	// a shuffled order so that ids do not follow time.
	var msgs []message
	for i := range 40 {
		at := t0
		switch {
		case i >= 28:
			at = t0.Add(time.Duration(i) * time.Second)
		case i >= 18:
			at = t0.Add(time.Microsecond)
		}
		msgs = append(msgs, message{id: fmt.Sprintf("om_%02d", i), sender: "ou_a", senderName: "Alice", text: fmt.Sprintf("m%d", i), at: at})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	for _, m := range msgs {
		mustEvidence(t, st, wsA, m) // one by one: ids in shuffled order
	}
	mustEvidence(t, st, wsB, message{id: "om_b1", text: "other workspace", at: t0}, message{id: "om_b2", text: "other", at: t0.Add(time.Microsecond)})

	// The expected order, read straight from the store in one page.
	all, err := st.ListEvidence(ctx, wsA, store.LarkMessageEvidence, nil, 1000)
	if err != nil || len(all.Items) != 40 || all.Next != nil {
		t.Fatalf("direct read: %d items, next %v, %v", len(all.Items), all.Next, err)
	}
	var want []int64
	for i, e := range all.Items {
		want = append(want, e.ID)
		if i > 0 && !all.Items[i-1].Cursor().Less(e.Cursor()) {
			t.Fatalf("store order broken at %d", i)
		}
	}

	c, _ := serve(t, st, nil)
	for _, limit := range []int{1, 4, 7, 18, 39, 40, MaxPageSize} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got, pages := pageAll(t, c.handler(), wsA, tokA, limit, nil)
			if !slices.Equal(got, want) {
				t.Fatalf("ids\n got %v\nwant %v", got, want)
			}
			if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
				t.Fatalf("%d pages, want %d", pages, wantPages)
			}
		})
	}

	t.Run("rows written behind the cursor during the walk are not repeated", func(t *testing.T) {
		res := c.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence?limit=5", tokA, "")
		var p evidencePage
		res.decode(t, &p)
		// A late message at the very first timestamp (its id is larger than all others).
		mustEvidence(t, st, wsA, message{id: "om_late", text: "late", at: t0.Add(-time.Minute)})
		seen := map[int64]int{}
		for _, it := range p.Items {
			seen[it.ID]++
		}
		for p.NextCursor != nil {
			res = c.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence?limit=5&cursor="+url.QueryEscape(*p.NextCursor), tokA, "")
			p = evidencePage{}
			res.decode(t, &p)
			for _, it := range p.Items {
				seen[it.ID]++
			}
		}
		for _, id := range want {
			if seen[id] != 1 {
				t.Fatalf("id %d seen %d times", id, seen[id])
			}
		}
		if len(seen) != len(want) {
			t.Fatalf("%d ids seen, want %d (the late row sorts before the cursor)", len(seen), len(want))
		}
	})

	t.Run("since", func(t *testing.T) {
		got, _ := pageAll(t, c.handler(), wsA, tokA, 3, url.Values{"since": {t0.Add(time.Microsecond).Format(time.RFC3339Nano)}})
		if !slices.Equal(got, want[18:]) {
			t.Fatalf("since t0+1µs:\n got %v\nwant %v", got, want[18:])
		}
	})

	t.Run("item fields", func(t *testing.T) {
		mustEvidence(t, st, wsB, message{id: "om_recalled", sender: "ou_bob", senderName: "Bob", at: t0.Add(time.Hour), recalled: true})
		res := c.do(http.MethodGet, "/api/v1/workspaces/ws-b/evidence", tokB, "")
		var p evidencePage
		res.decode(t, &p)
		if len(p.Items) != 3 || p.NextCursor != nil {
			t.Fatalf("ws-b page: %+v", p)
		}
		first, last := p.Items[0], p.Items[2]
		if first.Content != "other workspace" || first.SourceKey != "chat/oc_incident/message/om_b1" || first.Deleted ||
			!first.OccurredAt.Equal(t0) || first.ContentHash == "" {
			t.Fatalf("first item: %+v", first)
		}
		var meta map[string]string
		if err := json.Unmarshal(first.Metadata, &meta); err != nil || meta["message_id"] != "om_b1" {
			t.Fatalf("metadata %s: %v", first.Metadata, err)
		}
		if !last.Deleted || last.ActorDisplayName != "Bob" || last.ActorID != "ou_bob" {
			t.Fatalf("recalled item: %+v", last)
		}
	})
}

func TestIntegrationCursorTamperingAndListingSwitch(t *testing.T) {
	t.Parallel()
	st := newRealStore(t)
	mustWorkspace(t, st, wsA)
	mustWorkspace(t, st, wsB)
	for _, ws := range []ids.WorkspaceID{wsA, wsB} {
		mustEvidence(t, st, ws, message{id: "om_1", text: "a", at: t0}, message{id: "om_2", text: "b", at: t0}, message{id: "om_3", text: "c", at: t0})
	}
	c, _ := serve(t, st, nil)
	next := func(ws ids.WorkspaceID) string {
		var p evidencePage
		c.do(http.MethodGet, "/api/v1/workspaces/"+string(ws)+"/evidence?limit=1", tokAll, "").decode(t, &p)
		return *p.NextCursor
	}
	curA, curB := next(wsA), next(wsB)
	for name, cur := range map[string]string{
		"tampered position":    flipChar(curA, 5),
		"tampered MAC":         flipChar(curA, len(curA)-3),
		"of another workspace": curB,
		"truncated":            curA[:len(curA)-1],
		"store format":         store.Cursor{OccurredAt: t0, ID: 1}.String(),
	} {
		res := c.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence?limit=1&cursor="+url.QueryEscape(cur), tokA, "")
		if res.status != http.StatusBadRequest || res.errorCode(t) != codeInvalidCursor {
			t.Fatalf("%s cursor: %d %s", name, res.status, res.body)
		}
	}
	if res := c.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence?limit=1&cursor="+url.QueryEscape(curA), tokA, ""); res.status != http.StatusOK {
		t.Fatalf("genuine cursor: %d %s", res.status, res.body)
	}

	off, _ := serve(t, st, func(o *Options) { o.EvidenceListed = false })
	res := off.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence", tokA, "")
	if res.status != http.StatusNotFound || res.errorCode(t) != codeEvidenceListingDisabled {
		t.Fatalf("listing disabled: %d %s", res.status, res.body)
	}
	if strings.Contains(string(res.body), `"a"`) {
		t.Fatalf("disabled listing leaked content: %s", res.body)
	}
}

// TestIntegrationForgedCursorRefused: a cursor sealed with the key larkline once used
// by default (public in its source) or with any key but the server's, or a genuine
// cursor edited to point elsewhere, is refused (issue #19). Before the fix a server
// built without a key sealed cursors with that public key and accepted the forgery.
func TestIntegrationForgedCursorRefused(t *testing.T) {
	t.Parallel()
	st := newRealStore(t)
	mustWorkspace(t, st, wsA)
	mustEvidence(t, st, wsA, message{id: "om_1", text: "a", at: t0}, message{id: "om_2", text: "b", at: t0.Add(time.Second)},
		message{id: "om_3", text: "c", at: t0.Add(2 * time.Second)})
	c, _ := serve(t, st, nil)
	var p evidencePage
	c.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence?limit=1", tokA, "").decode(t, &p)
	if p.NextCursor == nil {
		t.Fatal("no next_cursor")
	}
	genuine := *p.NextCursor
	// The position a forger wants: far in the past, id 0 (the first row of the workspace).
	pos := store.Cursor{OccurredAt: t0.Add(-time.Hour), ID: 0}
	forge := func(key string) string {
		fc, err := newCursorCodec([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return fc.encode(wsA, store.LarkMessageEvidence, pos)
	}
	raw, err := base64.RawURLEncoding.DecodeString(genuine)
	if err != nil {
		t.Fatal(err)
	}
	edited := append([]byte(nil), raw...)
	edited[8] ^= 0x40 // the position's time, MAC kept
	for name, cur := range map[string]string{
		"sealed with the formerly public default key": forge("larkline/httpapi/default-cursor-key/v1"),
		"sealed with a guessed key":                   forge("0123456789abcdef0123456789abcdef"),
		"genuine cursor with its position edited":     base64.RawURLEncoding.EncodeToString(edited),
	} {
		res := c.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence?limit=1&cursor="+url.QueryEscape(cur), tokA, "")
		if res.status != http.StatusBadRequest || res.errorCode(t) != codeInvalidCursor {
			t.Errorf("%s: %d %s, want 400 %s", name, res.status, res.body, codeInvalidCursor)
		}
	}
	if res := c.do(http.MethodGet, "/api/v1/workspaces/ws-a/evidence?limit=1&cursor="+url.QueryEscape(genuine), tokA, ""); res.status != http.StatusOK {
		t.Fatalf("genuine cursor: %d %s", res.status, res.body)
	}
}

func TestIntegrationAccessRules(t *testing.T) {
	t.Parallel()
	st := newRealStore(t)
	for _, ws := range []ids.WorkspaceID{wsA, wsB} {
		mustWorkspace(t, st, ws)
		if _, err := st.PutAISummaryIfNotHuman(context.Background(), ws, "AI summary", nil); err != nil {
			t.Fatal(err)
		}
	}
	on, _ := serve(t, st, nil)
	off, _ := serve(t, st, func(o *Options) { o.Tokens = nil })
	cases := []struct {
		name  string
		c     *client
		token string
		ws    ids.WorkspaceID
		want  int
		code  string
	}{
		{"no tokens configured refuses a would-be valid token", off, tokAll, wsA, 403, codeAPIDisabled},
		{"missing token", on, "", wsA, 401, codeMissingToken},
		{"unknown token", on, "guess", wsA, 401, codeInvalidToken},
		{"token for another workspace", on, tokB, wsA, 403, codeForbiddenWorkspace},
		{"scoped token", on, tokA, wsA, 200, ""},
		{"wildcard token", on, tokAll, wsB, 200, ""},
		{"listed but absent workspace", on, tokA, wsAbsent, 404, codeWorkspaceNotFound},
	}
	for _, tc := range cases {
		for _, rt := range apiRoutes {
			t.Run(tc.name+"/"+rt.name, func(t *testing.T) {
				if rt.name == "patch entry" {
					return // needs an entry; covered by the edit test
				}
				res := tc.c.do(rt.method, strings.Replace(rt.path, "%s", string(tc.ws), 1), tc.token, rt.body)
				if res.status != tc.want {
					t.Fatalf("status %d, want %d: %s", res.status, tc.want, res.body)
				}
				if tc.code != "" && res.errorCode(t) != tc.code {
					t.Fatalf("code %q, want %q", res.errorCode(t), tc.code)
				}
			})
		}
	}
}

func TestIntegrationHumanEditsAreVisibleAndProtected(t *testing.T) {
	t.Parallel()
	st := newRealStore(t)
	ctx := context.Background()
	mustWorkspace(t, st, wsA)
	ev := mustEvidence(t, st, wsA,
		message{id: "om_1", sender: "ou_a", senderName: "Alice", text: "rolling back v42", at: t0},
		message{id: "om_2", sender: "ou_b", senderName: "Bob", text: "rollback done", at: t0.Add(time.Minute)},
		message{id: "om_3", sender: "ou_b", senderName: "Bob", text: "errors at baseline", at: t0.Add(2 * time.Minute)},
	)
	draft := func(fp, title string, evidence ...int64) store.EntryDraft {
		return store.EntryDraft{Workspace: wsA, Fingerprint: fp, EntryContent: store.EntryContent{
			OccurredAt: t0, Kind: "mitigation", Title: title, Body: "AI body", EvidenceIDs: evidence,
			AIMetadata: json.RawMessage(`{"prompt_version":"rules-v1"}`),
		}}
	}
	res1, err := st.UpsertDraftEntry(ctx, draft("fp-rollback", "Rolled back", ev[0]))
	if err != nil {
		t.Fatal(err)
	}
	res2, err := st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: wsA, Fingerprint: "fp-recovery", EntryContent: store.EntryContent{
		OccurredAt: t0.Add(2 * time.Minute), Kind: "recovery", Title: "Errors at baseline", EvidenceIDs: []int64{ev[2]},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, logs := serve(t, st, nil)
	timeline := func() map[int64]entryJSON {
		var tl timelineJSON
		c.do(http.MethodGet, "/api/v1/workspaces/ws-a/timeline", tokA, "").decode(t, &tl)
		out := map[int64]entryJSON{}
		for i, e := range tl.Entries {
			if i > 0 && e.OccurredAt.Before(tl.Entries[i-1].OccurredAt) {
				t.Fatalf("timeline out of order: %+v", tl.Entries)
			}
			out[e.ID] = e
		}
		return out
	}
	patch := func(id int64, body string) entryJSON {
		t.Helper()
		res := c.do(http.MethodPatch, fmt.Sprintf("/api/v1/workspaces/ws-a/timeline/%d", id), tokA, body)
		if res.status != http.StatusOK {
			t.Fatalf("patch %s: %d %s", body, res.status, res.body)
		}
		var e entryJSON
		res.decode(t, &e)
		return e
	}

	if e := timeline()[res1.ID]; e.Title != "Rolled back" || e.HumanEdited || e.Source != "ai" || e.Status != "draft" ||
		!slices.Equal(e.EvidenceIDs, ev[:1]) {
		t.Fatalf("AI draft before any edit: %+v", e)
	}

	// A person rewrites the entry: the answer and the timeline show it.
	e := patch(res1.ID, `{"title":"Rolled back checkout to v41","body":"Bob confirmed at 10:01"}`)
	if e.Title != "Rolled back checkout to v41" || !e.HumanEdited || e.HumanEditedAt == nil || e.Status != "draft" {
		t.Fatalf("patch answer: %+v", e)
	}
	if got := timeline()[res1.ID]; got.Title != e.Title || got.Body != "Bob confirmed at 10:01" || !got.HumanEdited {
		t.Fatalf("timeline after the edit: %+v", got)
	}

	// Synthesis runs again with the same fingerprint: new evidence attaches, the text stays.
	again, err := st.UpsertDraftEntry(ctx, draft("fp-rollback", "Rolled back (AI rewrite)", ev[0], ev[1]))
	if err != nil || again.ID != res1.ID || !again.HumanOwned {
		t.Fatalf("AI upsert after the edit: %+v %v", again, err)
	}
	got := timeline()[res1.ID]
	if got.Title != "Rolled back checkout to v41" || got.Body != "Bob confirmed at 10:01" || got.Kind != "mitigation" {
		t.Fatalf("the AI upsert changed a human-edited entry: %+v", got)
	}
	if !slices.Equal(got.EvidenceIDs, ev[:2]) {
		t.Fatalf("evidence ids %v, want %v (new evidence attaches)", got.EvidenceIDs, ev[:2])
	}

	// Confirming only: the entry is protected too.
	if e := patch(res2.ID, `{"status":"confirmed"}`); e.Status != "confirmed" || !e.HumanEdited || e.Title != "Errors at baseline" {
		t.Fatalf("confirm: %+v", e)
	}
	if _, err := st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: wsA, Fingerprint: "fp-recovery", EntryContent: store.EntryContent{
		OccurredAt: t0, Kind: "recovery", Title: "AI retitled", EvidenceIDs: []int64{ev[2]},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := timeline()[res2.ID]; got.Title != "Errors at baseline" || got.Status != "confirmed" {
		t.Fatalf("confirmed entry changed by synthesis: %+v", got)
	}

	// Hiding takes it off the timeline; confirming shows it again, still protected.
	patch(res2.ID, `{"status":"hidden"}`)
	if _, ok := timeline()[res2.ID]; ok {
		t.Fatal("hidden entry still on the timeline")
	}
	patch(res2.ID, `{"status":"confirmed"}`)
	if got, ok := timeline()[res2.ID]; !ok || got.Title != "Errors at baseline" {
		t.Fatalf("shown again: %+v %v", got, ok)
	}

	// Bad edits change nothing.
	for _, body := range []string{`{"status":"gone"}`, `{"title":""}`, `{}`} {
		res := c.do(http.MethodPatch, fmt.Sprintf("/api/v1/workspaces/ws-a/timeline/%d", res1.ID), tokA, body)
		if res.status != http.StatusBadRequest {
			t.Fatalf("patch %s: %d", body, res.status)
		}
	}
	if res := c.do(http.MethodPatch, "/api/v1/workspaces/ws-a/timeline/999999", tokA, `{"status":"confirmed"}`); res.status != 404 || res.errorCode(t) != codeEntryNotFound {
		t.Fatalf("missing entry: %d %s", res.status, res.body)
	}
	if got := timeline()[res1.ID]; got.Title != "Rolled back checkout to v41" {
		t.Fatalf("a rejected edit changed the entry: %+v", got)
	}
	if out := logs.String(); strings.Contains(out, "Rolled back checkout") || strings.Contains(out, "Bob confirmed") {
		t.Fatalf("logs carry entry text:\n%s", out)
	}
}

func TestIntegrationSummaryPutThenGet(t *testing.T) {
	t.Parallel()
	st := newRealStore(t)
	ctx := context.Background()
	mustWorkspace(t, st, wsA)
	c, _ := serve(t, st, nil)
	get := func() summaryJSON {
		var s summaryJSON
		c.do(http.MethodGet, "/api/v1/workspaces/ws-a/summary", tokA, "").decode(t, &s)
		return s
	}
	if res := c.do(http.MethodGet, "/api/v1/workspaces/ws-a/summary", tokA, ""); res.status != 404 || res.errorCode(t) != codeSummaryNotFound {
		t.Fatalf("before any summary: %d %s", res.status, res.body)
	}
	if _, err := st.PutAISummaryIfNotHuman(ctx, wsA, "AI: checkout errors", nil); err != nil {
		t.Fatal(err)
	}
	if s := get(); s.Source != "ai" || s.Text != "AI: checkout errors" {
		t.Fatalf("AI summary: %+v", s)
	}
	res := c.do(http.MethodPut, "/api/v1/workspaces/ws-a/summary", tokA, `{"text":"Checkout down 10:02-10:20 UTC; v42 rolled back."}`)
	if res.status != http.StatusOK {
		t.Fatalf("put: %d %s", res.status, res.body)
	}
	if s := get(); s.Source != "human" || s.Text != "Checkout down 10:02-10:20 UTC; v42 rolled back." || s.UpdatedAt.IsZero() {
		t.Fatalf("after put: %+v", s)
	}
	written, err := st.PutAISummaryIfNotHuman(ctx, wsA, "AI: overwrite attempt", nil)
	if err != nil || written {
		t.Fatalf("AI summary over a human one: written=%v %v", written, err)
	}
	if s := get(); s.Source != "human" || !strings.HasPrefix(s.Text, "Checkout down") {
		t.Fatalf("human summary overwritten: %+v", s)
	}
	if res := c.do(http.MethodPut, "/api/v1/workspaces/ws-a/summary", tokB, `{"text":"x"}`); res.status != http.StatusForbidden {
		t.Fatalf("put with a foreign token: %d", res.status)
	}
}
