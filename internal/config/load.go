package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxSecretFileBytes bounds a secret file; anything larger is not a secret.
const maxSecretFileBytes = 64 << 10

// Load returns the configuration made of, in increasing precedence: the defaults,
// the YAML file at path (skipped when path is ""), and the LARKLINE_ variables in env
// (pass os.Environ()). Secrets named by *File keys are then read from their files.
// Finally the result is validated.
//
// A file that cannot be read is returned as that error (wrapping fs.ErrNotExist and
// the like). Everything wrong with the content — unknown keys, values that do not
// parse, environment variables that name no key, unreadable secret files, and every
// Validate rule — is reported at once in one *Error that matches ErrInvalid.
func Load(path string, env []string) (*Config, error) { return LoadChecked(path, env) }

// LoadChecked is Load with the stages' rules: after the file's own rules, every
// stage check reports the problems its stage's Options.Check finds in the options
// the configuration maps onto (cmd/larkline's stageChecks), so that one error
// lists everything wrong at once (see [Config.ValidateWith] for which repeats are
// left out).
func LoadChecked(path string, env []string, stages ...StageCheck) (*Config, error) {
	idx, err := loadSchema()
	if err != nil {
		return nil, fmt.Errorf("loading configuration: %w", err)
	}
	cfg := Default()
	cfg.origins = map[string]string{}
	d := &decoder{idx: idx, cfg: cfg, failed: map[string]bool{}}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading configuration file: %w", err)
		}
		d.decodeFile(path, data)
	}
	d.applyEnv(env)
	d.resolveSecretFiles()

	if err := asError(cfg.checked(d.problems, d.failed, stages)); err != nil {
		return nil, err
	}
	return cfg, nil
}

type decoder struct {
	idx      *schemaIndex
	cfg      *Config
	problems []Problem
	failed   map[string]bool // paths with a decode problem; their validation is moot
	source   func(n *yaml.Node) string
}

func (d *decoder) root() reflect.Value { return reflect.ValueOf(d.cfg).Elem() }

func (d *decoder) problem(path string, n *yaml.Node, value, msg string) {
	d.failed[path] = true
	p := Problem{Field: path, Value: value, Message: msg}
	if d.source != nil {
		p.Source = d.source(n)
	}
	d.problems = append(d.problems, p)
}

func (d *decoder) setOrigin(path string, n *yaml.Node) {
	if d.source != nil {
		d.cfg.origins[path] = d.source(n)
	}
}

func (d *decoder) decodeFile(file string, data []byte) {
	d.source = func(n *yaml.Node) string {
		if n == nil || n.Line == 0 {
			return file
		}
		return file + ":" + strconv.Itoa(n.Line)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return // an empty file sets nothing
		}
		d.problems = append(d.problems, Problem{Field: file, Message: "is not valid YAML: " + err.Error()})
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		d.problems = append(d.problems, Problem{Field: file, Message: "must hold exactly one YAML document"})
		return
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	d.section(d.root(), d.idx.root, "", top)
}

// deref follows YAML aliases.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "an unsupported YAML node"
}

func (d *decoder) section(v reflect.Value, sec *key, path string, n *yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return // an empty section keeps its defaults
	}
	where := path
	if where == "" {
		where = "the top level"
	}
	if n.Kind != yaml.MappingNode {
		d.problem(where, n, "", fmt.Sprintf("must be a mapping of keys, not %s", describe(n)))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := kn.Value
		p := joinPath(path, name)
		switch {
		case kn.Kind != yaml.ScalarNode:
			d.problem(where, kn, "", "has a key that is not a plain name")
			continue
		case name == "<<":
			d.problem(where, kn, "", "uses a YAML merge key (<<), which is not supported; write the keys out")
			continue
		}
		k := sec.child(name)
		if k == nil {
			names := make([]string, 0, len(sec.children))
			for _, c := range sec.children {
				names = append(names, c.name)
			}
			msg := "unknown key"
			if s := suggest(name, names); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else if elsewhere := d.keysNamed(name); len(elsewhere) > 0 {
				msg += fmt.Sprintf("; a key of that name is at %s", strings.Join(elsewhere, " and "))
			} else {
				msg += fmt.Sprintf("; known keys here: %s", strings.Join(names, ", "))
			}
			d.problem(p, kn, "", msg)
			continue
		}
		if line, dup := seen[name]; dup {
			d.problem(p, kn, "", fmt.Sprintf("is set twice (first on line %d)", line))
			continue
		}
		seen[name] = kn.Line
		d.value(v.Field(k.index), k, p, vn)
	}
}

func (d *decoder) value(v reflect.Value, k *key, path string, n *yaml.Node) {
	n = deref(n)
	switch k.kind {
	case kindSection:
		d.section(v, k, path, n)
	case kindList:
		if isNull(n) {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			d.setOrigin(path, n)
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.problem(path, n, "", fmt.Sprintf("must be a list of mappings, not %s", describe(n)))
			return
		}
		out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		elemKey := &key{kind: kindSection, children: k.children}
		for i, item := range n.Content {
			item = deref(item)
			ip := fmt.Sprintf("%s[%d]", path, i)
			if isNull(item) || item.Kind != yaml.MappingNode {
				d.problem(ip, item, "", "must be a mapping of keys")
				continue
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			d.section(elem, elemKey, ip, item)
			out = reflect.Append(out, elem)
		}
		v.Set(out)
		d.setOrigin(path, n)
	case kindStrings:
		if isNull(n) {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			d.setOrigin(path, n)
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.problem(path, n, "", fmt.Sprintf("must be a list of strings, such as [a, b], not %s", describe(n)))
			return
		}
		out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		ok := true
		for i, item := range n.Content {
			item = deref(item)
			if isNull(item) || item.Kind != yaml.ScalarNode || item.Value == "" {
				d.problem(fmt.Sprintf("%s[%d]", path, i), item, "", "must be a non-empty string")
				ok = false
				continue
			}
			out = reflect.Append(out, reflect.ValueOf(item.Value).Convert(v.Type().Elem()))
		}
		if ok {
			v.Set(out)
			d.setOrigin(path, n)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			d.problem(path, n, "", fmt.Sprintf("must be a single %s, not %s", k.kind, describe(n)))
			return
		}
		if isNull(n) {
			if k.kind == kindString || k.kind == kindSecret {
				v.SetString("")
				d.setOrigin(path, n)
				return
			}
			d.problem(path, n, "", fmt.Sprintf("has no value; want a %s", k.kind))
			return
		}
		if err := setScalar(v, k, n.Value); err != nil {
			d.problem(path, n, displayText(k, n.Value), err.Error())
			return
		}
		d.setOrigin(path, n)
	}
}

// displayText renders a raw value for a problem message; secrets never appear.
func displayText(k *key, text string) string {
	if k.kind == kindSecret {
		return Secret(text).displayValue()
	}
	return strconv.Quote(text)
}

func (s Secret) displayValue() string {
	if s == "" {
		return `""`
	}
	return Redacted
}

// setScalar parses text into v according to the key's kind.
func setScalar(v reflect.Value, k *key, text string) error {
	switch k.kind {
	case kindString, kindSecret:
		v.SetString(text)
	case kindBool:
		switch strings.ToLower(strings.TrimSpace(text)) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return errors.New("must be true or false")
		}
	case kindInt:
		bits := v.Type().Bits()
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, bits)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("is out of range (at most %d)", int64(1)<<(bits-1)-1)
			}
			return errors.New("must be a whole number")
		}
		v.SetInt(n)
	case kindFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("must be a number")
		}
		v.SetFloat(f)
	case kindDuration:
		dur, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return errors.New("must be a Go duration such as 500ms, 90s, 5m or 1h30m")
		}
		v.SetInt(int64(dur))
	default:
		return fmt.Errorf("cannot be set from a single value (it is a %s)", k.kind)
	}
	return nil
}

// applyEnv applies every LARKLINE_ variable that names a key; variables that name
// none are problems.
func (d *decoder) applyEnv(env []string) {
	vars := map[string]string{}
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(strings.ToUpper(name), EnvPrefix) {
			continue
		}
		if reservedEnv(name) {
			continue
		}
		vars[name] = val // the last assignment wins, as in os.Getenv
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d.source = func(*yaml.Node) string { return "env " + name }
		d.envVar(name, vars[name])
	}
	d.source = nil
}

// envVar applies one LARKLINE_ variable to the key it names.
func (d *decoder) envVar(name, val string) {
	k := d.idx.byEnv[name]
	if k == nil {
		msg := "names no configuration key"
		if s := d.suggestEnv(name); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		d.problems = append(d.problems, Problem{Field: name, Source: "environment", Message: msg})
		return
	}
	if k.kind == kindSection {
		d.problem(k.path, nil, "", "names a section, not a key; set its keys, such as "+d.firstLeafEnv(k))
		return
	}
	v := d.idx.field(d.root(), k)
	switch k.kind {
	case kindList:
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(val), &doc); err != nil {
			d.problem(k.path, nil, "", "must be a YAML or JSON list of mappings, such as [{name: ci, sha256: …, workspaces: [\"*\"]}]: "+err.Error())
			return
		}
		n := &doc
		if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
			n = n.Content[0]
		}
		if n.Kind == 0 { // empty value
			n = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
		}
		d.value(v, k, k.path, n)
	case kindStrings:
		d.envStrings(k, v, val)
	default:
		if err := setScalar(v, k, val); err != nil {
			d.problem(k.path, nil, displayText(k, val), err.Error())
			return
		}
		d.setOrigin(k.path, nil)
	}
}

// envStrings sets a list of strings from a comma-separated variable.
func (d *decoder) envStrings(k *key, v reflect.Value, val string) {
	items := []string{}
	if strings.TrimSpace(val) != "" {
		for i, item := range strings.Split(val, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				d.problem(k.path, nil, strconv.Quote(val), fmt.Sprintf("item %d is empty; separate items with single commas", i+1))
				return
			}
			items = append(items, item)
		}
	}
	out := reflect.MakeSlice(v.Type(), 0, len(items))
	for _, item := range items {
		out = reflect.Append(out, reflect.ValueOf(item).Convert(v.Type().Elem()))
	}
	v.Set(out)
	d.setOrigin(k.path, nil)
}

// keysNamed lists the paths of keys called name (case-insensitive) anywhere in the
// schema, for a key written at the wrong level.
func (d *decoder) keysNamed(name string) []string {
	var out []string
	for _, k := range d.idx.leaves {
		if strings.EqualFold(k.name, name) {
			out = append(out, k.path)
		}
	}
	for p, k := range d.idx.byPath {
		if k.kind == kindSection && strings.EqualFold(k.name, name) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// reservedEnv reports whether a LARKLINE_ variable is not configuration: the
// config file path, the test harness's variables, and the service links Kubernetes
// injects for a Service named larkline (LARKLINE_SERVICE_HOST, LARKLINE_PORT,
// LARKLINE_PORT_8080_TCP_ADDR, …). No key path starts with SERVICE_ or PORT.
func reservedEnv(name string) bool {
	return name == EnvConfigFile || strings.HasPrefix(name, EnvTestPrefix) ||
		name == EnvPrefix+"PORT" || strings.HasPrefix(name, EnvPrefix+"PORT_") ||
		strings.HasPrefix(name, EnvPrefix+"SERVICE_") || slices.Contains(scriptEnv, name)
}

// scriptEnv are the variables of deploy/kafka's broker and registry scripts
// (docs/testing.md): set in a developer's shell, they must not stop larkline.
var scriptEnv = []string{
	"LARKLINE_KAFKA_EXTRA_PROPERTIES", "LARKLINE_KAFKA_HEAP", "LARKLINE_KAFKA_JARS",
	"LARKLINE_KAFKA_START_TIMEOUT", "LARKLINE_KAFKA_STOP_TIMEOUT",
	"LARKLINE_REGISTRY_HEAP", "LARKLINE_REGISTRY_JARS", "LARKLINE_REGISTRY_MVN_SETTINGS",
	"LARKLINE_REGISTRY_START_TIMEOUT", "LARKLINE_REGISTRY_STOP_TIMEOUT",
}

func (d *decoder) firstLeafEnv(k *key) string {
	for k.kind == kindSection && len(k.children) > 0 {
		k = k.children[0]
	}
	return EnvName(k.path)
}

// suggestEnv proposes variables close to an unknown one: a near spelling of the
// whole name, or else keys whose last segment matches the variable's last segment
// (LARKLINE_SYNTHESISWINDOW → …__LARK__SYNTHESISWINDOW).
func (d *decoder) suggestEnv(name string) []string {
	all := make([]string, 0, len(d.idx.leaves))
	for _, k := range d.idx.leaves {
		all = append(all, k.env)
	}
	upper := strings.ToUpper(name)
	best, bestD := "", -1
	for _, c := range all {
		dist := editDistance(upper, c)
		if bestD < 0 || dist < bestD {
			best, bestD = c, dist
		}
	}
	if bestD >= 0 && bestD <= 3 {
		return []string{best}
	}
	tail := strings.TrimPrefix(upper, EnvPrefix)
	if i := strings.LastIndex(tail, envSep); i >= 0 {
		tail = tail[i+len(envSep):]
	}
	tail = strings.Trim(tail, "_")
	var out []string
	for _, c := range all {
		ct := c[strings.LastIndex(c, envSep)+len(envSep):]
		if c == EnvPrefix+ct {
			ct = strings.TrimPrefix(c, EnvPrefix)
		}
		if tail != "" && editDistance(tail, ct) <= max(1, len(tail)/8) {
			out = append(out, c)
		}
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// resolveSecretFiles reads every secret whose *File key is set.
func (d *decoder) resolveSecretFiles() {
	root := d.root()
	for _, k := range d.idx.leaves {
		if k.kind != kindSecret {
			continue
		}
		fk := d.idx.byPath[k.path+fileSuffix]
		file := d.idx.field(root, fk).String()
		if file == "" {
			continue
		}
		sv := d.idx.field(root, k)
		src := d.cfg.Origin(fk.path)
		fail := func(msg string) {
			d.failed[k.path], d.failed[fk.path] = true, true
			d.problems = append(d.problems, Problem{Field: fk.path, Value: strconv.Quote(file), Source: src, Message: msg})
		}
		if sv.String() != "" {
			fail(fmt.Sprintf("is set and so is %s (%s); set only one", k.path, d.cfg.Origin(k.path)))
			continue
		}
		secret, err := readSecretFile(file)
		if err != nil {
			fail(err.Error())
			continue
		}
		sv.SetString(secret)
		d.cfg.origins[k.path] = "file " + file
	}
}

func readSecretFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("cannot open the secret file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("cannot read the secret file: %w", err)
	}
	if len(data) > maxSecretFileBytes {
		return "", fmt.Errorf("the secret file is larger than %d bytes", maxSecretFileBytes)
	}
	s := strings.TrimRight(string(data), "\r\n")
	if s == "" {
		return "", errors.New("the secret file is empty")
	}
	return s, nil
}
