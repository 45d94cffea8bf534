package schemas

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/linkedin/goavro/v2"
)

// Namespace is the Avro namespace of every larkline schema.
const Namespace = "io.larkline"

// VersionField is the first field of every larkline record schema: the version of the
// schema that wrote the record. Its default is the schema's version.
const VersionField = "schema_version"

// Full Avro names of the record types.
const (
	NameEvidenceRecord       = Namespace + ".EvidenceRecord"
	NameClosedWindow         = Namespace + ".ClosedWindow"
	NameCollectionCheckpoint = Namespace + ".CollectionCheckpoint"
	NameWorkspaceRecord      = Namespace + ".WorkspaceRecord"
	NameDeadLetter           = Namespace + ".DeadLetter"
)

//go:embed *.avsc
var embedded embed.FS

// fileNamePattern is <base>.v<version>.avsc.
var fileNamePattern = regexp.MustCompile(`^([a-z][a-z0-9_]*)\.v([0-9]+)\.avsc$`)

// Schema is one parsed Avro record schema.
type Schema struct {
	// File is the embedded file name (e.g. evidence.v1.avsc); empty for a schema
	// that came from a registry or from WithWriterSchemas.
	File string
	// Name is the full Avro name of the record (e.g. io.larkline.EvidenceRecord).
	Name string
	// Version is the default of the schema_version field, 0 when the schema has none.
	Version int
	// JSON is the schema text as written.
	JSON string
	// Canonical is the Avro parsing canonical form.
	Canonical string
	// Fingerprint is the CRC-64-AVRO (Rabin) fingerprint of Canonical, the one the
	// single-object encoding carries.
	Fingerprint uint64

	codec *goavro.Codec
	root  *node
}

// ParseSchema parses an Avro schema whose top-level type is a record.
func ParseSchema(schemaJSON string) (*Schema, error) {
	codec, err := goavro.NewCodec(schemaJSON)
	if err != nil {
		return nil, fmt.Errorf("parse avro schema: %w", err)
	}
	var raw any
	if err := json.Unmarshal([]byte(schemaJSON), &raw); err != nil {
		return nil, fmt.Errorf("parse avro schema json: %w", err)
	}
	p := &schemaParser{named: map[string]*node{}}
	root, err := p.parse(raw, "")
	if err != nil {
		return nil, fmt.Errorf("parse avro schema: %w", err)
	}
	if root.kind != kindRecord {
		return nil, fmt.Errorf("parse avro schema: top-level type is %s, want a record", root.kind)
	}
	s := &Schema{
		Name:        root.name,
		JSON:        schemaJSON,
		Canonical:   codec.CanonicalSchema(),
		Fingerprint: codec.Rabin,
		codec:       codec,
		root:        root,
	}
	if f := root.field(VersionField); f != nil {
		v, ok := f.def.(float64)
		if !f.hasDef || !ok || v != float64(int(v)) || v < 0 || (f.typ.kind != kindInt && f.typ.kind != kindLong) {
			return nil, fmt.Errorf("parse avro schema %s: field %s must be an int with a non-negative integer default", s.Name, VersionField)
		}
		s.Version = int(v)
	}
	return s, nil
}

// FingerprintString formats a single-object fingerprint the way dead letters and
// logs carry it: avro-crc64:<16 lower-case hex digits>.
func FingerprintString(fp uint64) string { return fmt.Sprintf("avro-crc64:%016x", fp) }

// ConfluentIDString formats a schema registry id the way dead letters and logs carry
// it: confluent-id:<id>.
func ConfluentIDString(id uint32) string { return "confluent-id:" + strconv.FormatUint(uint64(id), 10) }

type catalog struct {
	all    []*Schema            // every embedded schema, sorted by name then version
	byName map[string][]*Schema // ascending version
	byFP   map[uint64]*Schema
}

var loadCatalog = sync.OnceValues(func() (*catalog, error) { return buildCatalog(embedded) })

func buildCatalog(fsys fs.FS) (*catalog, error) {
	files, err := fs.Glob(fsys, "*.avsc")
	if err != nil {
		return nil, fmt.Errorf("list embedded schemas: %w", err)
	}
	c := &catalog{byName: map[string][]*Schema{}, byFP: map[uint64]*Schema{}}
	for _, file := range files {
		m := fileNamePattern.FindStringSubmatch(path.Base(file))
		if m == nil {
			return nil, fmt.Errorf("embedded schema %s: file name is not <name>.v<version>.avsc", file)
		}
		fileVersion, _ := strconv.Atoi(m[2])
		text, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read embedded schema %s: %w", file, err)
		}
		s, err := ParseSchema(string(text))
		if err != nil {
			return nil, fmt.Errorf("embedded schema %s: %w", file, err)
		}
		s.File = file
		if !strings.HasPrefix(s.Name, Namespace+".") {
			return nil, fmt.Errorf("embedded schema %s: name %s is outside namespace %s", file, s.Name, Namespace)
		}
		if s.root.field(VersionField) == nil || s.root.fields[0].name != VersionField {
			return nil, fmt.Errorf("embedded schema %s: first field must be %s", file, VersionField)
		}
		if s.Version != fileVersion {
			return nil, fmt.Errorf("embedded schema %s: %s default %d does not match the file name", file, VersionField, s.Version)
		}
		if prev, ok := c.byFP[s.Fingerprint]; ok {
			return nil, fmt.Errorf("embedded schemas %s and %s have the same fingerprint", prev.File, file)
		}
		for _, prev := range c.byName[s.Name] {
			if prev.Version == s.Version {
				return nil, fmt.Errorf("embedded schemas %s and %s are both version %d of %s", prev.File, file, s.Version, s.Name)
			}
		}
		c.byFP[s.Fingerprint] = s
		c.byName[s.Name] = append(c.byName[s.Name], s)
		c.all = append(c.all, s)
	}
	for _, list := range c.byName {
		slices.SortFunc(list, func(a, b *Schema) int { return a.Version - b.Version })
	}
	slices.SortFunc(c.all, func(a, b *Schema) int {
		if a.Name != b.Name {
			return strings.Compare(a.Name, b.Name)
		}
		return a.Version - b.Version
	})
	return c, nil
}

// current returns the newest embedded schema of a record type.
func (c *catalog) current(name string) (*Schema, error) {
	list := c.byName[name]
	if len(list) == 0 {
		return nil, fmt.Errorf("no embedded schema for %s", name)
	}
	return list[len(list)-1], nil
}

// Embedded returns (copies of) every schema file of this package, ordered by record
// name and version. Every released version stays embedded so that records written
// with it remain readable in the single-object encoding; a schema is never edited
// once released, a new version is added next to it.
func Embedded() ([]Schema, error) {
	c, err := loadCatalog()
	if err != nil {
		return nil, err
	}
	out := make([]Schema, len(c.all))
	for i, s := range c.all {
		out[i] = *s
	}
	return out, nil
}

// ---- a small Avro schema model: enough to validate binary data without allocating
// and to resolve reader defaults. goavro does the actual encoding and decoding.

type kind int

const (
	kindNull kind = iota
	kindBoolean
	kindInt
	kindLong
	kindFloat
	kindDouble
	kindBytes
	kindString
	kindRecord
	kindEnum
	kindArray
	kindMap
	kindFixed
	kindUnion
)

var kindNames = [...]string{"null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum", "array", "map", "fixed", "union"}

func (k kind) String() string { return kindNames[k] }

type field struct {
	name   string
	typ    *node
	hasDef bool
	def    any // the JSON default as decoded by encoding/json
}

type node struct {
	kind     kind
	name     string   // full name of a named type
	fields   []*field // record
	symbols  []string // enum
	size     int      // fixed
	items    *node    // array items, map values
	branches []*node  // union
}

func (n *node) field(name string) *field {
	for _, f := range n.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

type schemaParser struct {
	named map[string]*node
}

var primitiveKinds = map[string]kind{
	"null": kindNull, "boolean": kindBoolean, "int": kindInt, "long": kindLong,
	"float": kindFloat, "double": kindDouble, "bytes": kindBytes, "string": kindString,
}

func fullName(name, namespace, enclosing string) string {
	if strings.Contains(name, ".") {
		return name
	}
	if namespace == "" {
		namespace = enclosing
	}
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

func namespaceOf(full string) string {
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i]
	}
	return ""
}

// parse turns one parsed JSON schema into its node. Long on purpose: one case
// per form of an Avro schema (name, union, record, enum, array, map, fixed, primitive).
func (p *schemaParser) parse(raw any, ns string) (*node, error) {
	switch v := raw.(type) {
	case string:
		if k, ok := primitiveKinds[v]; ok {
			return &node{kind: k}, nil
		}
		if n, ok := p.named[fullName(v, "", ns)]; ok {
			return n, nil
		}
		if n, ok := p.named[v]; ok {
			return n, nil
		}
		return nil, fmt.Errorf("unknown type %q", v)
	case []any:
		n := &node{kind: kindUnion}
		for _, b := range v {
			bn, err := p.parse(b, ns)
			if err != nil {
				return nil, err
			}
			n.branches = append(n.branches, bn)
		}
		return n, nil
	case map[string]any:
		t, _ := v["type"].(string)
		if t == "" {
			// {"type": {...}} or {"type": [...]} wraps another schema.
			if inner, ok := v["type"]; ok {
				return p.parse(inner, ns)
			}
			return nil, fmt.Errorf("schema object without type")
		}
		if k, ok := primitiveKinds[t]; ok {
			return &node{kind: k}, nil // logical types are annotations on primitives
		}
		name, _ := v["name"].(string)
		space, _ := v["namespace"].(string)
		switch t {
		case "record", "error":
			n := &node{kind: kindRecord, name: fullName(name, space, ns)}
			p.named[n.name] = n
			fields, _ := v["fields"].([]any)
			for _, fr := range fields {
				fm, ok := fr.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("record %s: field is not an object", n.name)
				}
				fname, _ := fm["name"].(string)
				ft, err := p.parse(fm["type"], namespaceOf(n.name))
				if err != nil {
					return nil, fmt.Errorf("record %s field %s: %w", n.name, fname, err)
				}
				f := &field{name: fname, typ: ft}
				f.def, f.hasDef = fm["default"]
				n.fields = append(n.fields, f)
			}
			return n, nil
		case "enum":
			n := &node{kind: kindEnum, name: fullName(name, space, ns)}
			syms, _ := v["symbols"].([]any)
			for _, s := range syms {
				sym, _ := s.(string)
				n.symbols = append(n.symbols, sym)
			}
			p.named[n.name] = n
			return n, nil
		case "fixed":
			size, _ := v["size"].(float64)
			n := &node{kind: kindFixed, name: fullName(name, space, ns), size: int(size)}
			p.named[n.name] = n
			return n, nil
		case "array":
			items, err := p.parse(v["items"], ns)
			if err != nil {
				return nil, err
			}
			return &node{kind: kindArray, items: items}, nil
		case "map":
			values, err := p.parse(v["values"], ns)
			if err != nil {
				return nil, err
			}
			return &node{kind: kindMap, items: values}, nil
		default:
			if n, ok := p.named[fullName(t, "", ns)]; ok {
				return n, nil
			}
			return nil, fmt.Errorf("unknown type %q", t)
		}
	default:
		return nil, fmt.Errorf("unexpected schema element %T", raw)
	}
}
