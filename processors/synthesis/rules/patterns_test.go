package rules

import (
	"regexp/syntax"
	"slices"
	"testing"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

func TestSentences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Rolled back to v1.2.3. Error rate 0.5% now", []string{"Rolled back to v1.2.3.", "Error rate 0.5% now"}},
		{"is it the DB? yes!", []string{"is it the DB?", "yes!"}},
		{"已回滚。报错率回落；继续观察", []string{"已回滚。", "报错率回落；", "继续观察"}},
		{"line one\n\nline two", []string{"line one", "line two"}},
		{"e.g.the end.", []string{"e.g.the end."}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := sentences(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("sentences(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScoreSentenceModifiers(t *testing.T) {
	score := func(s string) scores { return scoreSentence(normalizeForMatch(s)) }
	rank := func(k synth.Kind) int { return k.Rank() }
	tests := []struct {
		name string
		s    string
		kind synth.Kind
		want bool // reaches the threshold
	}{
		{"done mitigation", "rolled back payments", synth.KindMitigation, true},
		{"planned mitigation", "we will have rolled back payments by noon", synth.KindMitigation, false},
		{"planned but already done", "we will keep watching, the rollback is done", synth.KindMitigation, true},
		{"recovery", "checkout recovered", synth.KindRecovery, true},
		{"negated recovery", "checkout has not recovered", synth.KindRecovery, false},
		{"negated recovery is impact", "checkout has not recovered", synth.KindImpact, true},
		{"recovery hides impact words", "error rate back to normal", synth.KindImpact, false},
		{"conclusion hides finding words", "root cause: pool exhausted by slow queries", synth.KindFinding, false},
		{"question", "is checkout down?", synth.KindImpact, false},
		{"weak alone", "due to", synth.KindRootCause, false},
		{"weak pair", "because of the deploy, due to a missing index", synth.KindRootCause, true},
		{"weak pair zh", "由于索引被删除导致全表扫描", synth.KindRootCause, true},
		{"weak alone zh", "这导致用户无法下单", synth.KindRootCause, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(tt.s)[rank(tt.kind)] >= threshold; got != tt.want {
				t.Fatalf("%q: %s reaches threshold = %v, want %v (scores %v)", tt.s, tt.kind, got, tt.want, score(tt.s))
			}
		})
	}
}

func TestRequiredLiterals(t *testing.T) {
	tests := []struct {
		expr string
		want []string // nil: no prefilter
	}{
		{`rolled back`, []string{"rolled back"}},
		{`\b(is|are) down\b`, []string{"is down", "are down"}},
		{`回滚|回落|扩容`, []string{"回滚", "回落", "扩容"}},
		{`\bfound\b|\bidentified\b`, []string{"found", "identified"}},
		{`\b(i|we) (see|saw)\b`, []string{"i see", "i saw", "we see", "we saw"}},
		{`\bscal(ed|ing) (up|out)\b.*x`, []string{"scaled up", "scaled out", "scaling up", "scaling out"}},
		{`原因[:：]`, []string{"原因:", "原因："}},
		{`\bclose[ds]?\b`, []string{"close"}},
		{`ab|ab|abc`, []string{"ab"}},
		{`\b\d+(\.\d+)?\s?% of (requests|users)\b`, []string{"% of requests", "% of users"}},
		{`(?i)rollback`, nil},
		{`\bfound\b|\w+ is`, []string{"found", " is"}},
		{`\bfound\b|\w+`, nil},
		{`(a)?b*`, nil},
		{`(ab){2}`, []string{"abab"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			re, err := syntax.Parse(tt.expr, syntax.Perl)
			if err != nil {
				t.Fatal(err)
			}
			got := requiredLiterals(re.Simplify())
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("requiredLiterals(%s) = %q, want %q", tt.expr, got, want)
			}
		})
	}
}

// TestPrefilterIsSound: the literal prefilter never skips a pattern that would match,
// on every sentence the tests use.
func TestPrefilterIsSound(t *testing.T) {
	var texts []string
	for _, l := range incidentChat {
		texts = append(texts, l.text)
	}
	texts = append(texts, singleMessageTexts()...)
	for _, text := range texts {
		for _, s := range sentences(text) {
			s = normalizeForMatch(s)
			for _, p := range patterns {
				if p.re.MatchString(s) && p.anyOf != nil && !containsAny(s, p.anyOf) {
					t.Errorf("prefilter %q of %s would skip a match in %q", p.anyOf, p.re, s)
				}
			}
		}
	}
	without := 0
	for _, p := range patterns {
		if p.anyOf == nil {
			without++
			t.Logf("no prefilter: %s", p.re)
		}
	}
	if without > len(patterns)/4 {
		t.Errorf("%d of %d patterns have no prefilter", without, len(patterns))
	}
}
