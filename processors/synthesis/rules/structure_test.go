package rules

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// TestStructuralRules covers the mistakes phrase scores alone make on real incident
// chats: each case is one message, the kinds it must yield exactly (nil: nothing),
// and, for labelled messages, what the title must start with.
func TestStructuralRules(t *testing.T) {
	tests := []struct {
		class string
		text  string
		want  []synth.Kind
		title string // prefix of the single draft's title, when set
	}{
		// Acknowledgement or agreement replies add no fact.
		{"agreement", "是的，跟监控上看到的一样", nil, ""},
		{"agreement", "我这里也发现了", nil, ""},
		{"agreement", "same here, seeing it too", nil, ""},
		{"ack of a decision", "好的，马上重启", nil, ""},
		{"ack of a decision", "ok, restarting", nil, ""},
		{"ack then ownership", "roger that. I'm taking over as IC", []synth.Kind{synth.KindOwnership}, "I'm taking over as IC"},
		{"ack then a fact survives", "ok, found it: the cron job deleted 4,000 session keys at 09:12", []synth.Kind{synth.KindFinding}, ""},

		// Chatter is no next step, no decision.
		{"chatter", "持续观察", nil, ""},
		{"chatter", "看着呢", nil, ""},
		{"chatter", "let's use the war room doc for notes", nil, ""},
		{"chatter", "we'll sync again on the call", nil, ""},
		{"reply with a pronoun object", "I'll write that up later", nil, ""},

		// One message, one entry: a sentence has one kind.
		{"status page comms", "posting to the status page: investigating, mitigation underway", nil, ""},
		{"status page comms", "状态页已更新为监控中", nil, ""},
		{"one kind per sentence", "restarted the workers, queue looks healthy", []synth.Kind{synth.KindMitigation}, ""},
		{"interim progress", "failover 40% done, error rate down to 12%", nil, ""},

		// A leading label classifies the message, whatever else it mentions.
		{"label", "Impact: 22% of card payments declined in ap-southeast-1 since 08:40. Other regions look fine.", []synth.Kind{synth.KindImpact}, "22% of card payments"},
		{"label", "Decision: drain the canary pool and keep traffic on blue. Priya drives it, I stay IC.", []synth.Kind{synth.KindDecision}, "drain the canary pool"},
		{"label", "Recovery confirmed: search p95 at 120ms for 30 min, no failed queries.", []synth.Kind{synth.KindRecovery}, "search p95 at 120ms"},
		{"label", "影响：华东区约 15% 的订单支付失败，其他区域正常", []synth.Kind{synth.KindImpact}, "华东区约 15%"},
		{"label", "Handover: Omar is IC from now. State: cache rebuilt, error rate 0.1%. Open: write-up.", []synth.Kind{synth.KindOwnership}, "Omar is IC from now."},
		{"heading", "Root cause (draft)\nThe token refresher used a 60s TTL while the gateway cached tokens for 5 min.\nSo requests after the first minute were rejected.", []synth.Kind{synth.KindRootCause}, "The token refresher used a 60s TTL"},
		{"heading", "Follow-ups\n1. Alert on token TTL mismatches (owner: Ada)\n2. Add a contract test (owner: Ben)", []synth.Kind{synth.KindNextStep}, "Alert on token TTL mismatches (owner: Ada)"},
		{"heading alone", "Root cause", nil, ""},
		{"sections", "Impact: 8% of logins failing in eu-central-1\nMitigation: rolled back auth-svc to v5.2.0", []synth.Kind{synth.KindImpact, synth.KindMitigation}, ""},
		{"not a label", "Support confirms: 30 tickets in 10 min, customers get a blank page at login", []synth.Kind{synth.KindImpact}, ""},

		// Impact needs a quantity or a scope, and no hedge.
		{"unquantified signal", "still getting 5xx on my staging box", nil, ""},
		{"unquantified signal", "timeouts spiking on the batch host", nil, ""},
		{"hedged", "the risk is ~2 min of read errors during the resize, acceptable at 4% failures", nil, ""},
		{"hedged", "write errors spike, expected while the index rebuilds", nil, ""},
		{"quantified", "error rate at 7% on the payments API", []synth.Kind{synth.KindImpact}, ""},
		{"scoped", "merchants in us-west-2 are getting 502s", []synth.Kind{synth.KindImpact}, ""},

		// A negated action is no mitigation.
		{"negated action", "the job never rolled back its transaction on error", nil, ""},
	}
	s := newSynth(t)
	for _, tt := range tests {
		t.Run(tt.class+"/"+tt.text, func(t *testing.T) {
			res, err := s.Synthesize(context.Background(), one(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			got := kindsOf(res.Drafts)
			slices.SortFunc(got, func(a, b synth.Kind) int { return a.Rank() - b.Rank() })
			want := slices.Clone(tt.want)
			slices.SortFunc(want, func(a, b synth.Kind) int { return a.Rank() - b.Rank() })
			if !slices.Equal(got, want) {
				t.Fatalf("kinds %v, want %v:\n%s", got, want, describe(res.Drafts))
			}
			if tt.title != "" && !strings.HasPrefix(res.Drafts[0].Title, tt.title) {
				t.Fatalf("title %q, want prefix %q", res.Drafts[0].Title, tt.title)
			}
		})
	}
}

// TestSummarizePicksPerSlot: the summary states the fullest impact and recovery once
// it is over, a labelled entry's content rather than its label, and the current IC
// rather than the latest task owner.
func TestSummarizePicksPerSlot(t *testing.T) {
	entries := []synth.VisibleEntry{
		entry(synth.KindOwnership, 0, "Dana is IC"),
		entry(synth.KindImpact, 1, "Impact: 18% of renewals failing in eu-west-1 and us-east-1 since 09:05"),
		entry(synth.KindImpact, 9, "failures still 3%"),
		entry(synth.KindOwnership, 10, "Eli is the incident commander from now"),
		entry(synth.KindRootCause, 11, "Root cause"),
		entry(synth.KindRootCause, 12, "Root cause: the billing cron ran twice after the DST change"),
		entry(synth.KindRecovery, 13, "renewal failures at the 0.1% baseline for 30 min, retries drained"),
		entry(synth.KindOwnership, 14, "Finn owns the cron fix"),
		entry(synth.KindRecovery, 15, "looks fine now"),
	}
	text, _, err := newSynth(t).Summarize(context.Background(), synth.SummaryRequest{Workspace: "ws", Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Status: recovered — renewal failures at the 0.1% baseline",
		"Impact: 18% of renewals failing",
		"Root cause: the billing cron ran twice",
		"Owner: Eli is the incident commander",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	for _, not := range []string{"Root cause: Root cause", "Impact: Impact", "Owner: Finn", "failures still 3%"} {
		if strings.Contains(text, not) {
			t.Errorf("summary has %q:\n%s", not, text)
		}
	}
}
