package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/schemas/ids"
)

// The docs/CLI consistency tests (issue #32): what a user reads first — the README,
// docs/, deploy/ and the command's own comments — names commands, routes, panels and
// label values that exist.

// repoRoot is the module root, relative to this package.
const repoRoot = "../.."

// docFiles are the files whose text is checked: every markdown page, every YAML and
// JSON file under deploy/, the Makefile and this command's Go sources.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.md", "docs/*.md", "Makefile", "deploy/*.yaml", "deploy/*/*.yaml", "deploy/*/*.yml", "deploy/*/*.json", "deploy/Dockerfile", "cmd/larkline/*.go"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("found only %d files to check: %v", len(files), files)
	}
	return files
}

func readText(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mentionRE is a command in a code span: `larkline <command> [<subcommand>|…] …`,
// possibly across a line break (and a Go comment's //).
var mentionRE = regexp.MustCompile("`larkline\\s+([^`]*)`")

// TestDocsNameRealCommands: every `larkline X Y` in a code span names a command, and
// for a command with subcommands, one or more (a|b) of them.
func TestDocsNameRealCommands(t *testing.T) {
	for _, f := range docFiles(t) {
		text := readText(t, f)
		for _, m := range mentionRE.FindAllStringSubmatchIndex(text, -1) {
			span := strings.ReplaceAll(text[m[2]:m[3]], `\|`, "|") // | escaped in a table cell
			line := 1 + strings.Count(text[:m[0]], "\n")
			var words []string
			for _, w := range strings.Fields(span) {
				if w != "//" && w != "#" {
					words = append(words, w)
				}
			}
			// `larkline <command> -h` is a pattern; `larkline run: …` quotes an error line
			if len(words) == 0 || strings.HasPrefix(words[0], "<") || strings.HasPrefix(words[0], "-") || strings.HasSuffix(words[0], ":") {
				continue
			}
			cmd, ok := commands[words[0]]
			if !ok {
				t.Errorf("%s:%d: `larkline %s`: no command %q", f, line, span, words[0])
				continue
			}
			if cmd.subs == nil {
				continue
			}
			if len(words) < 2 || strings.HasPrefix(words[1], "-") {
				t.Errorf("%s:%d: `larkline %s`: %s needs a subcommand (%s)", f, line, span, words[0], strings.Join(cmd.subs, ", "))
				continue
			}
			for _, sub := range strings.Split(words[1], "|") {
				if !slices.Contains(cmd.subs, sub) {
					t.Errorf("%s:%d: `larkline %s`: %s has no subcommand %q (%s)", f, line, span, words[0], sub, strings.Join(cmd.subs, ", "))
				}
			}
		}
	}
}

// TestDocsClaims checks statements about the code that a regular expression finds.
func TestDocsClaims(t *testing.T) {
	// Admin routes the admin API serves: the path segments of its route patterns.
	httpSrc := readText(t, filepath.Join(repoRoot, "connectors/workspaces/http.go"))
	segments := map[string]bool{}
	for _, p := range regexp.MustCompile(`/api/v1/admin/[a-z_{}/]+`).FindAllString(httpSrc, -1) {
		for _, s := range strings.Split(p, "/") {
			segments[s] = true
		}
	}
	adminRE := regexp.MustCompile(`(?s)admin (?:endpoints|routes) such as ([a-z]+)(?:,? and ([a-z]+))?`)
	// The demo builds its configuration in code; no file may say it reads the demo file.
	demoSrc := readText(t, "demo.go")
	demoClaimRE := regexp.MustCompile("(?s)(?:the demo|`larkline demo`) (?:uses|reads)\\s+\\[?`?deploy/larkline\\.demo\\.yaml|for `larkline demo` on one machine")
	for _, f := range docFiles(t) {
		text := readText(t, f)
		for _, m := range adminRE.FindAllStringSubmatch(text, -1) {
			for _, name := range m[1:] {
				if name != "" && !segments[name] {
					t.Errorf("%s: %q: the admin API has no route %q (connectors/workspaces/http.go)", f, m[0], name)
				}
			}
		}
		if !strings.Contains(demoSrc, "larkline.demo.yaml") {
			for _, m := range demoClaimRE.FindAllString(text, -1) {
				t.Errorf("%s: %q: larkline demo does not read deploy/larkline.demo.yaml (demoConfig builds its configuration)", f, m)
			}
		}
	}
}

// TestDocsLinksStayInRepo: a relative link in a markdown page resolves to a file of
// this repository, not to a path beside it that only the authors' machines have.
func TestDocsLinksStayInRepo(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	linkRE := regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`)
	for _, f := range docFiles(t) {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		text := readText(t, f)
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(f), target))
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %q points outside the repository", f, target)
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s: link %q: %v", f, target, err)
			}
		}
	}
}

// TestOperationsNamesDashboardPanels: a line of docs/operations.md that speaks of a
// dashboard panel names it in quotes, and every quoted name on such a line (or
// after "the dashboard's") is a panel or row title of deploy/grafana.
func TestOperationsNamesDashboardPanels(t *testing.T) {
	var dash struct {
		Panels []struct {
			Title  string `json:"title"`
			Panels []struct {
				Title string `json:"title"`
			} `json:"panels"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readText(t, filepath.Join(repoRoot, "deploy/grafana/larkline-dashboard.json"))), &dash); err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	for _, p := range dash.Panels {
		titles[p.Title] = true
		for _, q := range p.Panels {
			titles[q.Title] = true
		}
	}
	quotedRE := regexp.MustCompile(`"([A-Z][^"]*)"`)
	panelRE := regexp.MustCompile(`\bpanels?\b`)
	dashRE := regexp.MustCompile(`dashboard's "([^"]+)"`)
	text := readText(t, filepath.Join(repoRoot, "docs/operations.md"))
	for i, line := range strings.Split(text, "\n") {
		var names []string
		if panelRE.MatchString(line) {
			q := quotedRE.FindAllStringSubmatch(line, -1)
			if len(q) == 0 {
				t.Errorf("docs/operations.md:%d: speaks of a panel without naming it: %q", i+1, line)
			}
			for _, m := range q {
				names = append(names, m[1])
			}
		}
		for _, m := range dashRE.FindAllStringSubmatch(line, -1) {
			names = append(names, m[1])
		}
		for _, n := range names {
			if !titles[n] {
				t.Errorf("docs/operations.md:%d: the dashboard has no panel or row %q", i+1, n)
			}
		}
	}
}

// TestAlertStageLabels: the stage label values the alert rules give dead-letter
// series are the values the dead-letter metrics and `deadletters --stage` use.
func TestAlertStageLabels(t *testing.T) {
	stages := []string{string(ids.StageSink), string(ids.StageSynthesis), string(ids.StageWorkspaces), string(ids.StageWindows)}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(readText(t, filepath.Join(repoRoot, "deploy/prometheus/alerts.yaml"))), &rules); err != nil {
		t.Fatal(err)
	}
	stageRE := regexp.MustCompile(`"stage",\s*"([^"]*)"|stage\s*=~?\s*"([^"]*)"`)
	seen := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range stageRE.FindAllStringSubmatch(r.Expr, -1) {
				v := m[1] + m[2]
				seen++
				if !slices.Contains(stages, v) {
					t.Errorf("alert %s: stage %q is not a stage the metrics use (%s)", r.Alert, v, strings.Join(stages, ", "))
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no stage label value found in the alert rules: the test reads nothing")
	}
}

// TestConfigProblemsNameRealKeys: a problem message that tells the user to set a
// secret names a secret key that exists.
func TestConfigProblemsNameRealKeys(t *testing.T) {
	keys, err := config.Keys()
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]bool{}
	for _, k := range keys {
		if k.Secret {
			secrets[k.Path] = true
		}
	}
	for _, env := range [][]string{
		{"LARKLINE_SCHEMAS__REGISTRY__URL=https://user:pw@registry.example"},
		{"LARKLINE_LARK__OPENBASEURL=https://user:pw@open.larksuite.com"},
	} {
		_, err := config.Load("", env)
		var cerr *config.Error
		if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
			t.Fatalf("%v: want a problem, got %v", env, err)
		}
		for _, p := range cerr.Problems {
			msg := p.String()
			if !strings.Contains(msg, "secret") {
				continue
			}
			named := false
			for path := range secrets {
				named = named || strings.Contains(msg, path)
			}
			if !named {
				t.Errorf("%v: %q speaks of a secret but names none of the secret keys", env, msg)
			}
		}
	}
}

// TestSubcommandsBeforeConfig: -h lists the subcommands and exits 0, and a
// mistyped subcommand exits 2 — both before the configuration is read (here a file
// that does not exist) or anything is connected.
func TestSubcommandsBeforeConfig(t *testing.T) {
	t.Setenv(config.EnvConfigFile, filepath.Join(t.TempDir(), "absent.yaml"))
	for _, tc := range []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"workspaces", "-h"}, 0, "put|status|get|publish"},
		{[]string{"bind", "-h"}, 0, "add|remove|list"},
		{[]string{"bind", "--help"}, 0, "add|remove|list"},
		{[]string{"deadletters", "-h"}, 0, "list|redrive"},
		{[]string{"workspaces", "frob", "--id", "w1"}, 2, `unknown subcommand "frob"`},
		{[]string{"bind", "ad", "--chat", "oc_1"}, 2, `unknown subcommand "ad"`},
		{[]string{"deadletters", "lst"}, 2, `unknown subcommand "lst"`},
		{[]string{"topics", "ensur"}, 2, `unknown subcommand "ensur"`},
		{[]string{"config", "chek"}, 2, `unknown subcommand "chek"`},
		{[]string{"workspaces"}, 2, "put|status|get|publish"},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.inStderr) {
				t.Fatalf("larkline %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.code, tc.inStderr)
			}
			if strings.Contains(stderr.String(), "absent.yaml") {
				t.Fatalf("larkline %s read the configuration: %q", strings.Join(tc.args, " "), stderr.String())
			}
		})
	}
}

// TestBuildVersion: the -ldflags value wins; then the module version; then the VCS
// revision; "dev" only when nothing is known.
func TestBuildVersion(t *testing.T) {
	vcs := func(rev, modified string) *debugBuildInfo {
		return newBuildInfo("(devel)", map[string]string{"vcs.revision": rev, "vcs.modified": modified})
	}
	for _, tc := range []struct {
		name    string
		ldflags string
		info    *debugBuildInfo
		want    string
	}{
		{"ldflags", "v1.4.0", vcs("0123456789abcdef", "false"), "v1.4.0"},
		{"module version", "dev", newBuildInfo("v1.3.2", nil), "v1.3.2"},
		{"vcs revision", "dev", vcs("0123456789abcdef0123", "false"), "0123456789ab"},
		{"vcs dirty", "", vcs("0123456789abcdef0123", "true"), "0123456789ab-dirty"},
		{"nothing known", "dev", newBuildInfo("(devel)", nil), "dev"},
		{"no build info", "dev", nil, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildVersion(tc.ldflags, tc.info); got != tc.want {
				t.Fatalf("buildVersion(%q) = %q, want %q", tc.ldflags, got, tc.want)
			}
		})
	}
	// make build and the image stamp the version.
	for _, f := range []string{"Makefile", "deploy/Dockerfile"} {
		if !strings.Contains(readText(t, filepath.Join(repoRoot, f)), "-X main.version=") {
			t.Errorf("%s does not stamp main.version with -ldflags", f)
		}
	}
}

type debugBuildInfo = debug.BuildInfo

func newBuildInfo(version string, settings map[string]string) *debug.BuildInfo {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/larkline/larkline", Version: version}}
	for k, v := range settings {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
	}
	return bi
}
