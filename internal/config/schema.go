package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"
)

// EnvPrefix starts every environment variable that sets a configuration key.
const EnvPrefix = "LARKLINE_"

// Environment variables that start with EnvPrefix but are not configuration keys.
const (
	// EnvConfigFile names the configuration file for the binary (read by cmd, not by
	// Load).
	EnvConfigFile = "LARKLINE_CONFIG"
	// EnvTestPrefix is reserved for the test harness (LARKLINE_TEST_KAFKA_BROKERS…).
	// LARKLINE_SERVICE_* and LARKLINE_PORT* are ignored too: Kubernetes injects them
	// for a Service named larkline.
	EnvTestPrefix = "LARKLINE_TEST_"
)

// envSep joins key segments in an environment variable name.
const envSep = "__"

// fileSuffix names the sibling key a secret can be read from (appSecret → appSecretFile).
const fileSuffix = "File"

// kind is how a key's value is written and parsed.
type kind int

const (
	kindSection  kind = iota // a mapping of further keys
	kindString               // any string-kinded type, enums included
	kindSecret               // Secret
	kindBool                 // true or false
	kindInt                  // int, int16, int32, int64
	kindFloat                // float64
	kindDuration             // time.Duration as a Go duration string
	kindStrings              // []string
	kindList                 // []struct: a sequence of mappings
)

func (k kind) String() string {
	return [...]string{"section", "string", "secret", "boolean", "integer", "number", "duration", "list of strings", "list"}[k]
}

// key is one node of the configuration schema, derived from the Config struct.
type key struct {
	name     string // YAML key
	path     string // dotted key path; fields of list elements are under "<list>[]"
	env      string // environment variable; "" inside lists
	kind     kind
	index    int // field index within the parent struct
	typ      reflect.Type
	children []*key // kindSection: fields; kindList: the element's fields
}

func (k *key) child(name string) *key {
	for _, c := range k.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

type schemaIndex struct {
	root   *key
	byPath map[string]*key // every key (sections and leaves) outside lists
	byEnv  map[string]*key
	chain  map[*key][]int // field index path from the Config root
	leaves []*key         // leaves outside lists, in declaration order
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	secretType   = reflect.TypeFor[Secret]()
)

var loadSchema = sync.OnceValues(func() (*schemaIndex, error) {
	return buildSchema(reflect.TypeFor[Config]())
})

// buildSchema derives the schema from the struct and checks its invariants: every
// field has a YAML key, env names are unique, every secret has a *File sibling.
func buildSchema(t reflect.Type) (*schemaIndex, error) {
	idx := &schemaIndex{byPath: map[string]*key{}, byEnv: map[string]*key{}, chain: map[*key][]int{}}
	root := &key{kind: kindSection, typ: t}
	if err := idx.fields(root, nil, true); err != nil {
		return nil, err
	}
	idx.root = root
	return idx, nil
}

func (idx *schemaIndex) fields(parent *key, chain []int, addressable bool) error {
	t := parent.typ
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			return fmt.Errorf("config schema: field %s.%s has no yaml key", t.Name(), f.Name)
		}
		k := &key{name: name, index: i, typ: f.Type}
		k.path = joinPath(parent.path, name)
		switch {
		case f.Type == secretType:
			k.kind = kindSecret
		case f.Type == durationType:
			k.kind = kindDuration
		case f.Type.Kind() == reflect.String:
			k.kind = kindString
		case f.Type.Kind() == reflect.Bool:
			k.kind = kindBool
		case f.Type.Kind() == reflect.Int || f.Type.Kind() == reflect.Int16 || f.Type.Kind() == reflect.Int32 || f.Type.Kind() == reflect.Int64:
			k.kind = kindInt
		case f.Type.Kind() == reflect.Float64:
			k.kind = kindFloat
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			k.kind = kindStrings
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			k.kind = kindList
		case f.Type.Kind() == reflect.Struct:
			k.kind = kindSection
		default:
			return fmt.Errorf("config schema: field %s.%s has unsupported type %s", t.Name(), f.Name, f.Type)
		}
		parent.children = append(parent.children, k)
		myChain := append(append([]int(nil), chain...), i)
		switch k.kind {
		case kindSection:
			if err := idx.fields(k, myChain, addressable); err != nil {
				return err
			}
		case kindList:
			elem := &key{kind: kindSection, typ: f.Type.Elem(), path: k.path + "[]"}
			if err := idx.fields(elem, nil, false); err != nil {
				return err
			}
			k.children = elem.children
		}
		if addressable {
			k.env = EnvName(k.path)
			if other, dup := idx.byEnv[k.env]; dup {
				return fmt.Errorf("config schema: keys %s and %s share environment variable %s", other.path, k.path, k.env)
			}
			idx.byEnv[k.env] = k
			idx.byPath[k.path] = k
			idx.chain[k] = myChain
			if k.kind != kindSection {
				idx.leaves = append(idx.leaves, k)
			}
		}
	}
	for _, c := range parent.children {
		if c.kind == kindSecret && parent.child(c.name+fileSuffix) == nil {
			return fmt.Errorf("config schema: secret %s has no %s%s key", c.path, c.name, fileSuffix)
		}
	}
	return nil
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// EnvName returns the environment variable that sets the key at a dotted path:
// EnvPrefix followed by the path's segments, each upper-cased as written, joined by
// "__". For example services.workspace.timeline.lark.synthesisWindow is
// LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOW. Keys never contain
// "_" and no two sibling keys differ only in case, so the rule is unambiguous.
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", envSep))
}

// Key describes one configuration key, for documentation and tooling.
type Key struct {
	Path   string // dotted key path
	Env    string // environment variable
	Kind   string // "string", "secret", "boolean", "integer", "number", "duration", "list of strings", "list"
	Secret bool
}

// Keys lists every settable key (sections excluded) in declaration order.
func Keys() ([]Key, error) {
	idx, err := loadSchema()
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(idx.leaves))
	for _, k := range idx.leaves {
		out = append(out, Key{Path: k.path, Env: k.env, Kind: k.kind.String(), Secret: k.kind == kindSecret})
	}
	return out, nil
}

// field returns the settable value of key k inside the Config at root.
func (idx *schemaIndex) field(root reflect.Value, k *key) reflect.Value {
	v := root
	for _, i := range idx.chain[k] {
		v = v.Field(i)
	}
	return v
}

// suggest returns the candidate closest to s (case-insensitive edit distance), or ""
// when none is close enough to be a plausible typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		// A truncated key (sha for sha256) is a plausible typo whatever the distance.
		if len(ls) >= 3 && strings.HasPrefix(strings.ToLower(c), ls) {
			return c
		}
	}
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/3) {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// KnownPath reports whether a problem path names a key of the schema (tests hold
// every problem to it, configtest): list indexes
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
