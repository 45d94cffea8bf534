package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/larkline/larkline/internal/config"
)

// TestDocsCoverEveryKey keeps docs/configuration.md complete and honest: every key
// is documented with its full path, and every full key path the document names is a
// real key.
func TestDocsCoverEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	keys, err := config.Keys()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range keys {
		known[k.Path] = true
		if !strings.Contains(doc, "`"+k.Path+"`") {
			t.Errorf("docs/configuration.md does not document `%s`", k.Path)
		}
	}
	sections := "services|kafka|postgres|lark|http|synthesis|log"
	ref := regexp.MustCompile("`((?:" + sections + `)\.[A-Za-z0-9.\[\]]+)` + "`")
	for _, m := range ref.FindAllStringSubmatch(doc, -1) {
		p := m[1]
		if !known[p] && !config.KnownPath(p) && !isSection(keys, p) {
			t.Errorf("docs/configuration.md names `%s`, which is not a key", p)
		}
	}
	for _, k := range keys {
		if strings.Contains(doc, k.Env) {
			return // at least the rule is illustrated with real names
		}
	}
	t.Error("docs/configuration.md shows no real environment variable")
}

func isSection(keys []config.Key, p string) bool {
	for _, k := range keys {
		if strings.HasPrefix(k.Path, p+".") {
			return true
		}
	}
	return false
}
