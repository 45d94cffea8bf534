package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, in io.Reader, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("testreport", flag.ContinueOnError)
	fs.SetOutput(errOut)
	slowest := fs.Int("slowest", 10, "how many of the slowest tests and packages to list (0: none)")
	runs := fs.Bool("runs", false, "list every test's failures out of its runs (for -count N)")
	verbose := fs.Bool("v", false, "print every test's output, not only a failed test's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *slowest < 0 || fs.NArg() > 0 {
		fmt.Fprintln(errOut, "usage: go test -json ... | testreport [-slowest N] [-runs]")
		return 2
	}
	r := newReport()
	r.verbose = *verbose
	if err := r.read(in, out); err != nil {
		fmt.Fprintf(errOut, "testreport: %v\n", err)
		return 2
	}
	r.print(out, *slowest, *runs)
	if r.failed() {
		return 1
	}
	return 0
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Elapsed    float64
	Output     string
}

// key names a test of a package.
type key struct{ pkg, test string }

// tally is what a test or a package did over every run.
type tally struct {
	runs, failures, skips int
	elapsed               time.Duration // longest single run
}

type report struct {
	started     time.Time // when the report began reading: go test's build time counts
	verbose     bool
	held        map[key][]string // output of a running top-level test, printed if it fails
	first, last time.Time
	tests       map[key]*tally
	pkgs        map[string]*tally
	buildFailed []string
}

func newReport() *report {
	return &report{started: time.Now(), held: map[key][]string{}, tests: map[key]*tally{}, pkgs: map[string]*tally{}}
}

// read consumes the events, echoing their output to out as it comes.
func (r *report) read(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			fmt.Fprintf(out, "%s\n", b) // not an event (a message of go itself): pass it on
			continue
		}
		var e event
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("line %d is not a test2json event: %w", line, err)
		}
		r.add(e, out)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the events: %w", err)
	}
	return nil
}

func (r *report) add(e event, out io.Writer) {
	if !e.Time.IsZero() {
		if r.first.IsZero() || e.Time.Before(r.first) {
			r.first = e.Time
		}
		if e.Time.After(r.last) {
			r.last = e.Time
		}
	}
	r.echo(e, out)
	switch e.Action {
	case "build-fail":
		r.buildFailed = append(r.buildFailed, e.ImportPath)
		return
	case "pass", "fail", "skip":
	default:
		return
	}
	var t *tally
	if e.Test == "" {
		t = r.pkgs[e.Package]
		if t == nil {
			t = &tally{}
			r.pkgs[e.Package] = t
		}
	} else {
		k := key{e.Package, e.Test}
		t = r.tests[k]
		if t == nil {
			t = &tally{}
			r.tests[k] = t
		}
	}
	switch e.Action {
	case "skip":
		t.skips++
		return
	case "fail":
		t.failures++
	}
	t.runs++
	t.elapsed = max(t.elapsed, time.Duration(e.Elapsed*float64(time.Second)))
}

// echo prints what plain `go test` prints: package lines and build output as they
// come, a test's output only once it failed (all of it with -v).
func (r *report) echo(e event, out io.Writer) {
	if r.verbose || e.Test == "" {
		if r.verbose || e.Output != "PASS\n" { // plain go test prints no PASS per package
			io.WriteString(out, e.Output)
		}
		return
	}
	top, _, _ := strings.Cut(e.Test, "/")
	k := key{e.Package, top}
	if e.Output != "" {
		r.held[k] = append(r.held[k], e.Output)
	}
	if e.Test != top {
		return
	}
	switch e.Action {
	case "fail":
		io.WriteString(out, strings.Join(r.held[k], ""))
		delete(r.held, k)
	case "pass", "skip":
		delete(r.held, k)
	}
}

func (r *report) failed() bool {
	if len(r.buildFailed) > 0 {
		return true
	}
	for _, t := range r.pkgs {
		if t.failures > 0 {
			return true
		}
	}
	for _, t := range r.tests {
		if t.failures > 0 {
			return true
		}
	}
	return false
}

func (r *report) print(out io.Writer, slowest int, runs bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Test report\n\n")
	tests, fails := 0, 0
	for k, t := range r.tests {
		if !strings.Contains(k.test, "/") {
			tests++
		}
		fails += t.failures
	}
	fmt.Fprintf(&b, "%d packages, %d top-level tests, %d failed runs of tests, total time %s (tests running %s)\n",
		len(r.pkgs), tests, fails, time.Since(r.started).Round(time.Second), r.last.Sub(r.first).Round(time.Second))
	for _, p := range r.buildFailed {
		fmt.Fprintf(&b, "build failed: %s\n", p)
	}
	if slowest > 0 {
		type row struct {
			name string
			d    time.Duration
		}
		var pkgs, tops []row
		for p, t := range r.pkgs {
			pkgs = append(pkgs, row{p, t.elapsed})
		}
		for k, t := range r.tests {
			if !strings.Contains(k.test, "/") {
				tops = append(tops, row{k.pkg + " " + k.test, t.elapsed})
			}
		}
		order := func(a, b row) int {
			if a.d != b.d {
				return cmp.Compare(b.d, a.d)
			}
			return strings.Compare(a.name, b.name)
		}
		slices.SortFunc(pkgs, order)
		slices.SortFunc(tops, order)
		for _, part := range []struct {
			title string
			rows  []row
		}{{"slowest packages", pkgs}, {"slowest tests", tops}} {
			fmt.Fprintf(&b, "\n| %s | seconds |\n| --- | ---: |\n", part.title)
			for _, x := range part.rows[:min(slowest, len(part.rows))] {
				fmt.Fprintf(&b, "| %s | %.1f |\n", x.name, x.d.Seconds())
			}
		}
	}
	if runs {
		r.printRuns(&b)
	}
	// The closing line, in the plain form CI reads: every run of a test or subtest.
	passed, skipped := 0, 0
	for _, t := range r.tests {
		passed += t.runs - t.failures
		skipped += t.skips
	}
	fmt.Fprintf(&b, "\ntests: %d passed, %d failed, %d skipped\n", passed, fails, skipped)
	io.WriteString(out, b.String())
}

// printRuns lists per package its tests' runs and failures, then every test that
// failed at least once.
func (r *report) printRuns(b *strings.Builder) {
	type pkgRow struct {
		tests, runs, failures int
	}
	per := map[string]*pkgRow{}
	var flaky []key
	for k, t := range r.tests {
		p := per[k.pkg]
		if p == nil {
			p = &pkgRow{}
			per[k.pkg] = p
		}
		if !strings.Contains(k.test, "/") {
			p.tests++
			p.runs += t.runs
			p.failures += t.failures
		}
		if t.failures > 0 {
			flaky = append(flaky, k)
		}
	}
	names := make([]string, 0, len(r.pkgs))
	for p := range r.pkgs {
		names = append(names, p)
	}
	slices.Sort(names)
	fmt.Fprintf(b, "\n| package | tests | test runs | failed runs |\n| --- | ---: | ---: | ---: |\n")
	for _, n := range names {
		p := per[n]
		if p == nil {
			p = &pkgRow{}
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d |\n", n, p.tests, p.runs, p.failures)
	}
	slices.SortFunc(flaky, func(a, c key) int {
		if x := strings.Compare(a.pkg, c.pkg); x != 0 {
			return x
		}
		return strings.Compare(a.test, c.test)
	})
	if len(flaky) == 0 {
		fmt.Fprintf(b, "\nno test failed in any run\n")
		return
	}
	fmt.Fprintf(b, "\n| failed test | failures / runs |\n| --- | ---: |\n")
	for _, k := range flaky {
		t := r.tests[k]
		fmt.Fprintf(b, "| %s %s | %d / %d |\n", k.pkg, k.test, t.failures, t.runs)
	}
}
