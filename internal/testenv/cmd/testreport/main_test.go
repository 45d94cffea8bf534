package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const (
	pkgA = "example.com/a"
	pkgB = "example.com/b"
)

// ev builds one test2json line; at is seconds after a fixed start.
func ev(at int, action, pkg, test string, elapsed float64, output string) string {
	e := map[string]any{"Time": fmt.Sprintf("2026-12-04T05:00:%02dZ", at), "Action": action, "Package": pkg}
	if test != "" {
		e["Test"] = test
	}
	if elapsed > 0 {
		e["Elapsed"] = elapsed
	}
	if output != "" {
		e["Output"] = output
	}
	b, _ := json.Marshal(e)
	return string(b) + "\n"
}

func TestReport(t *testing.T) {
	passing := ev(0, "run", pkgA, "TestOK", 0, "") +
		ev(0, "output", pkgA, "TestOK", 0, "=== RUN   TestOK\n") +
		ev(1, "output", pkgA, "TestOK", 0, "secret-ok-noise\n") +
		ev(1, "pass", pkgA, "TestOK", 1.5, "") +
		ev(1, "output", pkgA, "", 0, "PASS\n") +
		ev(1, "output", pkgA, "", 0, "ok  \texample.com/a\t1.5s\n") +
		ev(1, "pass", pkgA, "", 1.5, "")
	failing := ev(2, "run", pkgB, "TestBad", 0, "") +
		ev(2, "run", pkgB, "TestBad/sub", 0, "") +
		ev(3, "output", pkgB, "TestBad/sub", 0, "    bad_test.go:9: want 2, got 3\n") +
		ev(3, "fail", pkgB, "TestBad/sub", 0, "") +
		ev(3, "fail", pkgB, "TestBad", 0, "") +
		ev(4, "run", pkgB, "TestSkip", 0, "") +
		ev(4, "skip", pkgB, "TestSkip", 0, "") +
		ev(5, "output", pkgB, "", 0, "FAIL\texample.com/b\t3.5s\n") +
		ev(5, "fail", pkgB, "", 3.5, "")
	tests := []struct {
		name    string
		args    []string
		in      string
		code    int
		want    []string
		wantNot []string
	}{
		{name: "all pass", in: passing, code: 0,
			want:    []string{"ok  \texample.com/a\t1.5s", "| example.com/a TestOK | 1.5 |", "(tests running 1s)", "tests: 1 passed, 0 failed, 0 skipped"},
			wantNot: []string{"secret-ok-noise", "PASS\n"}},
		{name: "verbose shows passing output", args: []string{"-v"}, in: passing, code: 0, want: []string{"secret-ok-noise"}},
		{name: "a failed test's output is shown and the exit is 1", in: passing + failing, code: 1,
			want: []string{"bad_test.go:9: want 2, got 3", "FAIL\texample.com/b", "tests: 1 passed, 2 failed, 1 skipped"}},
		{name: "runs lists failures out of runs", args: []string{"-runs"}, in: passing + passing + failing, code: 1,
			want: []string{"| example.com/a | 1 | 2 | 0 |", "| example.com/b | 2 | 1 | 1 |", "| example.com/b TestBad/sub | 1 / 1 |"}},
		{name: "runs with no failure says so", args: []string{"-runs"}, in: passing + passing, code: 0,
			want: []string{"| example.com/a | 1 | 2 | 0 |", "no test failed in any run"}},
		{name: "a build failure fails", in: `{"ImportPath":"example.com/c","Action":"build-output","Output":"c.go:1: syntax error\n"}` + "\n" +
			`{"ImportPath":"example.com/c","Action":"build-fail"}` + "\n", code: 1,
			want: []string{"c.go:1: syntax error", "build failed: example.com/c"}},
		{name: "lines of go itself pass through", in: "go: downloading example.com/x v1.0.0\n" + passing, code: 0,
			want: []string{"go: downloading example.com/x v1.0.0"}},
		{name: "slowest 0 lists nothing", args: []string{"-slowest", "0"}, in: passing, code: 0, wantNot: []string{"slowest tests"}},
		{name: "a broken event is an input error", in: "{not json\n", code: 2},
		{name: "bad usage", args: []string{"extra"}, in: passing, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, strings.NewReader(tt.in), &out, &errOut)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q; out:\n%s", code, tt.code, errOut.String(), out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}
