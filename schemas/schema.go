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
	// that came from a registry.
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
	// records holds, by full name, the fields of every record type the schema
	// defines and their defaults: what a reader takes for a field its writer lacked.
	records map[string]record
}

// record is one record type of a schema: its field defaults (a field without a
// default is absent) and, for a field that is an array of records, the items'
// record name.
type record struct {
	fields   []string
	defaults map[string]any
	items    map[string]string
}

// maxGoavroBlockCount bounds an array or map block goavro decodes. goavro sizes
// an array by the count a block announces before reading its items, so corrupted
// bytes could make it allocate up to 2^31 items; no record larkline writes has a
// block of more than this many items (a record is bounded by the topics'
// max.message.bytes, a few MiB). goavro's limit is process-wide; larkline is its
// only user.
const maxGoavroBlockCount = 1 << 20

func init() { goavro.MaxBlockCount = maxGoavroBlockCount }

// ParseSchema parses an Avro schema whose top-level type is a record.
func ParseSchema(schemaJSON string) (*Schema, error) {
	codec, err := goavro.NewCodec(schemaJSON)
	if err != nil {
		return nil, fmt.Errorf("parse avro schema: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(schemaJSON), &raw); err != nil || raw["type"] != "record" {
		return nil, fmt.Errorf("parse avro schema: top-level type is not a record")
	}
	s := &Schema{JSON: schemaJSON, Canonical: codec.CanonicalSchema(), Fingerprint: codec.Rabin,
		codec: codec, records: map[string]record{}}
	s.Name = s.collect(raw, "")
	if def, ok := s.records[s.Name].defaults[VersionField]; ok {
		v, ok := def.(float64)
		if !ok || v != float64(int(v)) || v < 0 {
			return nil, fmt.Errorf("parse avro schema %s: field %s must have a non-negative integer default", s.Name, VersionField)
		}
		s.Version = int(v)
	} else if slices.Contains(s.records[s.Name].fields, VersionField) {
		return nil, fmt.Errorf("parse avro schema %s: field %s must have a non-negative integer default", s.Name, VersionField)
	}
	return s, nil
}

// collect records the record type rec (already checked by goavro) and the record
// types nested in its fields, and returns its full name.
func (s *Schema) collect(rec map[string]any, enclosingNS string) string {
	name, _ := rec["name"].(string)
	ns, _ := rec["namespace"].(string)
	if ns == "" {
		ns = enclosingNS
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		ns = name[:i]
	} else if ns != "" {
		name = ns + "." + name
	}
	r := record{defaults: map[string]any{}, items: map[string]string{}}
	fields, _ := rec["fields"].([]any)
	for _, f := range fields {
		fm, _ := f.(map[string]any)
		fname, _ := fm["name"].(string)
		r.fields = append(r.fields, fname)
		if def, ok := fm["default"]; ok {
			r.defaults[fname] = def
		}
		t, _ := fm["type"].(map[string]any)
		switch {
		case t["type"] == "record":
			s.collect(t, ns)
		case t["type"] == "array":
			if items, ok := t["items"].(map[string]any); ok && items["type"] == "record" {
				r.items[fname] = s.collect(items, ns)
			}
		}
	}
	s.records[name] = r
	return name
}

// FingerprintString formats a single-object fingerprint the way dead letters and
// logs carry it: avro-crc64:<16 lower-case hex digits>.
func FingerprintString(fp uint64) string { return fmt.Sprintf("avro-crc64:%016x", fp) }

// ConfluentIDString formats a schema registry id the way dead letters and logs carry
// it: confluent-id:<id>.
func ConfluentIDString(id uint32) string { return "confluent-id:" + strconv.FormatUint(uint64(id), 10) }

// catalog is the embedded schemas: one file per record type, its current version.
type catalog struct {
	all    []*Schema // sorted by name
	byName map[string]*Schema
	byFP   map[uint64]*Schema
}

var loadCatalog = sync.OnceValues(func() (*catalog, error) { return buildCatalog(embedded) })

func buildCatalog(fsys fs.FS) (*catalog, error) {
	files, err := fs.Glob(fsys, "*.avsc")
	if err != nil {
		return nil, fmt.Errorf("list embedded schemas: %w", err)
	}
	c := &catalog{byName: map[string]*Schema{}, byFP: map[uint64]*Schema{}}
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
		switch {
		case !strings.HasPrefix(s.Name, Namespace+"."):
			return nil, fmt.Errorf("embedded schema %s: name %s is outside namespace %s", file, s.Name, Namespace)
		case s.records[s.Name].fields[0] != VersionField:
			return nil, fmt.Errorf("embedded schema %s: first field must be %s", file, VersionField)
		case s.Version != fileVersion:
			return nil, fmt.Errorf("embedded schema %s: %s default %d does not match the file name", file, VersionField, s.Version)
		case c.byName[s.Name] != nil:
			return nil, fmt.Errorf("embedded schemas %s and %s are both of %s: a record type has one schema", c.byName[s.Name].File, file, s.Name)
		}
		c.byName[s.Name], c.byFP[s.Fingerprint] = s, s
		c.all = append(c.all, s)
	}
	slices.SortFunc(c.all, func(a, b *Schema) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// current returns the embedded schema of a record type.
func (c *catalog) current(name string) (*Schema, error) {
	if s := c.byName[name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("no embedded schema for %s", name)
}

// Embedded returns (copies of) every schema file of this package, ordered by record
// name: one per record type, its current version. A schema change adds the next
// version in place of the file (and bumps schema_version); a reader resolves data of
// an older writer schema it meets through the registry into the current one.
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
