package deploytest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/larkline/larkline/"

// spelledIn returns the string literals of the non-test Go files of the module
// directories dirs and of the module packages those files import (one level): where
// a metric's label values are spelled.
func spelledIn(t *testing.T, root string, dirs []string) map[string]bool {
	t.Helper()
	lits := map[string]bool{}
	seen := map[string]bool{}
	var scan func(dir string, follow bool)
	scan = func(dir string, follow bool) {
		if seen[dir] {
			return
		}
		seen[dir] = true
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						lits[s] = true
					}
				}
				return true
			})
			if follow {
				for _, imp := range file.Imports {
					p, _ := strconv.Unquote(imp.Path.Value)
					if rest, ok := strings.CutPrefix(p, modulePath); ok {
						scan(rest, false)
					}
				}
			}
		}
	}
	for _, d := range dirs {
		scan(d, true)
	}
	return lits
}

// TestAlertAndDashboardLabelValues: a label value an alert rule or a dashboard query
// matches on a larkline_ series (status="STALL", outcome=~"failed|rejected", stage
// given by label_replace) is a value the code that defines the metric spells: a rule
// that matches a value no metric carries never fires (issue #32: the dead-letter
// alert's stages were "sink" and "workspaces", the metrics' evidence_sink and
// workspace_feed; since D30 every one says sink and workspaces).
func TestAlertAndDashboardLabelValues(t *testing.T) {
	inv := sourceInventory(t)
	root := repoRoot(t)
	rules := readRules(t)
	var exprs []struct{ where, expr string }
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, struct{ where, expr string }{"alert " + r.Alert, r.Expr})
		}
	}
	d, _ := readDashboard(t)
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs = append(exprs, struct{ where, expr string }{"panel " + p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)

	literal := regexp.MustCompile(`^[A-Za-z0-9_.|-]+$`)
	replaceRE := regexp.MustCompile(`label_replace\(\s*[a-z]+\(\s*(larkline_[a-z0-9_]*[a-z0-9])[^,]*,\s*"([a-z_]+)",\s*"([^"]*)"`)
	checked := 0
	check := func(where, metric, label, value string) {
		def, ok := inv.resolve(metric)
		if !ok || !slices.Contains(def.Labels, label) || !literal.MatchString(value) {
			return
		}
		lits := spelledIn(t, root, def.Packages)
		for _, v := range strings.Split(value, "|") {
			checked++
			if !lits[v] {
				t.Errorf("%s: %s{%s=%q}: the code defining %s (%v) never spells %q", where, metric, label, value, metric, def.Packages, v)
			}
		}
	}
	for _, e := range exprs {
		for _, m := range selectorRE.FindAllStringSubmatch(e.expr, -1) {
			for _, raw := range splitMatchers(m[2]) {
				mm := regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|=)\s*"([^"]*)"\s*$`).FindStringSubmatch(raw)
				if mm != nil {
					check(e.where, m[1], mm[1], mm[3])
				}
			}
		}
		// label_replace(f(larkline_x…), "stage", "value", "", ""): the value must be
		// one the stage label of the dead-letter metrics carries.
		for _, m := range replaceRE.FindAllStringSubmatch(e.expr, -1) {
			parked, ok := inv.resolve("larkline_deadletters_parked")
			if m[2] != "stage" || !ok {
				continue
			}
			lits := spelledIn(t, root, parked.Packages)
			checked++
			if !lits[m[3]] {
				t.Errorf("%s: label_replace gives %s stage %q, a value larkline_deadletters_parked{stage} never carries", e.where, m[1], m[3])
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d label values checked: the test reads next to nothing", checked)
	}
}
