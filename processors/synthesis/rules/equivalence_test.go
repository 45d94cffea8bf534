package rules

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// refScoreSentence is scoreSentence as it was before the prefilters (issue 35): every
// pattern's and every modifier's regular expression run on every sentence. It is the
// reference the prefiltered path must agree with exactly.
func refScoreSentence(s string) scores {
	var sc scores
	if refIsQuestion(s) || commsRE.re.MatchString(s) || progressRE.re.MatchString(s) {
		return sc
	}
	rImpact, rMitigation, rRecovery := synth.KindImpact.Rank(), synth.KindMitigation.Rank(), synth.KindRecovery.Rank()
	strongImpact := false
	for _, p := range patterns {
		if p.re.MatchString(s) {
			sc[p.kind.Rank()] += p.weight
			if p.kind == synth.KindImpact && p.weight >= strong {
				strongImpact = true
			}
		}
	}
	if !strongImpact && !quantRE.re.MatchString(s) && !scopeRE.re.MatchString(s) {
		sc[rImpact] = 0
	}
	if hedgeRE.re.MatchString(s) {
		sc[rImpact] = 0
	}
	if futureRE.re.MatchString(s) && !doneRE.re.MatchString(s) {
		sc[rMitigation], sc[rRecovery] = 0, 0
	}
	if deicticRE.re.MatchString(s) {
		sc[synth.KindNextStep.Rank()] = 0
	}
	if negMitigationRE.re.MatchString(s) {
		sc[rMitigation] = 0
	}
	if sc[rRecovery] > 0 && negationRE.re.MatchString(s) {
		sc[rRecovery] = 0
		sc[rImpact] = max(sc[rImpact], medium)
	}
	if sc[rRecovery] >= threshold {
		sc[rImpact] = 0
	}
	if sc[rRecovery] >= threshold || sc[synth.KindRootCause.Rank()] >= threshold || sc[synth.KindNextStep.Rank()] >= threshold {
		sc[synth.KindFinding.Rank()] = 0
	}
	for i := range sc {
		sc[i] = min(sc[i], maxScore)
	}
	return sc
}

func refIsQuestion(s string) bool {
	return strings.HasSuffix(s, "?") || strings.HasSuffix(s, "？") ||
		questionStartRE.re.MatchString(s) || questionZHRE.re.MatchString(strings.TrimRight(s, "。.!！~ "))
}

// modifiers is every prefiltered expression outside the phrase patterns, by name.
func modifiers() map[string]filtered {
	return map[string]filtered{
		"future": futureRE, "done": doneRE, "negation": negationRE, "questionStart": questionStartRE,
		"questionZH": questionZHRE, "quoted": quotedRE, "comms": commsRE, "hedge": hedgeRE,
		"meToo": meTooRE, "quant": quantRE, "scope": scopeRE, "progress": progressRE,
		"deictic": deicticRE, "ic": icRE, "negMitigation": negMitigationRE, "mention": mentionRE,
	}
}

// equivalenceCorpus is every text the tests use plus generated sentences: fragments
// that make each pattern and modifier match (their required literals), fillers in
// English and Chinese, numbers, regions, quotes and question marks, joined with and
// without spaces and punctuation, in mixed case. The seed is fixed: the corpus is the
// same on every run.
func equivalenceCorpus() []string {
	var texts []string
	for _, l := range incidentChat {
		texts = append(texts, l.text)
	}
	texts = append(texts, singleMessageTexts()...)
	texts = append(texts, // the patterns with two parts apart, which random fragments rarely hit
		"Traced it to the pool config. Narrowed the 5xx down to one node!",
		"Jira ticket FILED to track the backfill; I'll write that up, we will fix it",
		"Errors jumped from 0.1% to 4% after 14:02, due to the deploy",
		"IC is @alice; owner: bob",
	)

	var vocab []string
	for _, p := range patterns {
		vocab = append(vocab, p.anyOf...)
		for _, l := range p.anyOf[:min(3, len(p.anyOf))] {
			texts = append(texts, "the "+l+" now") // each pattern's own words, in a sentence
		}
	}
	for _, f := range modifiers() {
		vocab = append(vocab, f.anyOf...)
	}
	slices.Sort(vocab) // map order must not change the corpus
	vocab = append(vocab,
		"checkout", "the", "db", "payments", "eu", "we", "it", "is", "not", "never", "already", "done",
		"30%", "1 in 3", "4,000 orders", "12 tickets", "0.5 %", "us-west-2", "ap-southeast-1", "v1.2.3",
		"\"rolled back\"", "“恢复了”", "「回滚」", "https://example.com/x", "see WwW.Example.com/a.b", "Ftp://x.y", "@alice", "😀",
		"支付", "订单", "用户", "已经", "还没", "先", "吗", "呢", "我们", "这边", "监控", "数据库", "30 %",
		"rose from 2% to 9%", "jira", "ticket", "rollback 30%", "60% done", "回滚进度 50%",
		"Checkout", "ROLLED BACK", "Root Cause", "IC", "P99", "Sev1", "sev 2", "失败率", "回落到0.1%")
	seps := []string{" ", " ", " ", "", ", ", "，", ". ", "。", "; ", ": ", "：", " - ", "\n"}
	ends := []string{"", "", ".", "?", "？", "!", "。", "~", " 吗", "呢"}
	rng := rand.New(rand.NewPCG(35, 2026))
	for range 300 {
		var b strings.Builder
		if rng.IntN(8) == 0 {
			b.WriteString([]string{"先", "what ", "is the ", "any update ", "ok, ", "收到，", "Impact: "}[rng.IntN(7)])
		}
		for i, n := 0, 1+rng.IntN(6); i < n; i++ {
			if i > 0 {
				b.WriteString(seps[rng.IntN(len(seps))])
			}
			w := vocab[rng.IntN(len(vocab))]
			switch rng.IntN(6) {
			case 0:
				w = strings.ToUpper(w)
			case 1:
				if w != "" {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
			}
			b.WriteString(w)
		}
		b.WriteString(ends[rng.IntN(len(ends))])
		texts = append(texts, b.String())
	}
	return texts
}

// TestPrefilteredScoringIsEquivalent: the prefiltered scoring gives exactly the
// scores of the reference (every regular expression on every sentence), and every
// prefiltered expression answers exactly what its regular expression answers, by
// searching its literals (MatchString) or looking them up (matchIn), on raw and on
// lower-cased text.
func TestPrefilteredScoringIsEquivalent(t *testing.T) {
	corpus := equivalenceCorpus()
	matchedPattern := make([]bool, len(patterns))
	scored := 0
	for _, text := range corpus {
		for _, sentence := range sentences(text) {
			s := normalizeForMatch(quotedRE.re.ReplaceAllString(sentence, " "))
			got, want := scoreSentence(s), refScoreSentence(s)
			if got != want {
				t.Errorf("scoreSentence(%q) = %v, reference %v", s, got, want)
			}
			if want != (scores{}) {
				scored++
			}
			lits := literalsIn(s)
			for i, p := range patterns {
				want := p.re.MatchString(s)
				if got := p.matchIn(lits, s); got != want {
					t.Errorf("pattern %d %s: matchIn(%q) = %v, regexp %v", i, p.re, s, got, want)
				}
				matchedPattern[i] = matchedPattern[i] || want
			}
		}
	}
	for i, ok := range matchedPattern {
		if !ok {
			t.Errorf("no corpus sentence matches pattern %d %s: the corpus does not exercise it", i, patterns[i].re)
		}
	}
	if scored < len(corpus)/4 {
		t.Errorf("only %d corpus sentences score anything: the corpus is too weak", scored)
	}

	for _, text := range corpus {
		if got, want := withoutURLs(text), urlRE.ReplaceAllString(text, " "); got != want {
			t.Errorf("withoutURLs(%q) = %q, regexp %q", text, got, want)
		}
		if !mayHaveURL(text) && urlRE.MatchString(text) {
			t.Errorf("mayHaveURL(%q) is false, but the regexp matches it", text)
		}
	}

	for name, f := range modifiers() {
		matched := 0
		for _, text := range corpus {
			for _, s := range []string{text, normalizeForMatch(text)} {
				if got, want := f.MatchString(s), f.re.MatchString(s); got != want {
					t.Errorf("%s.MatchString(%q) = %v, regexp %v", name, s, got, want)
				}
				if got, want := f.matchIn(literalsIn(s), s), f.re.MatchString(s); got != want {
					t.Errorf("%s.matchIn(%q) = %v, regexp %v", name, s, got, want)
				}
				if got, want := f.ReplaceAllString(s, " "), f.re.ReplaceAllString(s, " "); got != want {
					t.Errorf("%s.ReplaceAllString(%q) = %q, regexp %q", name, s, got, want)
				}
				if got, want := f.FindAllStringIndex(s, -1), f.re.FindAllStringIndex(s, -1); !slices.EqualFunc(got, want, slices.Equal[[]int]) {
					t.Errorf("%s.FindAllStringIndex(%q) = %v, regexp %v", name, s, got, want)
				}
				if f.re.MatchString(s) {
					matched++
				}
			}
		}
		if matched == 0 {
			t.Errorf("no corpus text matches %s %s: the corpus does not exercise it", name, f.re)
		}
	}
}

// TestModifiersArePrefiltered: the modifiers that run on every sentence have a
// prefilter, else the prefilter buys nothing for them.
func TestModifiersArePrefiltered(t *testing.T) {
	for name, f := range modifiers() {
		if f.anyOf == nil {
			t.Errorf("%s %s has no prefilter", name, f.re)
		}
	}
}
