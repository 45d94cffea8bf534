package deploytest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// targetLabels are labels Prometheus attaches to every scraped series (job and
// instance), the role label the example scrape configuration adds, and the
// namespace label Kubernetes service discovery (a ServiceMonitor) adds.
var targetLabels = []string{"job", "instance", "role", "namespace"}

var (
	selectorRE = regexp.MustCompile(`(larkline_[a-z0-9_]*[a-z0-9])\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*$`)
)

// checkExpr reports what is wrong with a PromQL expression in the light of the code:
// unbalanced brackets or quotes, larkline_ series the code does not define, and label
// matchers on larkline_ series that name a label the metric does not have. It does
// not evaluate PromQL.
func checkExpr(inv *inventory, expr string) []string {
	var problems []string
	if strings.TrimSpace(expr) == "" {
		return []string{"empty expression"}
	}
	if err := balanced(expr); err != nil {
		problems = append(problems, err.Error())
	}
	for _, s := range seriesIn(expr) {
		if _, ok := inv.resolve(s); !ok {
			problems = append(problems, fmt.Sprintf("%s is neither a metric the code defines nor a histogram's _bucket/_sum/_count series", s))
		}
	}
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		def, ok := inv.resolve(m[1])
		if !ok || !def.LabelsKnown {
			continue
		}
		allowed := slices.Concat(def.Labels, targetLabels)
		if strings.HasSuffix(m[1], "_bucket") {
			allowed = append(allowed, "le")
		}
		for _, raw := range splitMatchers(m[2]) {
			mm := matcherRE.FindStringSubmatch(raw)
			if mm == nil {
				problems = append(problems, fmt.Sprintf("%s{%s}: cannot read the matcher %q", m[1], m[2], raw))
				continue
			}
			if !slices.Contains(allowed, mm[1]) {
				problems = append(problems, fmt.Sprintf("%s has no label %q (labels: %v)", m[1], mm[1], def.Labels))
			}
		}
	}
	return problems
}

// splitMatchers splits a selector's matcher list on commas outside quotes.
func splitMatchers(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, esc := false, false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case r == '\\' && inQuote:
			esc = true
		case r == '"':
			inQuote = !inQuote
		case r == ',' && !inQuote:
			if strings.TrimSpace(cur.String()) != "" {
				out = append(out, cur.String())
			}
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

// balanced checks (), [] and {} nesting and closed double quotes.
func balanced(s string) error {
	var stack []rune
	inQuote, esc := false, false
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for i, r := range s {
		if inQuote {
			switch {
			case esc:
				esc = false
			case r == '\\':
				esc = true
			case r == '"':
				inQuote = false
			}
			continue
		}
		switch r {
		case '"':
			inQuote = true
		case '(', '[', '{':
			stack = append(stack, r)
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return fmt.Errorf("unbalanced %q at offset %d", r, i)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inQuote {
		return fmt.Errorf("unterminated string")
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	return nil
}

func TestCheckExpr(t *testing.T) {
	inv := &inventory{Metrics: map[string]*metricDef{
		"larkline_a_total":   {Name: "larkline_a_total", Type: "counter", Labels: []string{"outcome"}, LabelsKnown: true},
		"larkline_h_seconds": {Name: "larkline_h_seconds", Type: "histogram", Labels: []string{"op"}, LabelsKnown: true},
		"larkline_u":         {Name: "larkline_u"},
	}}
	for _, tc := range []struct {
		name, expr string
		problems   []string // substrings
	}{
		{"ok", `sum by (outcome) (rate(larkline_a_total{outcome="failed", job="larkline"}[5m])) > 0`, nil},
		{"histogram bucket with le", `histogram_quantile(0.99, sum by (le) (rate(larkline_h_seconds_bucket{op=~"a|b", le!="+Inf"}[5m])))`, nil},
		{"unknown labels of an unknown metric are not judged", `larkline_u{anything="x"}`, nil},
		{"comma inside a matcher value", `larkline_a_total{outcome=~"a,b"}`, nil},
		{"undefined metric", `rate(larkline_b_total[5m])`, []string{"larkline_b_total is neither"}},
		{"wrong label", `larkline_a_total{reason="x"}`, []string{`has no label "reason"`}},
		{"le on a non-bucket series", `larkline_h_seconds_count{le="1"}`, []string{`has no label "le"`}},
		{"unbalanced", `sum(rate(larkline_a_total[5m])`, []string{"unclosed"}},
		{"unterminated quote", `larkline_a_total{outcome="x}`, []string{"unterminated", "cannot read the matcher"}},
		{"empty", " ", []string{"empty expression"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkExpr(inv, tc.expr)
			if len(got) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tc.problems), tc.problems)
			}
			for i, sub := range tc.problems {
				if !strings.Contains(got[i], sub) {
					t.Errorf("problem %q does not mention %q", got[i], sub)
				}
			}
		})
	}
}
