package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dashboardFile is the Grafana dashboard, relative to the module root.
const dashboardFile = "deploy/grafana/larkline-dashboard.json"

// dashboardDatasource is how every panel and query names its data source: the
// dashboard's datasource variable, so the JSON imports into any Grafana.
const dashboardDatasource = "${datasource}"

// dashboardMustShow are metrics the dashboard must chart: one or more per area the
// operator watches (ingestion, reconciliation, sink, windows, synthesis, summaries,
// lag, HTTP/API). Deleting a panel that is the only view of one fails the test.
var dashboardMustShow = []string{
	"larkline_lark_events_total",
	"larkline_lark_event_ack_seconds",
	"larkline_reconcile_runs_total",
	"larkline_reconcile_lag_seconds",
	"larkline_sink_evidence_total",
	"larkline_sink_dead_lettered_total",
	"larkline_windows_open",
	"larkline_windows_closed_total",
	"larkline_windows_late_records_total",
	"larkline_windows_oldest_uncovered_evidence_age_seconds",
	"larkline_synthesis_windows_total",
	"larkline_synthesis_chunks_total",
	"larkline_synthesis_chunk_model_tokens_total",
	"larkline_synthesis_chunk_synthesize_seconds",
	"larkline_synthesis_summary_attempts_total",
	"larkline_consumergroup_lag",
	"larkline_consumergroup_lag_seconds",
	"larkline_consumergroup_status",
	"larkline_http_requests_total",
	"larkline_api_requests_total",
}

type dashPanel struct {
	ID          int             `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Datasource  *dashDatasource `json:"datasource"`
	GridPos     *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Datasource *dashDatasource `json:"datasource"`
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // a collapsed row's panels
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboard struct {
	UID           string      `json:"uid"`
	Title         string      `json:"title"`
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) (*dashboard, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d, string(data)
}

// TestDashboard holds the Grafana dashboard to the code: it parses, every query uses
// defined metrics through the datasource variable, and every area is charted.
func TestDashboard(t *testing.T) {
	inv := sourceInventory(t)
	d, text := readDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d: all are required", d.UID, d.Title, d.SchemaVersion)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if "${"+v.Name+"}" == dashboardDatasource && v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = true
		}
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			for _, p := range checkExpr(inv, q) {
				t.Errorf("variable %s: %s", v.Name, p)
			}
		}
	}
	if !dsVar {
		t.Errorf("templating needs a datasource variable of type prometheus named for %s", dashboardDatasource)
	}

	flat := flatPanels(d.Panels)
	ids := map[int]string{}
	charted := map[string]bool{}
	for _, p := range flat {
		name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID == 0 || ids[p.ID] != "" {
			t.Errorf("%s: id is missing or used by %s too", name, ids[p.ID])
		}
		ids[p.ID] = name
		if p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: needs a title and a gridPos within 24 columns", name)
		}
		if p.Type == "row" {
			continue
		}
		if strings.TrimSpace(p.Description) == "" {
			t.Errorf("%s: description is empty (say what the panel shows)", name)
		}
		if p.Datasource == nil || p.Datasource.UID != dashboardDatasource {
			t.Errorf("%s: datasource must be %s", name, dashboardDatasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", name)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != dashboardDatasource {
				t.Errorf("%s, query %s: datasource must be %s", name, tg.RefID, dashboardDatasource)
			}
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId %q missing or repeated", name, tg.RefID)
			}
			refs[tg.RefID] = true
			for _, pr := range checkExpr(inv, tg.Expr) {
				t.Errorf("%s, query %s: %s", name, tg.RefID, pr)
			}
			for _, s := range seriesIn(tg.Expr) {
				if def, ok := inv.resolve(s); ok {
					charted[def.Name] = true
				}
			}
		}
	}
	for _, m := range dashboardMustShow {
		if _, ok := inv.Metrics[m]; !ok {
			t.Errorf("dashboardMustShow lists %s, which the code no longer defines", m)
			continue
		}
		if !charted[m] {
			t.Errorf("no dashboard panel charts %s", m)
		}
	}
	// Titles, descriptions and legends name only real metrics too.
	for _, s := range seriesIn(text) {
		if _, ok := inv.resolve(s); !ok {
			t.Errorf("%s mentions %s, which the code does not define", dashboardFile, s)
		}
	}
	var uncharted []string
	for _, n := range inv.sortedNames() {
		if !charted[n] {
			uncharted = append(uncharted, n)
		}
	}
	if len(uncharted) > 0 {
		t.Logf("metrics without a panel (fine, but consider them): %s", strings.Join(uncharted, ", "))
	}
}

// flatPanels lists the panels and, depth first, the panels of their rows.
func flatPanels(ps []dashPanel) []dashPanel {
	var flat []dashPanel
	for _, p := range ps {
		flat = append(flat, p)
		flat = append(flat, flatPanels(p.Panels)...)
	}
	return flat
}
