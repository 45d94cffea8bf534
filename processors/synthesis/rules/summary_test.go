package rules

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

func at(minute int) time.Time { return incidentStart.Add(time.Duration(minute) * time.Minute) }

func entry(kind synth.Kind, minute int, title string) synth.VisibleEntry {
	return synth.VisibleEntry{Kind: kind, Title: title, OccurredAt: at(minute), Status: synth.StatusDraft}
}

func TestSummarize(t *testing.T) {
	impact := entry(synth.KindImpact, 0, "Checkout error rate 12%, customers can't pay")
	finding := entry(synth.KindFinding, 3, "Logs show connection pool exhaustion")
	owner := entry(synth.KindOwnership, 1, "Alice is IC")
	mitigation := entry(synth.KindMitigation, 6, "Rolled back payments-api to v2.13.2")
	recovery := entry(synth.KindRecovery, 8, "Error rate back to 0.3%")
	cause := entry(synth.KindRootCause, 9, "Migration dropped the orders.user_id index")
	blocker := entry(synth.KindBlocker, 5, "Blocked on deploy approval")
	decision := entry(synth.KindDecision, 4, "Decided to roll back")
	steps := []synth.VisibleEntry{
		entry(synth.KindNextStep, 9, "Add an index check to CI"),
		entry(synth.KindNextStep, 10, "Postmortem on Friday"),
		entry(synth.KindNextStep, 11, "Alert on pool saturation"),
		entry(synth.KindNextStep, 12, "Backfill failed orders"),
	}
	tests := []struct {
		name    string
		entries []synth.VisibleEntry
		want    []string
		notWant []string
	}{
		{"investigating", []synth.VisibleEntry{impact, finding, owner, blocker},
			[]string{"Status: investigating", "Impact: Checkout error rate 12%", "Root cause: not yet determined; latest finding: Logs show", "Owner: Alice is IC", "Blocker: Blocked on deploy approval"},
			[]string{"Mitigation"}},
		{"mitigated", []synth.VisibleEntry{impact, mitigation, decision, blocker},
			[]string{"Status: mitigated, monitoring — Rolled back payments-api", "Decision: Decided to roll back", "Blocker:", "Root cause: not yet determined"},
			[]string{"Mitigation:"}},
		{"recovered", append([]synth.VisibleEntry{recovery, cause, impact, mitigation, blocker, owner}, steps...),
			[]string{"Status: recovered — Error rate back to 0.3% (2024-05-01 14:08 UTC)", "Mitigation: Rolled back", "Root cause: Migration dropped", "Next steps:\n- Postmortem on Friday\n- Alert on pool saturation\n- Backfill failed orders"},
			[]string{"Blocker", "Add an index check"}},
		{"recurrence after recovery", []synth.VisibleEntry{impact, recovery, entry(synth.KindImpact, 11, "Errors are back, 5% of checkouts failing")},
			[]string{"Status: investigating", "Impact: Errors are back"}, []string{"recovered"}},
		{"confirmed wins a tie", []synth.VisibleEntry{
			{Kind: synth.KindOwnership, Title: "Bob is IC", OccurredAt: at(1), Status: synth.StatusConfirmed}, owner},
			[]string{"Owner: Bob is IC"}, []string{"Alice"}},
		{"chinese", []synth.VisibleEntry{
			entry(synth.KindImpact, 0, "支付报错率上升到15%"), entry(synth.KindMitigation, 5, "回滚已完成"), entry(synth.KindRootCause, 7, "迁移删除了索引")},
			[]string{"状态：已止血，观察中 — 回滚已完成", "影响：支付报错率上升到15%", "根因：迁移删除了索引"}, []string{"Status"}},
	}
	s := newSynth(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, usage, err := s.Summarize(context.Background(), synth.SummaryRequest{Workspace: "ws", Entries: tt.entries, Previous: "old summary"})
			if err != nil {
				t.Fatal(err)
			}
			if usage != (synth.Usage{}) {
				t.Fatalf("usage %+v", usage)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("summary lacks %q:\n%s", w, text)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(text, w) {
					t.Errorf("summary has %q:\n%s", w, text)
				}
			}
			if err := synth.ValidateSummary(text); err != nil {
				t.Fatal(err)
			}
			again, _, _ := s.Summarize(context.Background(), synth.SummaryRequest{Workspace: "ws", Entries: reversed(tt.entries)})
			if again != text {
				t.Fatalf("summary depends on entry order or Previous:\n%s\n---\n%s", text, again)
			}
		})
	}
}

func reversed(in []synth.VisibleEntry) []synth.VisibleEntry {
	out := make([]synth.VisibleEntry, len(in))
	for i, e := range in {
		out[len(in)-1-i] = e
	}
	return out
}

func TestSummarizeBounded(t *testing.T) {
	s, err := New(Options{MaxSummaryRunes: 300})
	if err != nil {
		t.Fatal(err)
	}
	var entries []synth.VisibleEntry
	for i, k := range synth.Kinds() {
		entries = append(entries, entry(k, i, strings.Repeat("很长的标题", 60)))
	}
	text, _, err := s.Summarize(context.Background(), synth.SummaryRequest{Workspace: "ws", Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(text); n > 300 || n == 0 {
		t.Fatalf("summary has %d runes", n)
	}
	if !strings.HasPrefix(text, "状态") {
		t.Fatalf("the status line must survive the bound:\n%s", text)
	}
}

func TestSummarizeErrors(t *testing.T) {
	s := newSynth(t)
	if _, _, err := s.Summarize(context.Background(), synth.SummaryRequest{Workspace: "ws"}); !errors.Is(err, synth.ErrInvalidRequest) {
		t.Fatalf("no entries: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Summarize(ctx, synth.SummaryRequest{Workspace: "ws", Entries: []synth.VisibleEntry{entry(synth.KindImpact, 0, "x")}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}
