package config

import (
	"regexp"
	"strings"
)

var indexRE = regexp.MustCompile(`\[\d+\]`)

// KnownPath reports whether a problem path names a key of the schema: list indexes
// are normalised (http.apiTokens[2].sha256 → http.apiTokens[].sha256,
// kafka.brokers[1] → kafka.brokers).
func KnownPath(p string) bool {
	idx, err := loadSchema()
	if err != nil {
		return false
	}
	if _, ok := idx.byPath[p]; ok {
		return true
	}
	if k, ok := idx.byPath[strings.TrimSuffix(indexRE.ReplaceAllString(p, "[]"), "[]")]; ok && k.kind == kindList {
		return true // a list item: http.apiTokens[0]
	}
	norm := indexRE.ReplaceAllString(p, "[]")
	if k, ok := idx.byPath[indexRE.ReplaceAllString(p, "")]; ok && k.kind == kindStrings {
		return true
	}
	for _, k := range idx.byPath {
		if k.kind != kindList {
			continue
		}
		for _, c := range k.children {
			if c.path == norm {
				return true
			}
			if c.kind == kindStrings && c.path+"[]" == norm {
				return true
			}
		}
	}
	return false
}

// FormatDuration exposes formatDuration to tests.
var FormatDuration = formatDuration
