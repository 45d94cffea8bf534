package deploytest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// alertsFile holds the Prometheus alert rules, relative to the module root.
const alertsFile = "deploy/prometheus/alerts.yaml"

// severities are the severity label values the rules may use (docs/operations.md
// says what each means).
var severities = []string{"critical", "warning"}

var (
	alertNameRE = regexp.MustCompile(`^Larkline[A-Z][A-Za-z0-9]*$`)
	// promDurationRE is a Prometheus duration (1h30m, 5m, 0m).
	promDurationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	templateVarRE  = regexp.MustCompile(`\{\{[^}]*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// ruleFile is the Prometheus rule file format; unknown fields are errors.
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert         string            `yaml:"alert"`
			Record        string            `yaml:"record"`
			Expr          string            `yaml:"expr"`
			For           string            `yaml:"for"`
			KeepFiringFor string            `yaml:"keep_firing_for"`
			Labels        map[string]string `yaml:"labels"`
			Annotations   map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// runbookBase is where alert runbooks live: the operations page on the module's
// repository.
func runbookBase(t testing.TB) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return "https://" + strings.TrimSpace(mod) + "/blob/main/" + operationsDoc + "#"
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), alertsFile))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var rf ruleFile
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return rf
}

// TestAlertRules holds the alert rules to the code and to the runbooks.
func TestAlertRules(t *testing.T) {
	inv := sourceInventory(t)
	rf := readRules(t)
	d := readDoc(t, operationsDoc)
	base := runbookBase(t)
	if len(rf.Groups) == 0 {
		t.Fatalf("%s has no rule groups", alertsFile)
	}
	var alerts []string
	groups := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("%s: group name %q is empty or repeated", alertsFile, g.Name)
		}
		groups[g.Name] = true
		if len(g.Rules) == 0 {
			t.Errorf("%s: group %s has no rules", alertsFile, g.Name)
		}
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				t.Errorf("%s: group %s has a rule without alert (record %q): only alerting rules belong here", alertsFile, g.Name, r.Record)
				continue
			}
			t.Run(name, func(t *testing.T) {
				if !alertNameRE.MatchString(name) {
					t.Errorf("alert name %q does not match %s", name, alertNameRE)
				}
				if slices.Contains(alerts, name) {
					t.Errorf("alert %s is defined twice", name)
				}
				alerts = append(alerts, name)
				for _, p := range checkExpr(inv, r.Expr) {
					t.Errorf("expr: %s", p)
				}
				if len(seriesIn(r.Expr)) == 0 && !strings.Contains(r.Expr, "up{") {
					t.Errorf("expr uses no larkline_ metric: %s", r.Expr)
				}
				if !promDurationRE.MatchString(r.For) {
					t.Errorf("for: %q is not a Prometheus duration (write 0m for none)", r.For)
				}
				if sev := r.Labels["severity"]; !slices.Contains(severities, sev) {
					t.Errorf("labels.severity = %q, want one of %v", sev, severities)
				}
				if strings.TrimSpace(r.Annotations["summary"]) == "" {
					t.Error("annotations.summary is empty")
				}
				if strings.TrimSpace(r.Annotations["description"]) == "" {
					t.Error("annotations.description is empty")
				}
				for k, v := range r.Annotations {
					if strings.Count(v, "{{") != strings.Count(v, "}}") {
						t.Errorf("annotations.%s: unbalanced template braces: %q", k, v)
					}
					for _, m := range templateVarRE.FindAllStringSubmatch(v, -1) {
						if !labelAvailable(inv, r.Expr, m[1]) {
							t.Errorf("annotations.%s uses $labels.%s, which the expression's series do not carry", k, m[1])
						}
					}
				}
				url := r.Annotations["runbook_url"]
				anchor, ok := strings.CutPrefix(url, base)
				switch {
				case !ok:
					t.Errorf("runbook_url %q does not start with %q", url, base)
				case anchor != githubSlug(name):
					t.Errorf("runbook_url anchor %q is not the alert's own runbook %q", anchor, githubSlug(name))
				case !d.Anchors[anchor]:
					t.Errorf("runbook_url anchor %q does not exist in %s", anchor, operationsDoc)
				}
			})
		}
	}
	// The runbook section has exactly one entry per alert.
	heads, ok := d.subheadings(runbookSection)
	if !ok {
		t.Fatalf("%s has no %q section", operationsDoc, runbookSection)
	}
	var runbooks []string
	for _, h := range heads {
		runbooks = append(runbooks, h.Text)
		if !slices.Contains(alerts, h.Text) {
			t.Errorf("%s:%d: runbook %q names no alert of %s", operationsDoc, h.Line, h.Text, alertsFile)
		}
	}
	for _, a := range alerts {
		if !slices.Contains(runbooks, a) {
			t.Errorf("%s has no runbook (### %s under ## %s)", operationsDoc, a, runbookSection)
		}
	}
}

// labelAvailable reports whether a label may appear on the result of expr: it is a
// label of a series expr uses (or one it adds with label_replace, or a target label),
// and, when expr aggregates with "by (...)", it is kept by every such clause.
func labelAvailable(inv *inventory, expr, label string) bool {
	byRE := regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	for _, m := range byRE.FindAllStringSubmatch(expr, -1) {
		kept := strings.Split(m[1], ",")
		for i := range kept {
			kept[i] = strings.TrimSpace(kept[i])
		}
		if !slices.Contains(kept, label) {
			return false
		}
	}
	if slices.Contains(targetLabels, label) {
		return true
	}
	if regexp.MustCompile(`label_replace\([^"]*"` + regexp.QuoteMeta(label) + `"`).MatchString(expr) {
		return true
	}
	for _, s := range seriesIn(expr) {
		if def, ok := inv.resolve(s); ok && (!def.LabelsKnown || slices.Contains(def.Labels, label)) {
			return true
		}
	}
	return false
}
