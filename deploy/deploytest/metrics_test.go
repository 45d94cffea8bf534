package deploytest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestMetricsReference holds docs/operations.md's metrics reference to the code: one
// row per defined metric, with the type, labels and package the code states, and no
// row (or mention) of a metric the code does not define.
func TestMetricsReference(t *testing.T) {
	inv := sourceInventory(t)
	d := readDoc(t, operationsDoc)
	if len(inv.Metrics) == 0 {
		t.Fatal("no larkline_ metric found in the Go sources: the scanner is broken")
	}
	var missing []string
	for _, name := range inv.sortedNames() {
		def := inv.Metrics[name]
		rows := d.Rows[name]
		switch {
		case len(rows) == 0:
			missing = append(missing, suggestRow(def))
			continue
		case len(rows) > 1:
			t.Errorf("%s: %s has %d rows (lines %v); keep one", operationsDoc, name, len(rows), rowLines(rows))
		}
		r := rows[0]
		if def.Type != "" && r.Type != def.Type {
			t.Errorf("%s:%d: %s is a %s (%s), the row says %s", operationsDoc, r.Line, name, def.Type, strings.Join(def.Where, ", "), r.Type)
		}
		if def.LabelsKnown && !slices.Equal(r.Labels, def.Labels) {
			t.Errorf("%s:%d: %s has labels %s (%s), the row says %s", operationsDoc, r.Line, name, labelCell(def.Labels), strings.Join(def.Where, ", "), labelCell(r.Labels))
		}
		if !slices.Equal(r.Packages, def.Packages) {
			t.Errorf("%s:%d: %s is defined in %s, the row says %s", operationsDoc, r.Line, name, codeCell(def.Packages), codeCell(r.Packages))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s documents %d of %d metrics; add these rows to its metrics reference (and say what they mean):\n%s",
			operationsDoc, len(inv.Metrics)-len(missing), len(inv.Metrics), strings.Join(missing, "\n"))
	}
	for name, rows := range d.Rows {
		if _, ok := inv.Metrics[name]; !ok {
			t.Errorf("%s:%d: documents %s, which no Go source defines (removed or renamed?)", operationsDoc, rows[0].Line, name)
		}
	}
	for _, s := range seriesIn(d.Text) {
		if _, ok := inv.resolve(s); !ok {
			t.Errorf("%s mentions %s, which is neither a defined metric nor a histogram's _bucket/_sum/_count series", operationsDoc, s)
		}
	}
	// Selectors with matchers in the prose (metric{label="v"}) name real labels;
	// {group,topic,partition} lists are label lists, not selectors.
	for _, sel := range selectorRE.FindAllString(d.Text, -1) {
		if !strings.Contains(sel, "=") {
			continue
		}
		for _, p := range checkExpr(inv, sel) {
			t.Errorf("%s: %s: %s", operationsDoc, sel, p)
		}
	}
}

func rowLines(rows []metricRow) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = r.Line
	}
	return out
}

// suggestRow renders a metrics reference row from what the code states.
func suggestRow(def *metricDef) string {
	typ := def.Type
	if typ == "" {
		typ = "<counter|gauge|histogram>"
	}
	labels := "<labels>"
	if def.LabelsKnown {
		labels = labelCell(def.Labels)
	}
	help := strings.ReplaceAll(def.Help, "|", "/")
	if help == "" {
		help = "<meaning>"
	}
	return fmt.Sprintf("| `%s` | %s | %s | %s | %s |", def.Name, typ, labels, codeCell(def.Packages), help)
}

func labelCell(labels []string) string {
	if len(labels) == 0 {
		return "—"
	}
	return codeCell(labels)
}

func codeCell(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = "`" + s + "`"
	}
	return strings.Join(quoted, ", ")
}
