package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// The web page is tested in a real headless browser: Debian's chromium package
// (apt-get install -y chromium), or the binary named by LARKLINE_CHROMIUM. A missing
// browser fails these tests; it never skips them. With LARKLINE_SCREENSHOT_DIR set, the
// tests also save screenshots there, for people to look at.

func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LARKLINE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no headless browser found: the web page tests need Chromium. Install Debian's package " +
		"(apt-get install -y chromium) or set LARKLINE_CHROMIUM to a Chromium or Chrome binary.")
	return ""
}

// browse loads url in headless Chromium and returns the DOM after the page's scripts
// ran (virtual time lets the fetches and one auto-refresh complete). Times render in
// Asia/Shanghai (UTC+8) and the en-US locale. With screenshot set, it also saves a PNG.
func browse(t *testing.T, url, screenshot string) string {
	t.Helper()
	bin := chromiumPath(t)
	profile := t.TempDir()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--no-default-browser-check", "--mute-audio", "--lang=en-US",
		"--user-data-dir=" + profile, "--window-size=1280,1100", "--hide-scrollbars",
		"--virtual-time-budget=20000",
	}
	if screenshot != "" {
		args = append(args, "--screenshot="+screenshot)
	} else {
		args = append(args, "--dump-dom")
	}
	// A bound, not an assertion: a wedged browser must not hang the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	cmd.Env = append(os.Environ(), "TZ=Asia/Shanghai", "LANG=en_US.UTF-8", "LC_ALL=en_US.UTF-8", "HOME="+profile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\nstderr:\n%s", url, err, stderr.String())
	}
	return stdout.String()
}

// apiRecorder records what the page sent to the API.
type apiRecorder struct {
	mu       sync.Mutex
	requests []string
	problems []string
}

func (a *apiRecorder) wrap(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			a.mu.Lock()
			a.requests = append(a.requests, r.Method+" "+r.URL.RequestURI())
			if strings.Contains(r.URL.RawQuery, token) || strings.Contains(strings.ToLower(r.URL.RawQuery), "token") {
				a.problems = append(a.problems, "token in a query string: "+r.URL.RequestURI())
			}
			if got := r.Header.Get("Authorization"); got != "Bearer "+token {
				a.problems = append(a.problems, "request without the Bearer header: "+r.URL.RequestURI())
			}
			if r.Method != http.MethodGet {
				a.problems = append(a.problems, "the read-only page sent "+r.Method+" "+r.URL.Path)
			}
			a.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (a *apiRecorder) check(t *testing.T) []string {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.problems {
		t.Error(p)
	}
	return append([]string(nil), a.requests...)
}

func screenshotPath(name string) string {
	dir := os.Getenv("LARKLINE_SCREENSHOT_DIR")
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name+".png")
}

// seedIncident writes a small real incident: messages, AI drafts bound to them, two
// human-confirmed entries and a human-written one, a hidden one, an AI summary, and then
// a recall of a message the confirmed impact entry cites. Under decisions D12 an
// untouched draft citing it would be withdrawn; the person's entry keeps its text and is
// flagged for review.
func seedIncident(t *testing.T, st *store.Store, ws ids.WorkspaceID) {
	t.Helper()
	ctx := context.Background()
	mustWorkspace(t, st, ws)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	ev := mustEvidence(t, st, ws,
		message{id: "om_01", sender: "ou_li", senderName: "Li Wei", text: "Checkout is returning 502 for about 30% of users in eu-west", at: at(2)},
		message{id: "om_02", sender: "ou_sam", senderName: "Sam Patel", text: "Started right after deploy v42 of payments-api at 10:00", at: at(4)},
		message{id: "om_03", sender: "ou_li", senderName: "Li Wei", text: "typo, ignore", at: at(5)},
		message{id: "om_04", sender: "ou_ana", senderName: "Ana Costa", text: "I'm rolling back payments-api to v41 now", at: at(9)},
		message{id: "om_05", sender: "ou_ana", senderName: "Ana Costa", text: "Rollback finished, 502s dropping", at: at(14)},
		message{id: "om_06", sender: "ou_sam", senderName: "Sam Patel", text: "Error rate back at baseline (0.1%) for 10 minutes", at: at(25)},
	)
	entries := map[string]int64{}
	upsert := func(name, fp, kind, title, body string, occurred time.Time, evidence ...int64) {
		r, err := st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: ws, Fingerprint: fp, EntryContent: store.EntryContent{
			OccurredAt: occurred, Kind: kind, Title: title, Body: body, EvidenceIDs: evidence,
			AIMetadata: []byte(`{"processor":"rules","prompt_version":"v1"}`),
		}})
		if err != nil {
			t.Fatalf("draft %s: %v", name, err)
		}
		entries[name] = r.ID
	}
	upsert("impact", "fp-impact", "impact", "Checkout failing for ~30% of EU users",
		"502s from checkout in eu-west.", at(2), ev[0], ev[2])
	upsert("finding", "fp-finding", "finding", "Errors began with payments-api deploy v42", "", at(4), ev[1])
	upsert("mitigation", "fp-mitigation", "mitigation", "Rolled back payments-api to v41",
		"Rollback started 10:09, finished 10:14.", at(9), ev[3], ev[4])
	upsert("recovery", "fp-recovery", "recovery", "Error rate back to baseline", "", at(25), ev[5])
	upsert("noise", "fp-noise", "finding", "HIDDEN ENTRY TEXT", "", at(6), ev[1])
	if _, err := st.HumanEditEntry(ctx, ws, entries["mitigation"], store.EntryPatch{Status: ptr(store.EntryStatusConfirmed)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.HumanEditEntry(ctx, ws, entries["impact"], store.EntryPatch{Status: ptr(store.EntryStatusConfirmed)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.HumanEditEntry(ctx, ws, entries["noise"], store.EntryPatch{Status: ptr(store.EntryStatusHidden)}); err != nil {
		t.Fatal(err)
	}
	mustEvidence(t, st, ws, message{id: "om_03", sender: "ou_li", senderName: "Li Wei", at: at(5), recalled: true})
	h, err := st.CreateHumanEntry(ctx, store.HumanEntry{Workspace: ws, OccurredAt: at(30), Kind: "next_step",
		Title: "Add a canary stage to payments-api deploys", Body: "Owner: Sam"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Source != store.EntryFromHuman {
		t.Fatalf("human entry: %+v", h)
	}
	if _, err := st.PutAISummaryIfNotHuman(ctx, ws,
		"Checkout failed for about 30% of EU users after payments-api v42. Rolled back to v41; errors are at baseline.", nil); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

const browserToken = "browser-token-0123456789abcdef"

func browserServer(t *testing.T, st Store, evidenceListed bool) (*httptest.Server, *apiRecorder) {
	t.Helper()
	s, _ := newTestServer(t, st, func(o *Options) {
		o.Tokens = append(o.Tokens, Token{Name: "browser", SHA256: sha(browserToken), Workspaces: []string{"*"}, Scope: ScopeCurate})
		o.EvidenceListed = evidenceListed
	})
	rec := &apiRecorder{}
	srv := httptest.NewServer(rec.wrap(s, browserToken))
	t.Cleanup(srv.Close)
	return srv, rec
}

var bodyStateRE = regexp.MustCompile(`<body data-state="([a-z]+)"`)

func bodyState(dom string) string {
	if m := bodyStateRE.FindStringSubmatch(dom); m != nil {
		return m[1]
	}
	return ""
}

func TestBrowserTimelinePage(t *testing.T) {
	st := newRealStore(t)
	const ws = ids.WorkspaceID("inc-2031")
	seedIncident(t, st, ws)
	srv, rec := browserServer(t, st, true)

	url := srv.URL + "/workspaces/" + string(ws) + "#token=" + browserToken + "&expand=all"
	dom := browse(t, url, "")
	if got := bodyState(dom); got != "ready" {
		t.Fatalf("page state %q, want ready; DOM:\n%s", got, dom)
	}
	requests := rec.check(t)

	mustContain := func(what string, needles ...string) {
		t.Helper()
		for _, n := range needles {
			if !strings.Contains(dom, n) {
				t.Errorf("%s: the page lacks %q", what, n)
			}
		}
	}
	mustContain("summary on top", "Checkout failed for about 30% of EU users after payments-api v42.", "AI draft")
	mustContain("workspace header", `<span id="ws-id">inc-2031</span>`, "pill pill-firing")

	// Entries in time order, each with its kind badge; the hidden one is absent.
	order := []string{
		"Checkout failing for ~30% of EU users",
		"Errors began with payments-api deploy v42",
		"Rolled back payments-api to v41",
		"Error rate back to baseline",
		"Add a canary stage to payments-api deploys",
	}
	last := -1
	for _, title := range order {
		i := strings.Index(dom, title)
		if i < 0 || i < last {
			t.Fatalf("entry %q missing or out of order (at %d, previous at %d)", title, i, last)
		}
		last = i
	}
	if strings.Contains(dom, "HIDDEN ENTRY TEXT") {
		t.Error("a hidden entry is shown")
	}
	if strings.Index(dom, "Checkout failed for about 30%") > strings.Index(dom, order[0]) {
		t.Error("the summary is not above the entries")
	}
	for _, kind := range []string{"impact", "finding", "mitigation", "recovery", "next_step"} {
		mustContain("kind badge", `data-kind="`+kind+`"`)
	}
	mustContain("kind labels", ">Impact<", ">Finding<", ">Mitigation<", ">Recovery<", ">Next step<")
	mustContain("status", `data-status="confirmed"`, `data-status="draft"`, ">Confirmed<", ">Draft<", "by a person")
	mustContain("no empty state", `id="empty" class="empty" hidden=""`)

	// Local time (UTC+8) on screen, UTC on hover: the impact entry happened at 10:02 UTC.
	mustContain("local time", `title="2026-03-01 10:02:00 UTC">18:02:00</time>`)
	mustContain("time zone note", "Times are in Asia/Shanghai")

	// Expanded entries show their messages: sender, time, text, and the recall note.
	mustContain("messages", "Li Wei", "Checkout is returning 502 for about 30% of users in eu-west",
		"Ana Costa", "Rollback finished, 502s dropping", `title="2026-03-01 10:14:00 UTC">18:14:00</time>`)
	mustContain("redaction", "1 message was recalled in Lark; its content is redacted.", "Message recalled — content redacted")
	mustContain("review flag", "needs review: a cited message was recalled")
	if strings.Contains(dom, "typo, ignore") {
		t.Error("the recalled message's text is shown")
	}
	if n := strings.Count(dom, "needs review: a cited message was recalled"); n != 1 {
		t.Errorf("%d entries flagged for review, want 1 (the confirmed impact entry)", n)
	}
	if n := strings.Count(dom, `class="msg`); n < 6 {
		t.Errorf("%d messages rendered, want at least 6", n)
	}

	// The token left the address bar; the page used only GETs with the Bearer header.
	if strings.Contains(dom, browserToken) {
		t.Error("the token appears in the DOM")
	}
	var sawEvidence bool
	for _, r := range requests {
		if strings.Contains(r, "/evidence?") {
			sawEvidence = true
		}
	}
	if !sawEvidence {
		t.Errorf("the page never read the evidence listing: %v", requests)
	}
	if p := screenshotPath("timeline"); p != "" {
		browse(t, url, p)
	}
}

func TestBrowserEmptyState(t *testing.T) {
	st := newRealStore(t)
	const ws = ids.WorkspaceID("inc-empty")
	mustWorkspace(t, st, ws)
	srv, rec := browserServer(t, st, true)
	url := srv.URL + "/workspaces/" + string(ws) + "#token=" + browserToken
	dom := browse(t, url, "")
	if got := bodyState(dom); got != "ready" {
		t.Fatalf("page state %q, want ready; DOM:\n%s", got, dom)
	}
	rec.check(t)
	for _, want := range []string{
		`<p id="empty" class="empty">No timeline entries yet</p>`,
		`<div id="summary-text" class="summary-text empty-summary">No summary yet.</div>`,
		`<ol id="entries" class="entries"></ol>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("empty state lacks %q", want)
		}
	}
	if p := screenshotPath("empty"); p != "" {
		browse(t, url, p)
	}
}

func TestBrowserAsksForAToken(t *testing.T) {
	st := newRealStore(t)
	mustWorkspace(t, st, wsA)
	srv, rec := browserServer(t, st, true)
	cases := []struct {
		name, fragment, reason string
	}{
		{"no token", "", "Enter an API token for workspace ws-a."},
		{"refused token", "#token=not-a-valid-token", "The server refused the token."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dom := browse(t, srv.URL+"/workspaces/ws-a"+tc.fragment, "")
			if got := bodyState(dom); got != "auth" {
				t.Fatalf("page state %q, want auth; DOM:\n%s", got, dom)
			}
			if !strings.Contains(dom, tc.reason) || !strings.Contains(dom, `<section id="auth" class="card auth">`) {
				t.Fatalf("no token prompt with %q:\n%s", tc.reason, dom)
			}
		})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.requests {
		if strings.Contains(r, "token") {
			t.Errorf("token in a request URL: %s", r)
		}
	}
}

func TestBrowserEvidenceListingDisabled(t *testing.T) {
	st := newRealStore(t)
	const ws = ids.WorkspaceID("inc-2031")
	seedIncident(t, st, ws)
	srv, rec := browserServer(t, st, false)
	dom := browse(t, srv.URL+"/workspaces/"+string(ws)+"#token="+browserToken+"&expand=all", "")
	if got := bodyState(dom); got != "ready" {
		t.Fatalf("page state %q, want ready; DOM:\n%s", got, dom)
	}
	for _, r := range rec.check(t) {
		if strings.Contains(r, "/evidence") {
			t.Errorf("the page read evidence although the timeline says it is not listed: %s", r)
		}
	}
	if !strings.Contains(dom, "Rolled back payments-api to v41") ||
		!strings.Contains(dom, "Messages are not listed by this server") {
		t.Fatalf("entries without the listing note:\n%s", dom)
	}
	if strings.Contains(dom, "Checkout is returning 502") {
		t.Fatal("message text shown although evidence listing is disabled")
	}
}

// TestBrowserCompareVersions: ?compare=v2 shows, under the serving timeline, what a
// candidate version wrote differently (issue #31): counts first, then the entries only
// in v2, only in the serving v1, and changed, with the old and the new title. The
// timeline itself stays the serving version's.
func TestBrowserCompareVersions(t *testing.T) {
	st := newRealStore(t)
	ctx := context.Background()
	const ws = ids.WorkspaceID("inc-2032")
	seedIncident(t, st, ws)
	if _, err := st.RegisterVersion(ctx, store.VersionSpec{Name: "v2", Window: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ListEvidence(ctx, ws, store.LarkMessageEvidence, nil, 10)
	if err != nil || len(evs.Items) < 6 {
		t.Fatalf("evidence %d %v", len(evs.Items), err)
	}
	for _, d := range []struct {
		fp, kind, title string
		at              int
	}{
		{"fp-finding", "finding", "Errors began with the payments-api v42 rollout at 10:00", 4}, // changed
		{"fp-recovery", "recovery", "Error rate back to baseline", 25},                          // the same
		{"fp-v2-only", "decision", "CANDIDATE-ONLY: freeze payments-api deploys", 6},
	} {
		if _, err := st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: ws, Fingerprint: d.fp, ProcessorVersion: "v2",
			EntryContent: store.EntryContent{OccurredAt: t0.Add(time.Duration(d.at) * time.Minute), Kind: d.kind, Title: d.title,
				EvidenceIDs: []int64{evs.Items[1].ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	srv, rec := browserServer(t, st, true)
	dom := browse(t, srv.URL+"/workspaces/"+string(ws)+"?compare=v2#token="+browserToken, "")
	if got := bodyState(dom); got != "ready" {
		t.Fatalf("page state %q, want ready; DOM:\n%s", got, dom)
	}
	rec.check(t)
	for _, want := range []string{
		`<section id="compare" class="card compare">`,
		`<span id="compare-version">v2</span>`, "serving: v1",
		"1 entry only in v2, 0 entries only in v1, 1 changed; summary changed",
		`data-compare="only-version"`, "Only in v2", "CANDIDATE-ONLY: freeze payments-api deploys",
		`data-compare="changed"`, `<span class="compare-old">Errors began with payments-api deploy v42</span>`,
		`<span class="compare-title">Errors began with the payments-api v42 rollout at 10:00</span>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(dom, "Error rate back to baseline</span>") {
		t.Error("an entry both versions wrote alike is listed as a difference")
	}
	// the timeline is the serving version's: the candidate's entry is only in the comparison
	timeline := dom[:strings.Index(dom, `<section id="compare"`)]
	if strings.Contains(timeline, "CANDIDATE-ONLY") {
		t.Error("the candidate's entry is in the serving timeline")
	}
	if n := strings.Count(dom, "Errors began with payments-api deploy v42"); n != 2 {
		t.Errorf("the serving finding appears %d times, want 2 (timeline and comparison)", n)
	}

	// an unknown version is said so, not shown as an empty comparison
	dom = browse(t, srv.URL+"/workspaces/"+string(ws)+"?compare=v9#token="+browserToken, "")
	if got := bodyState(dom); got != "error" || !strings.Contains(dom, "No such processor version") {
		t.Errorf("?compare=v9: state %q; DOM:\n%s", bodyState(dom), dom)
	}
	if p := screenshotPath("compare"); p != "" {
		browse(t, srv.URL+"/workspaces/"+string(ws)+"?compare=v2#token="+browserToken, p)
	}
}
