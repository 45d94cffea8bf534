package synthesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/rules"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// fixed is a synthesizer that returns the same drafts, resolved from message ids, for
// every request that holds their evidence as primary.
type fixed struct {
	drafts func(req synth.Request) []synth.Draft
}

func (f fixed) Synthesize(_ context.Context, req synth.Request) (synth.Result, error) {
	return synth.Result{Synthesizer: "fixed", PromptVersion: "fixed-v1", Drafts: f.drafts(req)}, nil
}

// TestHumanEntriesAndSummaryUntouched: a draft whose fingerprint matches a confirmed
// human entry only attaches its evidence to it; another draft becomes an AI draft; the
// human summary is neither overwritten nor even sent to the summarizer.
func TestHumanEntriesAndSummaryUntouched(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rows := e.seed(win, incidentLines...)
	id := byMessage(rows)
	mitigation := synth.Draft{Kind: synth.KindMitigation, Title: "Rolled back payments-api", OccurredAt: win.Add(2 * time.Minute),
		EvidenceIDs: []int64{id["3"], id["4"]}}
	recovery := synth.Draft{Kind: synth.KindRecovery, Title: "Checkout recovered", OccurredAt: win.Add(4 * time.Minute),
		EvidenceIDs: []int64{id["5"]}}
	human, err := e.st.CreateHumanEntry(ctx, store.HumanEntry{Workspace: e.ws, OccurredAt: win.Add(2 * time.Minute),
		Kind: string(synth.KindMitigation), Title: "Rollback of payments-api (written by the IC)", Body: "human body",
		Fingerprint: synth.Fingerprint(e.ws, mitigation), EvidenceIDs: []int64{id["3"]}})
	if err != nil {
		t.Fatal(err)
	}
	const humanSummary = "Human summary: EU checkout outage, rolled back."
	if err := e.st.PutHumanSummary(ctx, e.ws, humanSummary); err != nil {
		t.Fatal(err)
	}

	o := e.options()
	o.Synthesizer = fixed{drafts: func(synth.Request) []synth.Draft { return []synth.Draft{mitigation, recovery} }}
	sum := &countingSummarizer{next: o.Summarizer}
	o.Summarizer = sum
	r := e.start(o)
	e.produce(e.closedWindow(win, rows))
	st := e.waitState(win, "the window to finish", terminal)
	eventually(t, "the summary decision", func() bool {
		return r.counter("larkline_synthesis_summary_skipped_total")+r.counter("larkline_synthesis_summary_attempts_total") >= 1
	})

	if st.Status != store.WindowCompleted {
		t.Fatalf("window %s, want completed", st.Status)
	}
	got, err := e.st.GetEntry(ctx, e.ws, human.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != human.Title || got.Body != human.Body || got.Source != store.EntryFromHuman || got.Status != store.EntryStatusConfirmed {
		t.Errorf("human entry changed: %+v", got)
	}
	if !slices.Equal(got.EvidenceIDs, []int64{id["3"], id["4"]}) {
		t.Errorf("human entry evidence = %v, want the draft's evidence attached: %v", got.EvidenceIDs, []int64{id["3"], id["4"]})
	}
	entries := e.entries()
	if len(entries) != 2 {
		t.Fatalf("%d entries, want the human one and one AI draft", len(entries))
	}
	for _, en := range entries {
		if en.ID == human.ID {
			continue
		}
		if en.Source != store.EntryFromAI || en.Status != store.EntryStatusDraft || en.Kind != string(synth.KindRecovery) ||
			!slices.Equal(en.EvidenceIDs, []int64{id["5"]}) {
			t.Errorf("AI entry = %+v", en)
		}
	}
	s, err := e.st.GetSummary(ctx, e.ws)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != store.EntryFromHuman || s.Text != humanSummary {
		t.Errorf("summary = %s %q, want the human one", s.Source, s.Text)
	}
	if sum.count() != 0 {
		t.Errorf("the summarizer was called %d times over a human summary", sum.count())
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"larkline_synthesis_drafts_total", []string{"outcome", draftProtected}, 1},
		{"larkline_synthesis_drafts_total", []string{"outcome", draftCreated}, 1},
		{"larkline_synthesis_summary_skipped_total", []string{"reason", skipHumanSummary}, 1},
	} {
		if v := r.counter(c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}

// TestDuplicateRecordsAndOneSummaryAttempt: the same closed window delivered three
// times creates its entries once; the summary is attempted once (it fails: the window
// stays completed and the attempt is spent).
func TestDuplicateRecordsAndOneSummaryAttempt(t *testing.T) {
	e := newEnv(t)
	rows := e.seed(win, incidentLines...)
	o := e.options()
	sum := &countingSummarizer{err: fmt.Errorf("fake: %w", synth.ErrUnavailable)}
	o.Summarizer = sum
	r := e.start(o)
	cw := e.closedWindow(win, rows)
	offs := e.produce(cw, cw, cw)

	eventually(t, "the three records", func() bool { return e.committed() == offs[2]+1 })
	st, err := e.st.GetWindow(context.Background(), e.key(win))
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != store.WindowCompleted || st.Attempts != 1 || !st.Meta.SummaryAttempted {
		t.Fatalf("window %s, attempt %d, summary attempted %v", st.Status, st.Attempts, st.Meta.SummaryAttempted)
	}
	created := r.counter("larkline_synthesis_drafts_total", "outcome", draftCreated)
	if n := len(e.entries()); n == 0 || float64(n) != created {
		t.Errorf("%d entries, %v created drafts", n, created)
	}
	if sum.count() != 1 {
		t.Errorf("summarizer called %d times, want once", sum.count())
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"larkline_synthesis_windows_total", []string{"outcome", outcomeCompleted}, 1},
		{"larkline_synthesis_windows_total", []string{"outcome", outcomeSkippedDone}, 2},
		{"larkline_synthesis_drafts_total", []string{"outcome", draftUpdated}, 0},
		{"larkline_synthesis_summary_attempts_total", []string{"outcome", summaryFailed}, 1},
		{"larkline_synthesis_summary_attempts_total", []string{"outcome", summaryWritten}, 0},
	} {
		if v := r.counter(c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if _, err := e.st.GetSummary(context.Background(), e.ws); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a summary exists after the failed attempt: %v", err)
	}
}

// incidentChat is a realistic incident window: English and Chinese, a database
// thread, bots, acknowledgements, bare links and chatter, context before the window.
var incidentChat = []line{
	{id: "c1", at: -3 * time.Minute, sender: "Alertmanager", text: "[FIRING] checkout-api 5xx rate > 5%", bot: true},
	{id: "c2", at: -90 * time.Second, sender: "Alice", text: "Checkout errors are up, customers affected"},

	{id: "i1", at: 5 * time.Second, sender: "Alice", text: "Checkout error rate is at 12%, customers can't pay. Declaring SEV2."},
	{id: "a1", at: 20 * time.Second, sender: "Bob", text: "+1"},
	{id: "b1", at: 40 * time.Second, sender: "PagerDuty", text: "Incident #4412 triggered: checkout-api error rate impacted customers", bot: true},
	{id: "o1", at: 55 * time.Second, sender: "Alice", text: "I'll take IC. @Bob please own the DB side, @Carol comms."},
	{id: "a2", at: 70 * time.Second, sender: "Bob", text: "ok"},
	{id: "l1", at: 80 * time.Second, sender: "Dave", text: "https://grafana.example.com/d/abc123/checkout"},
	{id: "a3", at: 90 * time.Second, sender: "Carol", text: "收到"},
	{id: "i2", at: 105 * time.Second, sender: "Erin", text: "支付服务报错率上升到15%，大量用户反馈无法下单"},
	{id: "x1", at: 150 * time.Second, sender: "Frank", text: "lunch anyone? 😂"},

	{id: "f1", at: 3 * time.Minute, sender: "Bob", text: "Logs show connection pool exhaustion on payments-db primary", thread: "omt_db"},
	{id: "f2", at: 200 * time.Second, sender: "Bob", text: "发现 payments-db 主库连接数打满，慢查询突增", thread: "omt_db"},
	{id: "a4", at: 220 * time.Second, sender: "Dave", text: "thanks Bob", thread: "omt_db"},
	{id: "d1", at: 270 * time.Second, sender: "Alice", text: "We decided to roll back payments-api to v2.13.2. Bob owns the rollback.", thread: "omt_db"},
	{id: "a5", at: 285 * time.Second, sender: "Bob", text: "on it", thread: "omt_db"},
	{id: "m1", at: 400 * time.Second, sender: "Bob", text: "回滚已完成，v2.13.2 全量", thread: "omt_db"},

	{id: "m2", at: 320 * time.Second, sender: "Heidi", text: "Scaled payments-db read replicas from 3 to 6 to take load off the primary"},
	{id: "l2", at: 365 * time.Second, sender: "Ivan", text: "FYI https://status.example.com/incidents/123"},
	{id: "r1", at: 510 * time.Second, sender: "Bob", text: "Error rate back to 0.3%, p99 back to normal. Checkout recovered."},
	{id: "b2", at: 520 * time.Second, sender: "Alertmanager", text: "[RESOLVED] checkout-api 5xx rate back to normal", bot: true},
	{id: "a6", at: 530 * time.Second, sender: "Judy", text: "+1 🎉"},
	{id: "rc", at: 540 * time.Second, sender: "Alice", text: "Root cause: the v2.14.0 migration dropped the index on orders.user_id, causing full table scans"},
	{id: "n1", at: 570 * time.Second, sender: "Alice", text: "Next steps: add an index check to CI, postmortem tomorrow."},
	{id: "a7", at: 595 * time.Second, sender: "Dave", text: "ok thanks"},
}

// TestRuleSynthesizerOnAnIncidentWindow runs the default rule synthesizer through the
// worker on a realistic window: the entries a responder expects, each bound to the
// messages that state it, nothing from acknowledgements, bots, links or chatter, AI
// metadata per §12.4, and an AI summary.
func TestRuleSynthesizerOnAnIncidentWindow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rows := e.seed(win, incidentChat...)
	id := byMessage(rows)
	hashByID := map[int64]string{}
	for _, r := range rows {
		hashByID[r.ID] = r.ContentHash
	}
	r := e.start(e.options())
	e.produce(e.closedWindow(win, rows))
	st := e.waitState(win, "the window to finish", terminal)
	if st.Status != store.WindowCompleted {
		t.Fatalf("window %s, want completed", st.Status)
	}
	if st.Meta.PromptVersion != rules.Version {
		t.Errorf("prompt version %q, want %q", st.Meta.PromptVersion, rules.Version)
	}
	// One observation of window end → first draft, measured from the window's end
	// (in 2024), not from when the record arrived.
	if n, sum := firstDraftHistogram(t, r.reg); n != 1 || sum < time.Since(win.Add(time.Hour)).Seconds() {
		t.Errorf("larkline_synthesis_window_end_to_first_draft_seconds: %d observations, sum %.0f s", n, sum)
	}

	entries := e.entries()
	byKind := map[string][]store.Entry{}
	for _, en := range entries {
		byKind[en.Kind] = append(byKind[en.Kind], en)
		t.Logf("%-10s %v %q", en.Kind, en.EvidenceIDs, en.Title)
	}
	// The messages that must support an entry of each kind.
	want := map[synth.Kind][]string{
		synth.KindImpact:     {"i1"},
		synth.KindOwnership:  {"o1"},
		synth.KindFinding:    {"f1", "f2"},
		synth.KindDecision:   {"d1"},
		synth.KindMitigation: {"m2", "m1"},
		synth.KindRecovery:   {"r1"},
		synth.KindRootCause:  {"rc"},
		synth.KindNextStep:   {"n1"},
	}
	for kind, msgs := range want {
		var bound []int64
		for _, en := range byKind[string(kind)] {
			bound = append(bound, en.EvidenceIDs...)
		}
		for _, m := range msgs {
			if !slices.Contains(bound, id[m]) {
				t.Errorf("no %s entry bound to message %s (bound: %v)", kind, m, bound)
			}
		}
	}
	never := []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "b1", "b2", "l1", "l2", "x1", "c1", "c2"}
	for _, en := range entries {
		if en.Source != store.EntryFromAI || en.Status != store.EntryStatusDraft {
			t.Errorf("entry %d is %s/%s", en.ID, en.Source, en.Status)
		}
		for _, m := range never {
			if slices.Contains(en.EvidenceIDs, id[m]) {
				t.Errorf("%s entry %q is bound to noise message %s", en.Kind, en.Title, m)
			}
		}
		var meta aiMetadata
		if err := json.Unmarshal(en.AIMetadata, &meta); err != nil {
			t.Fatalf("ai metadata of entry %d: %v", en.ID, err)
		}
		if meta.ProcessorVersion != "v1" || meta.PromptVersion != rules.Version || meta.Synthesizer != rules.Name ||
			meta.ChatID != string(e.chat) || meta.WindowKey != e.key(win).SourceKey() ||
			!strings.HasPrefix(meta.BatchID, e.key(win).SourceKey()+"#") {
			t.Errorf("ai metadata of entry %d: %+v", en.ID, meta)
		}
		if len(meta.Evidence) != len(en.EvidenceIDs) {
			t.Errorf("entry %d: metadata names %d evidence, %d bound", en.ID, len(meta.Evidence), len(en.EvidenceIDs))
		}
		for _, ref := range meta.Evidence {
			if !slices.Contains(en.EvidenceIDs, ref.ID) || ref.ContentHash != hashByID[ref.ID] || ref.MessageID == "" {
				t.Errorf("entry %d: metadata evidence %+v does not match the bound row", en.ID, ref)
			}
		}
		if en.Kind == string(synth.KindFinding) && !slices.Contains(meta.ThreadIDs, "omt_db") {
			t.Errorf("finding entry %d does not record its thread: %+v", en.ID, meta.ThreadIDs)
		}
	}
	eventually(t, "the summary", func() bool { return r.counter("larkline_synthesis_summary_attempts_total") >= 1 })
	s, err := e.st.GetSummary(ctx, e.ws)
	if err != nil {
		t.Fatalf("summary: %v", err)
	}
	if s.Source != store.EntryFromAI || strings.TrimSpace(s.Text) == "" {
		t.Errorf("summary = %s %q", s.Source, s.Text)
	}
	if got := r.counter("larkline_synthesis_summary_attempts_total", "outcome", summaryWritten); got != 1 {
		t.Errorf("written summaries = %v, want 1", got)
	}
	if got := r.counter("larkline_synthesis_summary_lag_seconds"); got != 1 {
		t.Errorf("summary lag observations = %v, want 1", got)
	}
	logs := r.logs.String()
	for _, l := range incidentChat {
		if len(l.text) > 8 && strings.Contains(logs, l.text) {
			t.Fatalf("a log line carries message text %q", l.text)
		}
	}
	if strings.Contains(logs, s.Text) {
		t.Fatal("a log line carries the summary")
	}
}

// TestChatterWindowIsIgnored: acknowledgements, bots, bare links and chatter produce
// no entry; the window ends ignored, with its aggregate, and no summary is attempted.
func TestChatterWindowIsIgnored(t *testing.T) {
	e := newEnv(t)
	var lines []line
	for _, l := range incidentChat {
		if strings.HasPrefix(l.id, "a") || strings.HasPrefix(l.id, "b") || strings.HasPrefix(l.id, "l") || l.id == "x1" {
			lines = append(lines, l)
		}
	}
	rows := e.seed(win, lines...)
	o := e.options()
	sum := &countingSummarizer{next: o.Summarizer}
	o.Summarizer = sum
	r := e.start(o)
	off := e.produce(e.closedWindow(win, rows))[0]
	st := e.waitState(win, "the window to finish", terminal)
	eventually(t, "the offset commit", func() bool { return e.committed() == off+1 })
	if st.Status != store.WindowIgnored || st.Meta.EvidenceCount != len(rows) || st.AggregateHash != AggregateHash(rows) {
		t.Fatalf("window %s with %d evidence, aggregate %s; want ignored with %d and %s",
			st.Status, st.Meta.EvidenceCount, st.AggregateHash, len(rows), AggregateHash(rows))
	}
	if n := len(e.entries()); n != 0 {
		t.Errorf("%d entries from chatter", n)
	}
	if sum.count() != 0 || st.Meta.SummaryAttempted {
		t.Errorf("summary attempted for an ignored window (%d calls)", sum.count())
	}
	if got := r.counter("larkline_synthesis_windows_total", "outcome", outcomeIgnored); got != 1 {
		t.Errorf("ignored windows = %v, want 1", got)
	}
}

// firstDraftHistogram returns the sample count and sum of
// larkline_synthesis_window_end_to_first_draft_seconds.
func firstDraftHistogram(t *testing.T, reg *prometheus.Registry) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "larkline_synthesis_window_end_to_first_draft_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("larkline_synthesis_window_end_to_first_draft_seconds not registered")
	return 0, 0
}
