package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// TestVersionsSideBySide is issue #31's "Show it" on the real broker and Postgres,
// through the binary: v1 serves with entries, a human entry, a human edit and a
// human summary; `versions start v2` with another window rule runs next to it (the
// running windows process picks it up, no second listener); `versions list` shows it
// catching up, then caught up; users' API output is byte-identical until `promote
// v2`; `diff v1 v2` names exactly the entries and windows that differ; after the
// promotion the API serves v2 with the human content still there; `retire v1` leaves
// no v1 group, topic, row or state directory. A second run of every command is a
// no-op. Last, a synthesis-only candidate with its own synthesizer (the model, where
// the deployment runs the rules) drafts differently from the serving version in the
// same deployment, leaving the serving version's drafts as they were.
func TestVersionsSideBySide(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t)
	p := newPipeline(t, pipelineOptions{ModelURL: model.url(), ModelForVersions: true})
	ctx := p.ctx
	p.deliver(ctx)
	p.finish(4 * time.Minute)

	// A human edits one of v1's drafts: the edit is the workspace's from now on.
	var edited int64
	if err := p.pool.QueryRow(ctx, `SELECT id FROM workspace_timeline_entries
		WHERE processor_version = 'v1' AND status = 'draft' ORDER BY id LIMIT 1`).Scan(&edited); err != nil {
		t.Fatalf("no v1 draft to edit: %v", err)
	}
	var editedWS string
	if err := p.pool.QueryRow(ctx, `SELECT workspace_id FROM workspace_timeline_entries WHERE id = $1`, edited).Scan(&editedWS); err != nil {
		t.Fatal(err)
	}
	title := "Edited by the incident commander"
	if _, err := p.store.HumanEditEntry(ctx, ids.WorkspaceID(editedWS), edited, store.EntryPatch{Title: &title}); err != nil {
		t.Fatal(err)
	}
	before := p.usersView(ctx, t)

	// start v2 with a 5-minute window, and follow it with `versions list`
	out := p.cli(ctx, "versions", "start", "v2", "--window", "5m", "--wait=false")
	if !strings.Contains(out, "started v2 as a candidate") {
		t.Fatalf("versions start printed:\n%s", out)
	}
	first := p.versionsList(ctx, t)["v2"]
	if first.State != "candidate" || first.CaughtUp || first.WindowSeconds != 300 {
		t.Errorf("v2 right after start: %+v, want a candidate not caught up, window 300 s", first)
	}
	var caught versionRow
	if err := waitFor(ctx, 3*time.Minute, func() bool {
		caught = p.versionsList(ctx, t)["v2"]
		return caught.CaughtUp
	}, func() string { return fmt.Sprintf("v2 never caught up: %+v", caught) }); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 3*time.Minute, func() bool {
		g, err := p.store.Progress(ctx, p.eligibleWorkspaces(), 5*time.Minute, "v2", 3)
		return err == nil && g.Windows > 0 && g.Completed+g.Ignored == g.Windows
	}, func() string {
		g, err := p.store.Progress(ctx, p.eligibleWorkspaces(), 5*time.Minute, "v2", 3)
		return fmt.Sprintf("%+v %v", g, err)
	}); err != nil {
		t.Fatalf("v2's windows never all synthesized: %v", err)
	}
	listed := p.versionsList(ctx, t)
	t.Logf("versions list: v1 %+v; v2 %+v", listed["v1"], listed["v2"])
	text := p.cli(ctx, "versions", "list")
	t.Logf("versions list:\n%s", text)
	for _, want := range []string{"VERSION", "v1 ", "serving", "v2 ", "candidate", "(caught up)", "v2: groups " + p.group("windows-v2")} {
		if !strings.Contains(text, want) {
			t.Errorf("versions list lacks %q", want)
		}
	}
	if v1 := listed["v1"]; v1.State != "serving" || v1.WindowSeconds != 600 || v1.WindowsClosed == 0 {
		t.Errorf("v1 in the list: %+v", v1)
	}
	// both versions' metrics go through the windows process's one ops listener
	for _, v := range []string{"v1", "v2"} {
		if n, err := p.procs[procWindows].metric(ctx, "larkline_windows_evidence_total", `version="`+v+`"`); err != nil || n == 0 {
			t.Errorf("larkline_windows_evidence_total{version=%q} = %v (%v), want > 0", v, n, err)
		}
	}
	// a version started from a time (a Kafka record time: every record of this test is
	// younger, so it reads them all), followed until it caught up, then retired as a
	// candidate
	firstAt, _ := p.sc.Bounds()
	progress := p.cli(ctx, "versions", "start", "v3", "--from-time", firstAt.Add(15*time.Minute).UTC().Format(time.RFC3339), "--progress", "1s")
	t.Logf("versions start v3 --from-time:\n%s", progress)
	if !strings.Contains(progress, "records/s, ETA") || !strings.Contains(progress, "caught up: v3") {
		t.Errorf("versions start v3 printed no progress or never caught up:\n%s", progress)
	}
	p.cli(ctx, "versions", "retire", "v3")
	p.assertNothingLeftOf(ctx, t, "v3")
	p.brokenCandidate(ctx, t, "v5")

	if again := p.cliFails(ctx, t, "versions", "start", "v2"); !strings.Contains(again, "exists") {
		t.Errorf("a second start of v2 was not refused as existing:\n%s", again)
	}

	if after := p.usersView(ctx, t); after != before {
		t.Fatalf("a candidate changed what users see:\nbefore %s\nafter  %s", before, after)
	}

	// diff: exactly what the two namespaces hold differently, counted independently
	p.checkDiff(ctx, t, "v1", "v2")
	if text := p.cli(ctx, "versions", "diff", "v1", "v2", "--details"); !strings.Contains(text, "WORKSPACE") {
		t.Errorf("versions diff --details printed:\n%s", text)
	}

	// promote: a dry run changes nothing; the promotion switches the running API
	if out := p.cli(ctx, "versions", "promote", "v2", "--dry-run"); !strings.Contains(out, "would promote v2") {
		t.Errorf("promote --dry-run printed:\n%s", out)
	}
	if after := p.usersView(ctx, t); after != before {
		t.Fatal("promote --dry-run changed what users see")
	}
	p.cli(ctx, "versions", "promote", "v2")
	if out := p.cli(ctx, "versions", "promote", "v2"); !strings.Contains(out, "serving already") {
		t.Errorf("a second promote printed:\n%s", out)
	}
	served := p.usersView(ctx, t)
	for _, w := range p.eligibleWorkspaces() {
		v2, err := p.store.VersionVisibleEntries(ctx, w, "v2")
		if err != nil {
			t.Fatal(err)
		}
		api := p.apiEntries(ctx, t, w)
		var wantIDs []int64
		for _, e := range v2 {
			wantIDs = append(wantIDs, e.ID)
		}
		if fmt.Sprint(api) != fmt.Sprint(wantIDs) {
			t.Errorf("workspace %s: the API serves %v after the promotion, v2's view is %v", w, api, wantIDs)
		}
		if w == p.human.workspace && !slices.Contains(api, p.human.entry.ID) {
			t.Errorf("the human entry %d is gone after the promotion", p.human.entry.ID)
		}
		if string(w) == editedWS && !slices.Contains(api, edited) {
			t.Errorf("the human-edited entry %d is gone after the promotion", edited)
		}
	}
	if !strings.Contains(served, p.human.summary) {
		t.Error("the human summary is gone after the promotion")
	}

	// retire v1: nothing of it is left, and a second retire has nothing to do
	if out := p.cli(ctx, "versions", "retire", "v1", "--dry-run"); !strings.Contains(out, "would delete") {
		t.Errorf("retire --dry-run printed:\n%s", out)
	}
	if msg := p.cliFails(ctx, t, "versions", "retire", "v2"); !strings.Contains(msg, "serving") {
		t.Errorf("retiring the serving version was not refused:\n%s", msg)
	}
	out = p.cli(ctx, "versions", "retire", "v1")
	t.Logf("versions retire v1:\n%s", out)
	if out := p.cli(ctx, "versions", "retire", "v1"); !strings.Contains(out, "nothing left to delete") {
		t.Errorf("a second retire printed:\n%s", out)
	}
	p.assertNothingLeftOf(ctx, t, "v1")
	if after := p.usersView(ctx, t); after != served {
		t.Errorf("retiring v1 changed what users see")
	}
	if v := p.versionsList(ctx, t)["v1"]; v.State != "retired" {
		t.Errorf("v1 after retire: %+v", v)
	}

	// windows retry: a window of the serving version that ended needs_attention (here
	// put there by hand) is synthesized again by the running workers' stale sweep
	var key store.WindowKey
	var id int64
	if err := p.pool.QueryRow(ctx, `SELECT id FROM workspace_timeline_sync_states
		WHERE source_type = $1 AND source_key LIKE 'chat/%/processor/v2/window/%' AND status = 'completed' ORDER BY id LIMIT 1`,
		ids.SourceTypeLarkWindow).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var wsID, sourceKey string
	if err := p.pool.QueryRow(ctx, `SELECT workspace_id, source_key FROM workspace_timeline_sync_states WHERE id = $1`, id).Scan(&wsID, &sourceKey); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(sourceKey, "/")
	start, err := time.Parse(time.RFC3339, parts[len(parts)-1])
	if err != nil {
		t.Fatal(err)
	}
	key = store.WindowKey{Workspace: ids.WorkspaceID(wsID), Chat: ids.ChatID(parts[1]), ProcessorVersion: "v2", Start: start}
	if _, err := p.store.TransitionWindow(ctx, key, []store.WindowStatus{store.WindowCompleted}, store.WindowNeedsAttention, nil); err != nil {
		t.Fatal(err)
	}
	out = p.cli(ctx, "windows", "retry", "--workspace", wsID, "--window", parts[len(parts)-1], "--chat", parts[1])
	if !strings.Contains(out, "retried   "+sourceKey) {
		t.Errorf("windows retry printed:\n%s", out)
	}
	var st store.WindowState
	if err := waitFor(ctx, time.Minute, func() bool {
		st, err = p.store.GetWindow(ctx, key)
		return err == nil && st.Status == store.WindowCompleted
	}, func() string {
		return fmt.Sprintf("the retried window is %s at attempt %d (%v)", st.Status, st.Attempts, err)
	}); err != nil {
		t.Fatal(err)
	}
	if st.Attempts != 1 {
		t.Errorf("the retried window completed at attempt %d, want 1", st.Attempts)
	}
	if out := p.cli(ctx, "windows", "retry", "--workspace", wsID, "--window", parts[len(parts)-1]); !strings.Contains(out, "unchanged") || strings.Contains(out, "retried   ") {
		t.Errorf("a second windows retry printed:\n%s", out)
	}
	if after := p.usersView(ctx, t); after != served {
		t.Errorf("rerunning a window whose drafts exist changed what users see")
	}

	// --synthesis-only: v4 synthesizes v2's closed windows again, with no window
	// processor of its own; users keep seeing v2 until v4 is promoted
	out = p.cli(ctx, "versions", "start", "v4", "--synthesis-only", "--progress", "1s")
	t.Logf("versions start v4 --synthesis-only:\n%s", out)
	if !strings.Contains(out, "windows/s, ETA") || !strings.Contains(out, "caught up: v4") {
		t.Fatalf("versions start v4 --synthesis-only printed no progress or never caught up:\n%s", out)
	}
	if again := p.cliFails(ctx, t, "versions", "start", "v4", "--synthesis-only"); !strings.Contains(again, "exists") {
		t.Errorf("a second start of v4 was not refused:\n%s", again)
	}
	listed = p.versionsList(ctx, t)
	if v2, v4 := listed["v2"], listed["v4"]; v4.WindowsSynthesized != v2.WindowsSynthesized || v4.WindowsClosed != v2.WindowsClosed {
		t.Errorf("v4 synthesized %d of %d windows, v2 %d of %d", v4.WindowsSynthesized, v4.WindowsClosed, v2.WindowsSynthesized, v2.WindowsClosed)
	}
	if after := p.usersView(ctx, t); after != served {
		t.Errorf("a synthesis-only candidate changed what users see")
	}
	p.checkDiff(ctx, t, "v2", "v4")
	if msg := p.cliFails(ctx, t, "versions", "retire", "v2"); !strings.Contains(msg, "serving") {
		t.Errorf("retiring v2 was not refused:\n%s", msg)
	}
	p.cli(ctx, "versions", "promote", "v4")
	for _, w := range p.eligibleWorkspaces() {
		v4, err := p.store.VersionVisibleEntries(ctx, w, "v4")
		if err != nil {
			t.Fatal(err)
		}
		var wantIDs []int64
		for _, e := range v4 {
			wantIDs = append(wantIDs, e.ID)
		}
		if api := p.apiEntries(ctx, t, w); fmt.Sprint(api) != fmt.Sprint(wantIDs) {
			t.Errorf("workspace %s: the API serves %v after promoting v4, v4's view is %v", w, api, wantIDs)
		}
	}
	if msg := p.cliFails(ctx, t, "versions", "retire", "v2"); !strings.Contains(msg, "in use") {
		t.Errorf("retiring v2, whose windows v4 synthesizes, was not refused:\n%s", msg)
	}

	p.ownSynthesisCandidate(ctx, t, model, "v4", "v6")
}

// ownSynthesisCandidate starts version, a synthesis-only candidate of serving with
// its own synthesis settings (decisions D31): the model where the deployment runs
// the rules, another prompt version. Settings the configuration refuses are refused
// at start, registering nothing. The candidate's drafts are the model's; the serving
// version's drafts, and what users see, stay byte for byte as they were; `versions
// diff` names the difference; `versions list` shows both versions' synthesis, and
// Postgres holds no endpoint or key.
func (p *pipeline) ownSynthesisCandidate(ctx context.Context, t *testing.T, model *fakeModel, serving, version string) {
	t.Helper()
	const candidateModel = "e2e-candidate-model"
	before := p.usersView(ctx, t)
	servingRows := p.versionEntries(ctx, t, serving)

	msg := p.cliFails(ctx, t, "versions", "start", "v7", "--synthesis-only", "--synthesizer", "openai", "--model", candidateModel, "--max-output-tokens", "-1")
	if !strings.Contains(msg, "synthesis.openai.maxOutputTokens") || !strings.Contains(msg, "--max-output-tokens") {
		t.Errorf("bad synthesis settings were not refused naming the key and the flag:\n%s", msg)
	}
	if _, ok := p.versionsList(ctx, t)["v7"]; ok {
		t.Error("a version whose synthesis settings were refused was registered")
	}

	// the candidate's own prompt instructions, which the model must receive
	const marker = "E2E-CANDIDATE-INSTRUCTIONS"
	promptFile := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(promptFile, []byte(marker+": write one finding per conversation group, citing its first message."), 0o600); err != nil {
		t.Fatal(err)
	}
	calls := model.calls()
	out := p.cli(ctx, "versions", "start", version, "--synthesis-only", "--synthesizer", "openai", "--model", candidateModel,
		"--prompt-version", "p6", "--prompt-file", promptFile, "--progress", "1s")
	t.Logf("versions start %s --synthesis-only --synthesizer openai:\n%s", version, out)
	if !strings.Contains(out, "caught up: "+version) || !strings.Contains(out, "openai, model "+candidateModel) {
		t.Fatalf("versions start %s printed:\n%s", version, out)
	}
	if model.calls() == calls {
		t.Errorf("%s never called the model", version)
	}
	if !model.sawSystemPrompt(marker) {
		t.Errorf("the model never received %s's prompt instructions", version)
	}

	bySynth := func(v string) map[string]int {
		rows, err := p.pool.Query(ctx, `SELECT coalesce(ai_metadata->>'synthesizer', '') || '/' || coalesce(ai_metadata->>'model', '')
			|| '/' || coalesce(ai_metadata->>'prompt_version', ''), count(*)
			FROM workspace_timeline_entries WHERE processor_version = $1 GROUP BY 1`, v)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		return out
	}
	cand, serv := bySynth(version), bySynth(serving)
	t.Logf("entries by synthesizer/model/prompt: %s %v, %s %v", serving, serv, version, cand)
	if len(cand) != 1 || cand["openai/"+candidateModel+"/p6"] == 0 {
		t.Errorf("%s's entries by synthesizer/model/prompt: %v, want the candidate model's only", version, cand)
	}
	for k := range serv {
		if !strings.HasPrefix(k, "rules/") {
			t.Errorf("%s, serving, has entries of %s", serving, k)
		}
	}
	if after := p.versionEntries(ctx, t, serving); after != servingRows {
		t.Errorf("the candidate changed the serving version's entries:\nbefore %s\nafter  %s", servingRows, after)
	}
	if after := p.usersView(ctx, t); after != before {
		t.Errorf("a candidate with its own synthesis changed what users see")
	}
	if len(p.expectedDiff(ctx, t, serving, version)) == 0 {
		t.Errorf("%s and %s hold the same entries: the candidate's synthesis made no difference", serving, version)
	}
	p.checkDiff(ctx, t, serving, version)

	var listed []struct {
		Name      string `json:"name"`
		Synthesis *struct {
			Synthesizer   string `json:"synthesizer"`
			PromptVersion string `json:"promptVersion"`
			OpenAI        struct {
				Model string `json:"model"`
			} `json:"openai"`
		} `json:"synthesis"`
		SynthesisHash      string `json:"synthesis_hash"`
		WindowsSynthesized int64  `json:"windows_synthesized"`
	}
	if err := json.Unmarshal([]byte(p.cli(ctx, "versions", "list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	for _, v := range listed {
		switch v.Name {
		case serving:
			if v.Synthesis != nil {
				t.Errorf("%s lists its own synthesis %+v, want the deployment's", serving, *v.Synthesis)
			}
		case version:
			if s := v.Synthesis; s == nil || s.Synthesizer != "openai" || s.OpenAI.Model != candidateModel || s.PromptVersion != "p6" || v.SynthesisHash == "" {
				t.Errorf("%s lists synthesis %+v hash %q", version, s, v.SynthesisHash)
			}
		}
	}
	text := p.cli(ctx, "versions", "list")
	for _, want := range []string{serving + ": synthesis: the deployment's configuration", version + ": synthesis: openai, model " + candidateModel, "prompt instructions "} {
		if !strings.Contains(text, want) {
			t.Errorf("versions list lacks %q:\n%s", want, text)
		}
	}
	var stored string
	if err := p.pool.QueryRow(ctx, `SELECT synthesis::text FROM processor_versions WHERE name = $1`, version).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, marker) {
		t.Errorf("processor_versions does not hold %s's prompt instructions: %s", version, stored)
	}
	if strings.Contains(stored, "e2e-not-a-secret") || strings.Contains(stored, model.url()) {
		t.Errorf("processor_versions holds the deployment's key or endpoint: %s", stored)
	}
}

// versionEntries is every entry of a version, with its text and update time, as one
// string to compare.
func (p *pipeline) versionEntries(ctx context.Context, t *testing.T, version string) string {
	t.Helper()
	rows, err := p.pool.Query(ctx, `SELECT id, title, body, status, updated_at FROM workspace_timeline_entries
		WHERE processor_version = $1 ORDER BY id`, version)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		var (
			id                  int64
			title, body, status string
			updated             time.Time
		)
		if err := rows.Scan(&id, &title, &body, &status, &updated); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d|%s|%s|%s|%s\n", id, title, body, status, updated.Format(time.RFC3339Nano))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// brokenCandidate starts a version whose processor cannot start (its geometry topic
// holds another window length): the windows process logs it and keeps serving, with
// no restart; retire cleans it up.
func (p *pipeline) brokenCandidate(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	cl := p.kafkaClient()
	adm := kadm.NewClient(cl)
	topic := p.group("windows-"+version) + "-geometry"
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("geometry"),
		Value: []byte(`{"window_ms":60000,"grace_ms":0}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.cli(ctx, "versions", "start", version, "--wait=false")
	if err := waitFor(ctx, time.Minute, func() bool {
		log := p.procs[procWindows].logTail(400)
		return strings.Contains(log, "a candidate processor version stopped") && strings.Contains(log, `"processor_version":"`+version+`"`)
	}, func() string { return "the windows process never reported the broken candidate " + version }); err != nil {
		t.Fatal(err)
	}
	if r := p.restarts(); len(r) > 0 {
		t.Errorf("a broken candidate restarted processes: %v", r)
	}
	if err := p.procs[procWindows].ready(ctx); err != nil {
		t.Errorf("the windows process is not ready with a broken candidate: %v", err)
	}
	p.cli(ctx, "versions", "retire", version)
	p.assertNothingLeftOf(ctx, t, version)
}

// checkDiff runs `versions diff a b --json` and compares its counts with the tables'.
func (p *pipeline) checkDiff(ctx context.Context, t *testing.T, a, b string) {
	t.Helper()
	want := p.expectedDiff(ctx, t, a, b)
	var got []struct {
		Workspace    string `json:"workspace"`
		OnlyA        int    `json:"only_a"`
		OnlyB        int    `json:"only_b"`
		Changed      int    `json:"changed"`
		WindowsOnlyA int    `json:"windows_only_a"`
		WindowsOnlyB int    `json:"windows_only_b"`
	}
	if err := json.Unmarshal([]byte(p.cli(ctx, "versions", "diff", a, b, "--json")), &got); err != nil {
		t.Fatal(err)
	}
	gotCounts := map[string]string{}
	for _, d := range got {
		gotCounts[d.Workspace] = fmt.Sprintf("only a %d, only b %d, changed %d, windows only a %d, only b %d",
			d.OnlyA, d.OnlyB, d.Changed, d.WindowsOnlyA, d.WindowsOnlyB)
	}
	if fmt.Sprint(gotCounts) != fmt.Sprint(want) {
		t.Errorf("versions diff %s %s:\n got  %v\n want %v", a, b, gotCounts, want)
	}
	t.Logf("versions diff %s %s: %v", a, b, gotCounts)
}

// versionRow is one row of `versions list --json`.
type versionRow struct {
	Name               string  `json:"name"`
	State              string  `json:"state"`
	WindowSeconds      int64   `json:"window_seconds"`
	LagRecords         int64   `json:"lag_records"`
	LagSeconds         float64 `json:"lag_seconds"`
	CaughtUp           bool    `json:"caught_up"`
	WindowsClosed      int64   `json:"windows_closed"`
	WindowsSynthesized int64   `json:"windows_synthesized"`
}

func (p *pipeline) versionsList(ctx context.Context, t *testing.T) map[string]versionRow {
	t.Helper()
	var rows []versionRow
	if err := json.Unmarshal([]byte(p.cli(ctx, "versions", "list", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	out := map[string]versionRow{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

// cliFails runs a command that must fail and returns what it printed.
func (p *pipeline) cliFails(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, larklineBin, args...)
	cmd.Env = append(larklineEnv(), p.env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("larkline %s did not fail (%v):\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// apiGet returns the body of an API GET.
func (p *pipeline) apiGet(ctx context.Context, t *testing.T, path string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.procs[procEdge].addr()+path, nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

// usersView is what users see of every workspace: the API's timeline and summary
// bodies, byte for byte.
func (p *pipeline) usersView(ctx context.Context, t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, w := range p.eligibleWorkspaces() {
		fmt.Fprintf(&b, "%s timeline %s\n%s summary %s\n", w, p.apiGet(ctx, t, "/api/v1/workspaces/"+string(w)+"/timeline"),
			w, p.apiGet(ctx, t, "/api/v1/workspaces/"+string(w)+"/summary"))
	}
	return b.String()
}

// apiEntries is the ids of the API's timeline of a workspace, in its order.
func (p *pipeline) apiEntries(ctx context.Context, t *testing.T, w ids.WorkspaceID) []int64 {
	t.Helper()
	var tl struct {
		Entries []struct {
			ID int64 `json:"id"`
		} `json:"entries"`
	}
	body := p.apiGet(ctx, t, "/api/v1/workspaces/"+string(w)+"/timeline")
	if err := json.Unmarshal(body, &tl); err != nil {
		t.Fatalf("timeline of %s: %v: %s", w, err, body)
	}
	var out []int64
	for _, it := range tl.Entries {
		out = append(out, it.ID)
	}
	return out
}

// expectedDiff counts, per workspace, from the tables: entries by fingerprint only in
// v1, only in v2, in both with another text; windows by chat and start only one
// version closed.
func (p *pipeline) expectedDiff(ctx context.Context, t *testing.T, a, b string) map[string]string {
	t.Helper()
	entries := map[string]map[string]map[string]string{} // workspace → version → fingerprint → text
	rows, err := p.pool.Query(ctx, `SELECT workspace_id, processor_version, fingerprint,
		kind || '|' || occurred_at::text || '|' || status || '|' || title || '|' || body
		FROM workspace_timeline_entries WHERE processor_version IN ($1, $2)`, a, b)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var w, v, fp, text string
		if err := rows.Scan(&w, &v, &fp, &text); err != nil {
			t.Fatal(err)
		}
		if entries[w] == nil {
			entries[w] = map[string]map[string]string{a: {}, b: {}}
		}
		entries[w][v][fp] = text
	}
	windows := map[string]map[string]map[string]bool{}
	rows, err = p.pool.Query(ctx, `SELECT workspace_id, source_key FROM workspace_timeline_sync_states WHERE source_type = $1`, ids.SourceTypeLarkWindow)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var w, key string
		if err := rows.Scan(&w, &key); err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(key, "/")
		v, win := "v1", parts[1]+"@"+parts[len(parts)-1]
		if parts[2] == "processor" {
			v = parts[3]
		}
		if v != a && v != b {
			continue
		}
		if windows[w] == nil {
			windows[w] = map[string]map[string]bool{a: {}, b: {}}
		}
		windows[w][v][win] = true
	}
	out := map[string]string{}
	ws := map[string]bool{}
	for w := range entries {
		ws[w] = true
	}
	for w := range windows {
		ws[w] = true
	}
	for w := range ws {
		var onlyA, onlyB, changed, winA, winB int
		if e := entries[w]; e != nil {
			for fp, text := range e[a] {
				if other, ok := e[b][fp]; !ok {
					onlyA++
				} else if other != text {
					changed++
				}
			}
			for fp := range e[b] {
				if _, ok := e[a][fp]; !ok {
					onlyB++
				}
			}
		}
		if win := windows[w]; win != nil {
			for k := range win[a] {
				if !win[b][k] {
					winA++
				}
			}
			for k := range win[b] {
				if !win[a][k] {
					winB++
				}
			}
		}
		if onlyA+onlyB+changed+winA+winB > 0 {
			out[w] = fmt.Sprintf("only a %d, only b %d, changed %d, windows only a %d, only b %d", onlyA, onlyB, changed, winA, winB)
		}
	}
	return out
}

// assertNothingLeftOf checks that a retired version has no consumer group, topic,
// namespace row or local state directory left.
func (p *pipeline) assertNothingLeftOf(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	adm := kadm.NewClient(p.kafkaClient())
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for g := range groups {
		if strings.HasPrefix(g, p.group("windows-"+version)) {
			t.Errorf("group %s is left", g)
		}
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range topics {
		if strings.HasPrefix(name, p.group("windows-"+version)) {
			t.Errorf("topic %s is left", name)
		}
	}
	windowKeys := "chat/%/processor/" + version + "/window/%"
	if version == "v1" { // the default version's keys name no version
		windowKeys = "chat/%/window/%"
	}
	var entries, summaries, windows int
	if err := p.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM workspace_timeline_entries WHERE processor_version = $1),
		(SELECT count(*) FROM workspace_timeline_summaries WHERE processor_version = $1),
		(SELECT count(*) FROM workspace_timeline_sync_states WHERE source_type = $2 AND source_key LIKE $3
			AND ($1 <> 'v1' OR source_key NOT LIKE 'chat/%/processor/%'))`, version, ids.SourceTypeLarkWindow, windowKeys).Scan(&entries, &summaries, &windows); err != nil {
		t.Fatal(err)
	}
	if entries+summaries+windows > 0 {
		t.Errorf("rows of %s left: %d entries, %d summaries, %d window states", version, entries, summaries, windows)
	}
	// the windows process removes it once it stopped the version (within its poll)
	dir := filepath.Join(p.dir, "state-"+procWindows, version)
	if err := waitFor(ctx, 30*time.Second, func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist)
	}, func() string { return "the state directory " + dir + " is left" }); err != nil {
		t.Error(err)
	}
}
