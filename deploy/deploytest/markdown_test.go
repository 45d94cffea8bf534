package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// operationsDoc is the operator's manual, relative to the module root.
const operationsDoc = "docs/operations.md"

// runbookSection is the level-2 heading whose level-3 headings are the alert
// runbooks, one per alert, named exactly as the alert.
const runbookSection = "Alert runbooks"

// metricTypes are the types a metrics reference row may state.
var metricTypes = []string{"counter", "gauge", "histogram", "summary"}

// doc is a parsed markdown page.
type doc struct {
	Text    string
	Lines   []string
	Anchors map[string]bool
	// Headings in order, with their level.
	Headings []heading
	// Rows are the metrics reference rows by metric name (more than one if the page
	// repeats a metric).
	Rows map[string][]metricRow
}

type heading struct {
	Level int
	Text  string
	Line  int
}

// metricRow is one row of the metrics reference:
//
//	| `larkline_x_total` | counter | `outcome`, `reason` | `pkg/path` | meaning |
type metricRow struct {
	Line     int
	Name     string
	Type     string
	Labels   []string // sorted; empty for "—"
	Packages []string // sorted
	Meaning  string
}

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	rowRE      = regexp.MustCompile("^\\|\\s*`(larkline_[a-z0-9_]+)`\\s*\\|")
	codeSpanRE = regexp.MustCompile("`([^`]*)`")
)

func readDoc(t testing.TB, rel string) *doc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	d, problems := parseDoc(string(data))
	for _, p := range problems {
		t.Errorf("%s: %s", rel, p)
	}
	return d
}

// parseDoc parses headings, anchors and metric rows; problems are malformed rows.
func parseDoc(text string) (*doc, []string) {
	d := &doc{Text: text, Lines: strings.Split(text, "\n"), Anchors: map[string]bool{}, Rows: map[string][]metricRow{}}
	var problems []string
	slugs := map[string]int{}
	fence := false
	for i, line := range d.Lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.Anchors[m[1]] = true
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			h := heading{Level: len(m[1]), Text: m[2], Line: i + 1}
			d.Headings = append(d.Headings, h)
			slug := githubSlug(h.Text)
			if n := slugs[slug]; n > 0 {
				d.Anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				d.Anchors[slug] = true
			}
			slugs[slug]++
			continue
		}
		if rowRE.MatchString(line) {
			r, err := parseRow(line)
			if err != nil {
				problems = append(problems, fmt.Sprintf("line %d: %v", i+1, err))
				continue
			}
			r.Line = i + 1
			d.Rows[r.Name] = append(d.Rows[r.Name], r)
		}
	}
	return d, problems
}

func parseRow(line string) (metricRow, error) {
	cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	if len(cells) != 5 {
		return metricRow{}, fmt.Errorf("a metrics reference row has 5 cells (metric | type | labels | package | meaning), this one %d", len(cells))
	}
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	r := metricRow{Name: strings.Trim(cells[0], "`"), Type: cells[1], Meaning: cells[4]}
	if !slices.Contains(metricTypes, r.Type) {
		return r, fmt.Errorf("%s: type %q is not one of %v", r.Name, r.Type, metricTypes)
	}
	var err error
	if r.Labels, err = codeList(cells[2], true); err != nil {
		return r, fmt.Errorf("%s: labels: %w", r.Name, err)
	}
	if r.Packages, err = codeList(cells[3], false); err != nil {
		return r, fmt.Errorf("%s: package: %w", r.Name, err)
	}
	if r.Meaning == "" {
		return r, fmt.Errorf("%s: the meaning is empty", r.Name)
	}
	return r, nil
}

// codeList parses "`a`, `b`" (or "—" when allowed) into a sorted list.
func codeList(cell string, dashAllowed bool) ([]string, error) {
	if cell == "—" && dashAllowed {
		return []string{}, nil
	}
	ms := codeSpanRE.FindAllStringSubmatch(cell, -1)
	if len(ms) == 0 || strings.Join(strings.Fields(codeSpanRE.ReplaceAllString(cell, "")), "") != strings.Repeat(",", len(ms)-1) {
		want := "`a`, `b`"
		if dashAllowed {
			want += " or —"
		}
		return nil, fmt.Errorf("%q is not a list of code spans (%s)", cell, want)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out, nil
}

// githubSlug is the anchor GitHub gives a heading: lower case, punctuation other than
// '-' and '_' removed, spaces turned into '-'.
func githubSlug(h string) string {
	h = codeSpanRE.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// section returns the level-3 headings under the level-2 heading named title.
func (d *doc) subheadings(title string) ([]heading, bool) {
	var out []heading
	in, found := false, false
	for _, h := range d.Headings {
		switch {
		case h.Level <= 2:
			in = h.Level == 2 && h.Text == title
			found = found || in
		case in && h.Level == 3:
			out = append(out, h)
		}
	}
	return out, found
}

func TestGithubSlug(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Alert runbooks", "alert-runbooks"},
		{"LarklineConsumerGroupLagging", "larklineconsumergrouplagging"},
		{"Replay a processor version (`larkline replay`)", "replay-a-processor-version-larkline-replay"},
		{"Rotate secrets: Lark, Postgres & Kafka", "rotate-secrets-lark-postgres--kafka"},
		{"metrics_reference", "metrics_reference"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := githubSlug(tc.in); got != tc.want {
				t.Errorf("githubSlug(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseDoc(t *testing.T) {
	for _, tc := range []struct {
		name     string
		text     string
		rows     map[string]metricRow
		anchors  []string
		problems int
	}{
		{
			name: "row with labels and anchors",
			text: "# T\n## Metrics\n| metric | type | labels | package | meaning |\n|---|---|---|---|---|\n" +
				"| `larkline_a_total` | counter | `outcome`, `reason` | `pkg/a` | what |\n",
			rows: map[string]metricRow{"larkline_a_total": {Name: "larkline_a_total", Type: "counter",
				Labels: []string{"outcome", "reason"}, Packages: []string{"pkg/a"}, Meaning: "what", Line: 5}},
			anchors: []string{"t", "metrics"},
		},
		{
			name:    "row without labels, duplicate headings, html anchor",
			text:    "## X\n## X\n<a id=\"custom\"></a>\n| `larkline_g` | gauge | — | `p`, `q` | m |\n",
			rows:    map[string]metricRow{"larkline_g": {Name: "larkline_g", Type: "gauge", Labels: []string{}, Packages: []string{"p", "q"}, Meaning: "m", Line: 4}},
			anchors: []string{"x", "x-1", "custom"},
		},
		{name: "bad type", text: "| `larkline_a` | count | — | `p` | m |\n", problems: 1},
		{name: "too few cells", text: "| `larkline_a` | counter | — | m |\n", problems: 1},
		{name: "labels not code", text: "| `larkline_a` | counter | outcome | `p` | m |\n", problems: 1},
		{name: "three labels", text: "| `larkline_a` | counter | `a`, `b`, `c` | `p` | m |\n"},
		{name: "labels without comma", text: "| `larkline_a` | counter | `a` `b` | `p` | m |\n", problems: 1},
		{name: "no package", text: "| `larkline_a` | counter | — | — | m |\n", problems: 1},
		{name: "empty meaning", text: "| `larkline_a` | counter | — | `p` |  |\n", problems: 1},
		{name: "fenced code is not parsed", text: "```\n| `larkline_a` | count | — | `p` | m |\n# not a heading\n```\n", anchors: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, problems := parseDoc(tc.text)
			if len(problems) != tc.problems {
				t.Fatalf("problems = %q, want %d", problems, tc.problems)
			}
			for name, want := range tc.rows {
				got := d.Rows[name]
				if len(got) != 1 || fmt.Sprint(got[0]) != fmt.Sprint(want) {
					t.Errorf("row %s = %+v, want %+v", name, got, want)
				}
			}
			for _, a := range tc.anchors {
				if !d.Anchors[a] {
					t.Errorf("anchor %q missing; have %v", a, d.Anchors)
				}
			}
			if tc.anchors != nil && len(d.Anchors) != len(tc.anchors) {
				t.Errorf("anchors = %v, want %v", d.Anchors, tc.anchors)
			}
		})
	}
}
