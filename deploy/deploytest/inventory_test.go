package deploytest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// promPath is the import path whose files define metrics.
const promPath = "github.com/prometheus/client_golang/prometheus"

// metricPrefix starts every larkline metric name.
const metricPrefix = "larkline_"

// metricNameRE is a complete larkline metric name.
var metricNameRE = regexp.MustCompile(`^larkline_[a-z0-9]+(_[a-z0-9]+)*$`)

// notMetrics are complete larkline_-shaped string literals in files that do not
// import prometheus and are not metrics, each with the reason. Every entry must still
// occur in the sources, so the list cannot rot.
var notMetrics = map[string]string{
	"larkline_bindings": "the Postgres NOTIFY channel of binding changes (internal/store)",
}

// skippedDirs are never scanned: not Go sources of the module, or this package (which
// names metrics in its own checks).
var skippedDirs = map[string]bool{".git": true, ".cache": true, "vendor": true, "testdata": true,
	"node_modules": true, "bin": true, "deploy/deploytest": true}

// metricDef is one metric defined in the Go sources.
type metricDef struct {
	Name string
	// Type is counter, gauge, histogram or summary; "" when the code does not say so
	// statically (a NewDesc, or a helper whose result type is not a prometheus type).
	Type string
	// Labels are the variable label names, sorted, when LabelsKnown.
	Labels      []string
	LabelsKnown bool
	Help        string
	// Packages are the module-relative directories defining it, sorted.
	Packages []string
	// Where lists file:line of each definition.
	Where []string
}

// inventory is what scanning the sources found.
type inventory struct {
	Metrics map[string]*metricDef
	// Problems are definitions the scanner cannot read statically, or larkline_ names
	// in the wrong place; each one fails the test that asks for the inventory.
	Problems []string
	// NotMetricsSeen are the notMetrics entries found.
	NotMetricsSeen map[string]bool
}

var (
	repoOnce sync.Once
	repoDir  string
	repoErr  error
)

// repoRoot is the module root: the nearest directory above the test's working
// directory holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	repoOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			repoErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				repoDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				repoErr = fmt.Errorf("no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	if repoErr != nil {
		t.Fatalf("finding the module root: %v", repoErr)
	}
	return repoDir
}

var (
	invOnce sync.Once
	inv     *inventory
	invErr  error
)

// sourceInventory scans the module's Go sources once per test binary and fails the
// test on any problem the scan reported.
func sourceInventory(t testing.TB) *inventory {
	t.Helper()
	root := repoRoot(t)
	invOnce.Do(func() { inv, invErr = scanModule(root) })
	if invErr != nil {
		t.Fatalf("scanning Go sources: %v", invErr)
	}
	for _, p := range inv.Problems {
		t.Errorf("metric definitions: %s", p)
	}
	if len(inv.Problems) > 0 {
		t.FailNow()
	}
	return inv
}

// scanModule parses every non-test Go file under root.
func scanModule(root string) (*inventory, error) {
	s := newScanner()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (skippedDirs[rel] || skippedDirs[d.Name()] || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return s.file(rel, src)
	})
	if err != nil {
		return nil, err
	}
	s.checkNotMetrics()
	return s.finish(), nil
}

// scanner collects metric definitions file by file.
type scanner struct {
	inv  *inventory
	fset *token.FileSet
}

func newScanner() *scanner {
	return &scanner{
		inv:  &inventory{Metrics: map[string]*metricDef{}, NotMetricsSeen: map[string]bool{}},
		fset: token.NewFileSet(),
	}
}

func (s *scanner) problem(pos token.Pos, format string, args ...any) {
	s.inv.Problems = append(s.inv.Problems, s.fset.Position(pos).String()+": "+fmt.Sprintf(format, args...))
}

// checkNotMetrics reports notMetrics entries the sources no longer hold.
func (s *scanner) checkNotMetrics() {
	for lit := range notMetrics {
		if !s.inv.NotMetricsSeen[lit] {
			s.inv.Problems = append(s.inv.Problems, fmt.Sprintf("notMetrics lists %q, which no longer occurs in the sources: remove it", lit))
		}
	}
}

// finish sorts what was found.
func (s *scanner) finish() *inventory {
	slices.Sort(s.inv.Problems)
	return s.inv
}

// fileScan is the state of scanning one file.
type fileScan struct {
	*scanner
	file     *ast.File
	rel      string
	pkg      string
	prom     string // local name of the prometheus import; "" when not imported
	consumed map[token.Pos]bool
}

// file scans one Go file; rel is its module-relative slash path.
func (s *scanner) file(rel string, src []byte) error {
	f, err := parser.ParseFile(s.fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", rel, err)
	}
	fs := &fileScan{scanner: s, file: f, rel: rel, pkg: pathDir(rel), consumed: map[token.Pos]bool{}}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p != promPath {
			continue
		}
		fs.prom = "prometheus"
		if imp.Name != nil {
			fs.prom = imp.Name.Name
		}
	}
	// Pass 1: Opts literals (they may build names from Namespace and Subsystem).
	fs.walk(func(n ast.Node, stack []ast.Node) {
		if cl, ok := n.(*ast.CompositeLit); ok {
			fs.optsLiteral(cl, stack)
		}
	})
	// Pass 2: every other larkline_ string literal.
	fs.walk(func(n ast.Node, stack []ast.Node) {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			fs.stringLiteral(lit, stack)
		}
	})
	return nil
}

func pathDir(rel string) string {
	if i := strings.LastIndex(rel, "/"); i >= 0 {
		return rel[:i]
	}
	return "."
}

// walk visits every node with the stack of its ancestors (the node itself last).
func (fs *fileScan) walk(visit func(n ast.Node, stack []ast.Node)) {
	var stack []ast.Node
	ast.Inspect(fs.file, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		visit(n, stack)
		return true
	})
}

// optsTypes maps prometheus option struct names to metric types.
var optsTypes = map[string]string{
	"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram", "SummaryOpts": "summary",
}

// constructors maps prometheus constructor names to (type, whether labels are the
// second argument).
var constructors = map[string]struct {
	typ string
	vec bool
}{
	"NewCounter": {"counter", false}, "NewCounterVec": {"counter", true}, "NewCounterFunc": {"counter", false},
	"NewGauge": {"gauge", false}, "NewGaugeVec": {"gauge", true}, "NewGaugeFunc": {"gauge", false},
	"NewHistogram": {"histogram", false}, "NewHistogramVec": {"histogram", true},
	"NewSummary": {"summary", false}, "NewSummaryVec": {"summary", true},
}

// resultTypes maps prometheus metric interface and struct names to metric types,
// for helpers that return them.
var resultTypes = map[string]struct {
	typ string
	vec bool
}{
	"Counter": {"counter", false}, "CounterVec": {"counter", true}, "CounterFunc": {"counter", false},
	"Gauge": {"gauge", false}, "GaugeVec": {"gauge", true}, "GaugeFunc": {"gauge", false},
	"Histogram": {"histogram", false}, "HistogramVec": {"histogram", true},
	"Summary": {"summary", false}, "SummaryVec": {"summary", true},
}

// promSel reports the selected name when e is <prom>.Name.
func (fs *fileScan) promSel(e ast.Expr) (string, bool) {
	if fs.prom == "" {
		return "", false
	}
	if st, ok := e.(*ast.StarExpr); ok {
		e = st.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok || x.Name != fs.prom {
		return "", false
	}
	return sel.Sel.Name, true
}

// optsLiteral reads a prometheus.*Opts literal whose name is statically known.
func (fs *fileScan) optsLiteral(cl *ast.CompositeLit, stack []ast.Node) {
	name, ok := fs.promSel(cl.Type)
	if !ok {
		return
	}
	typ, ok := optsTypes[name]
	if !ok {
		return
	}
	fields := map[string]ast.Expr{}
	for _, e := range cl.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			fs.problem(cl.Pos(), "unkeyed %s.%s literal: key its fields so the metric name can be read", fs.prom, name)
			return
		}
		if k, ok := kv.Key.(*ast.Ident); ok {
			fields[k.Name] = kv.Value
		}
	}
	parts := []string{}
	for _, f := range []string{"Namespace", "Subsystem", "Name"} {
		e, ok := fields[f]
		if !ok {
			continue
		}
		v, ok := constString(e)
		if !ok {
			if f == "Name" && fields["Namespace"] == nil && fields["Subsystem"] == nil {
				return // a helper's parameter: the literal at the call site is the definition
			}
			fs.problem(e.Pos(), "%s of a %s.%s is not a string constant: with Namespace or Subsystem every part must be written out", f, fs.prom, name)
			return
		}
		for _, lit := range literalsOf(e) {
			fs.consumed[lit.Pos()] = true
		}
		if v != "" {
			parts = append(parts, v)
		}
	}
	if len(parts) == 0 {
		return
	}
	full := strings.Join(parts, "_")
	if !metricNameRE.MatchString(full) {
		fs.problem(cl.Pos(), "metric %q does not match %s: every larkline metric starts with %s", full, metricNameRE, metricPrefix)
		return
	}
	help, _ := constString(fields["Help"])
	def := &metricDef{Name: full, Type: typ, Help: help}
	def.Labels, def.LabelsKnown = fs.constructorLabels(cl, stack, typ)
	fs.add(def, cl.Pos())
}

// constructorLabels finds the labels of the constructor call an Opts literal is the
// first argument of.
func (fs *fileScan) constructorLabels(cl *ast.CompositeLit, stack []ast.Node, typ string) ([]string, bool) {
	if len(stack) < 2 {
		return nil, false
	}
	call, ok := stack[len(stack)-2].(*ast.CallExpr)
	if !ok || len(call.Args) == 0 || call.Args[0] != ast.Expr(cl) {
		return nil, false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr) // prometheus.NewX or promauto.With(r).NewX
	if !ok {
		return nil, false
	}
	c, ok := constructors[sel.Sel.Name]
	if !ok || c.typ != typ {
		return nil, false
	}
	if !c.vec {
		return []string{}, true
	}
	if len(call.Args) < 2 {
		return nil, false
	}
	return stringList(call.Args[1])
}

// stringLiteral handles a larkline_ string literal not read as part of an Opts
// literal.
func (fs *fileScan) stringLiteral(lit *ast.BasicLit, stack []ast.Node) {
	v, err := strconv.Unquote(lit.Value)
	if err != nil || !strings.HasPrefix(v, metricPrefix) || fs.consumed[lit.Pos()] {
		return
	}
	complete := metricNameRE.MatchString(v)
	if fs.prom == "" {
		if !complete {
			return // a prefix of something else (a database name, a path)
		}
		if _, ok := notMetrics[v]; ok {
			fs.inv.NotMetricsSeen[v] = true
			return
		}
		fs.problem(lit.Pos(), "%q looks like a metric name but its file does not import %s: define metrics next to their collectors, or add it to notMetrics with the reason", v, promPath)
		return
	}
	if !complete {
		fs.problem(lit.Pos(), "%q is not a complete metric name: write every metric name as one string literal so it can be found and documented", v)
		return
	}
	def := &metricDef{Name: v}
	if len(stack) >= 2 {
		if call, ok := stack[len(stack)-2].(*ast.CallExpr); ok {
			fs.callSite(def, call, lit, stack[:len(stack)-2])
		}
	}
	fs.add(def, lit.Pos())
}

// callSite reads type, help and labels of a metric whose name is an argument of call;
// outer are the call's ancestors.
func (fs *fileScan) callSite(def *metricDef, call *ast.CallExpr, lit *ast.BasicLit, outer []ast.Node) {
	idx := slices.Index(call.Args, ast.Expr(lit))
	if idx < 0 {
		return
	}
	if name, ok := fs.promSel(call.Fun); ok {
		switch name {
		case "NewDesc": // NewDesc(name, help, variableLabels, constLabels)
			if idx != 0 || len(call.Args) < 3 {
				return
			}
			def.Help, _ = constString(call.Args[1])
			def.Labels, def.LabelsKnown = stringList(call.Args[2])
			if name := assignedName(call, outer); name != "" {
				def.Type = fs.constMetricType(name)
			}
		case "BuildFQName":
			fs.problem(lit.Pos(), "BuildFQName with %q: write the metric name out as one literal", def.Name)
		}
		return
	}
	id, ok := call.Fun.(*ast.Ident)
	if !ok {
		return
	}
	ft := fs.helperType(id)
	if ft == nil || ft.Results == nil || len(ft.Results.List) == 0 {
		return
	}
	rname, ok := fs.promSel(ft.Results.List[0].Type)
	if !ok {
		return
	}
	rt, ok := resultTypes[rname]
	if !ok {
		return
	}
	def.Type = rt.typ
	// Lay the parameters out by position.
	var params []ast.Expr
	for _, f := range ft.Params.List {
		n := max(len(f.Names), 1)
		for range n {
			params = append(params, f.Type)
		}
	}
	if idx+1 < len(call.Args) && idx+1 < len(params) && isIdent(params[idx+1], "string") {
		def.Help, _ = constString(call.Args[idx+1])
	}
	if !rt.vec {
		def.Labels, def.LabelsKnown = []string{}, true
		return
	}
	for p, typ := range params {
		switch t := typ.(type) {
		case *ast.Ellipsis:
			if !isIdent(t.Elt, "string") || call.Ellipsis.IsValid() {
				return
			}
			labels := []string{}
			for _, a := range call.Args[min(p, len(call.Args)):] {
				s, ok := constString(a)
				if !ok {
					return
				}
				labels = append(labels, s)
			}
			slices.Sort(labels)
			def.Labels, def.LabelsKnown = labels, true
			return
		case *ast.ArrayType:
			if t.Len == nil && isIdent(t.Elt, "string") && p < len(call.Args) {
				def.Labels, def.LabelsKnown = stringList(call.Args[p])
				return
			}
		}
	}
}

// assignedName is the variable or field a call's result is assigned to: x in
// "x := call", "var x = call", "x = call", "s.x = call" or "T{x: call}".
func assignedName(call *ast.CallExpr, outer []ast.Node) string {
	if len(outer) == 0 {
		return ""
	}
	switch p := outer[len(outer)-1].(type) {
	case *ast.ValueSpec:
		for i, v := range p.Values {
			if v == ast.Expr(call) && i < len(p.Names) {
				return p.Names[i].Name
			}
		}
	case *ast.AssignStmt:
		for i, v := range p.Rhs {
			if v == ast.Expr(call) && i < len(p.Lhs) {
				return exprName(p.Lhs[i])
			}
		}
	case *ast.KeyValueExpr:
		if p.Value == ast.Expr(call) {
			return exprName(p.Key)
		}
	}
	return ""
}

// exprName is the name an identifier or a selector ends in.
func exprName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

// constMetricKinds maps constant-metric constructors to the metric type they make,
// "" meaning "the value type argument decides".
var constMetricKinds = map[string]string{
	"MustNewConstMetric": "", "NewConstMetric": "",
	"MustNewConstMetricWithCreatedTimestamp": "", "NewConstMetricWithCreatedTimestamp": "",
	"MustNewConstHistogram": "histogram", "NewConstHistogram": "histogram",
	"MustNewConstHistogramWithCreatedTimestamp": "histogram", "NewConstHistogramWithCreatedTimestamp": "histogram",
	"MustNewConstSummary": "summary", "NewConstSummary": "summary",
	"MustNewConstSummaryWithCreatedTimestamp": "summary", "NewConstSummaryWithCreatedTimestamp": "summary",
}

// valueTypes maps prometheus.ValueType constants to metric types.
var valueTypes = map[string]string{"GaugeValue": "gauge", "CounterValue": "counter"}

// constMetricType is the type of the constant metrics made in this file from the
// descriptor held by name; "" when none is made, or they disagree.
func (fs *fileScan) constMetricType(name string) string {
	typ, seen := "", false
	ast.Inspect(fs.file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		fn, ok := fs.promSel(call.Fun)
		if !ok {
			return true
		}
		kind, ok := constMetricKinds[fn]
		if !ok || exprName(call.Args[0]) != name {
			return true
		}
		if kind == "" {
			vt, _ := fs.promSel(call.Args[1])
			kind = valueTypes[vt]
		}
		if seen && kind != typ {
			kind = ""
		}
		typ, seen = kind, true
		return true
	})
	return typ
}

// helperType returns the signature of the function a call's identifier names, when it
// is declared in the same file: a func declaration, or a variable assigned a func
// literal (the first such declaration of the name).
func (fs *fileScan) helperType(id *ast.Ident) *ast.FuncType {
	var found *ast.FuncType
	ast.Inspect(fs.file, func(n ast.Node) bool {
		if found != nil {
			return false
		}
		switch d := n.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == id.Name {
				found = d.Type
			}
		case *ast.AssignStmt:
			for i, l := range d.Lhs {
				if li, ok := l.(*ast.Ident); ok && li.Name == id.Name && i < len(d.Rhs) {
					if fl, ok := d.Rhs[i].(*ast.FuncLit); ok {
						found = fl.Type
					}
				}
			}
		case *ast.ValueSpec:
			for i, n := range d.Names {
				if n.Name == id.Name && i < len(d.Values) {
					if fl, ok := d.Values[i].(*ast.FuncLit); ok {
						found = fl.Type
					}
				}
			}
		}
		return found == nil
	})
	return found
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// add merges a definition into the inventory.
func (fs *fileScan) add(def *metricDef, pos token.Pos) {
	where := fs.fset.Position(pos)
	def.Packages = []string{fs.pkg}
	def.Where = []string{fmt.Sprintf("%s:%d", fs.rel, where.Line)}
	if def.LabelsKnown {
		slices.Sort(def.Labels)
	}
	old, ok := fs.inv.Metrics[def.Name]
	if !ok {
		fs.inv.Metrics[def.Name] = def
		return
	}
	if old.Type != "" && def.Type != "" && old.Type != def.Type {
		fs.problem(pos, "metric %s defined as %s here and as %s at %s", def.Name, def.Type, old.Type, strings.Join(old.Where, ", "))
	}
	if old.LabelsKnown && def.LabelsKnown && !slices.Equal(old.Labels, def.Labels) {
		fs.problem(pos, "metric %s has labels %v here and %v at %s", def.Name, def.Labels, old.Labels, strings.Join(old.Where, ", "))
	}
	if old.Type == "" {
		old.Type = def.Type
	}
	if !old.LabelsKnown && def.LabelsKnown {
		old.Labels, old.LabelsKnown = def.Labels, true
	}
	if old.Help == "" {
		old.Help = def.Help
	}
	if !slices.Contains(old.Packages, fs.pkg) {
		old.Packages = append(old.Packages, fs.pkg)
		slices.Sort(old.Packages)
	}
	old.Where = append(old.Where, def.Where...)
}

// constString evaluates a string literal or a + concatenation of them.
func constString(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok := constString(x.X)
		if !ok {
			return "", false
		}
		b, ok := constString(x.Y)
		return a + b, ok
	case *ast.ParenExpr:
		return constString(x.X)
	}
	return "", false
}

// literalsOf lists the string literals a constant string expression is made of.
func literalsOf(e ast.Expr) []*ast.BasicLit {
	var out []*ast.BasicLit
	ast.Inspect(e, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok {
			out = append(out, l)
		}
		return true
	})
	return out
}

// stringList evaluates []string{"a", "b"} (or nil) to a sorted list.
func stringList(e ast.Expr) ([]string, bool) {
	if isIdent(e, "nil") {
		return []string{}, true
	}
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	at, ok := cl.Type.(*ast.ArrayType)
	if !ok || at.Len != nil || !isIdent(at.Elt, "string") {
		return nil, false
	}
	out := make([]string, 0, len(cl.Elts))
	for _, el := range cl.Elts {
		s, ok := constString(el)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, true
}

// sortedNames lists the inventory's metric names.
func (inv *inventory) sortedNames() []string {
	names := make([]string, 0, len(inv.Metrics))
	for n := range inv.Metrics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// histogramSuffixes are the series a histogram or summary exposes besides its name.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// resolve maps a larkline_ series name to its metric: the metric itself, or the
// histogram (or summary, or metric of unknown type) whose _bucket, _sum or _count
// series it is. ok is false for a name the code does not define.
func (inv *inventory) resolve(series string) (*metricDef, bool) {
	if d, ok := inv.Metrics[series]; ok {
		return d, true
	}
	for _, suf := range histogramSuffixes {
		base, found := strings.CutSuffix(series, suf)
		if !found {
			continue
		}
		d, ok := inv.Metrics[base]
		if !ok {
			continue
		}
		switch d.Type {
		case "histogram", "":
			return d, true
		case "summary":
			if suf != "_bucket" {
				return d, true
			}
		}
	}
	return nil, false
}

// seriesRE finds larkline_ series names in text (not preceded by a name character,
// so LARKLINE_ environment variables and larkline-windows-v1 groups do not match).
var seriesRE = regexp.MustCompile(`(^|[^A-Za-z0-9_])(larkline_[a-z0-9_]*[a-z0-9])`)

// seriesIn lists the distinct larkline_ series names mentioned in text, in order of
// first mention.
func seriesIn(text string) []string {
	var out []string
	for _, m := range seriesRE.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[2]) {
			out = append(out, m[2])
		}
	}
	return out
}
