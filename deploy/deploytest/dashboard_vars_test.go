package deploytest

import (
	"regexp"
	"strings"
	"testing"
)

// TestDashboardVariables: a platform team's Grafana serves many deployments, so the
// dashboard has namespace, job and version variables (and the instance variable that
// carries the version filter to every series), and every larkline_ series of every
// panel is filtered by them (issue #32).
func TestDashboardVariables(t *testing.T) {
	d, _ := readDashboard(t)
	have := map[string]bool{}
	for _, v := range d.Templating.List {
		have[v.Name] = true
	}
	for _, want := range []string{"datasource", "namespace", "job", "version", "instance"} {
		if !have[want] {
			t.Errorf("the dashboard has no %q variable", want)
		}
	}
	sel := regexp.MustCompile(`(larkline_[a-z0-9_]*[a-z0-9])\s*(\{[^}]*\})?`)
	flat := flatPanels(d.Panels)
	n := 0
	for _, p := range flat {
		for _, tg := range p.Targets {
			for _, m := range sel.FindAllStringSubmatch(tg.Expr, -1) {
				n++
				for _, f := range []string{`namespace=~"$namespace"`, `job=~"$job"`, `instance=~"$instance"`} {
					if !strings.Contains(m[2], f) {
						t.Errorf("panel %q, query %s: %s is not filtered by %s", p.Title, tg.RefID, m[0], f)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no larkline_ series found in the dashboard: the test reads nothing")
	}
}
