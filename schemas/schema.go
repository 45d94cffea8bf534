package schemas

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/linkedin/goavro/v2"
)

// Namespace is the Avro namespace of every larkline schema.
const Namespace = "io.larkline"

// VersionField is the first field of every larkline record schema; its default is
// the schema's version.
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

var fileNamePattern = regexp.MustCompile(`^([a-z][a-z0-9_]*)\.v([0-9]+)\.avsc$`)

// Schema is one parsed Avro record schema.
type Schema struct {
	File        string // embedded file name (evidence.v1.avsc); "" when from a registry
	Name        string // full Avro name
	Version     int    // default of schema_version; 0 when the schema has none
	JSON        string // the text as written
	Canonical   string // Avro parsing canonical form
	Fingerprint uint64 // CRC-64-AVRO of Canonical, as the single-object encoding carries

	codec    *goavro.Codec
	fields   []string          // the record's field names, in order
	defaults map[string]any    // field defaults: what a reader takes for a field its writer lacked
	nullable map[string]string // field → X of its ["null", X] union type
}

// maxGoavroBlockCount bounds an array or map block goavro decodes, so no count in
// corrupted bytes makes it allocate without bound (a record is at most a few MiB).
// goavro's limit is process-wide; larkline is its only user.
const maxGoavroBlockCount = 1 << 20

func init() { goavro.MaxBlockCount = maxGoavroBlockCount }

// ParseSchema parses an Avro schema whose top-level type is a record.
func ParseSchema(schemaJSON string) (*Schema, error) {
	codec, err := goavro.NewCodec(schemaJSON)
	if err != nil {
		return nil, fmt.Errorf("parse avro schema: %w", err)
	}
	var raw struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		Fields    []struct {
			Name    string          `json:"name"`
			Type    any             `json:"type"`
			Default json.RawMessage `json:"default"` // "null" for a null default
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schemaJSON), &raw); err != nil || raw.Type != "record" {
		return nil, fmt.Errorf("parse avro schema: top-level type is not a record")
	}
	s := &Schema{JSON: schemaJSON, Canonical: codec.CanonicalSchema(), Fingerprint: codec.Rabin, codec: codec,
		Name: raw.Name, defaults: map[string]any{}, nullable: map[string]string{}}
	if raw.Namespace != "" && !strings.Contains(raw.Name, ".") {
		s.Name = raw.Namespace + "." + raw.Name
	}
	for _, f := range raw.Fields {
		s.fields = append(s.fields, f.Name)
		if u, ok := f.Type.([]any); ok && len(u) == 2 && u[0] == "null" {
			s.nullable[f.Name], _ = u[1].(string)
		}
		if len(f.Default) > 0 {
			var def any
			_ = json.Unmarshal(f.Default, &def) // valid JSON: goavro parsed it
			s.defaults[f.Name] = def
		}
	}
	if slices.Contains(s.fields, VersionField) {
		v, ok := s.defaults[VersionField].(float64)
		if !ok || v != float64(int(v)) || v < 0 {
			return nil, fmt.Errorf("parse avro schema %s: field %s must have a non-negative integer default", s.Name, VersionField)
		}
		s.Version = int(v)
	}
	return s, nil
}

// FingerprintString formats a single-object fingerprint: avro-crc64:<16 hex digits>.
func FingerprintString(fp uint64) string { return fmt.Sprintf("avro-crc64:%016x", fp) }

// ConfluentIDString formats a schema registry id: confluent-id:<id>.
func ConfluentIDString(id uint32) string { return "confluent-id:" + strconv.FormatUint(uint64(id), 10) }

// catalog is the embedded schemas: one file per record type, its current version.
type catalog struct {
	all    []*Schema // sorted by name
	byName map[string]*Schema
}

var loadCatalog = sync.OnceValues(func() (*catalog, error) { return buildCatalog(embedded) })

func buildCatalog(fsys fs.FS) (*catalog, error) {
	files, err := fs.Glob(fsys, "*.avsc")
	if err != nil {
		return nil, fmt.Errorf("list embedded schemas: %w", err)
	}
	c := &catalog{byName: map[string]*Schema{}}
	for _, file := range files {
		m := fileNamePattern.FindStringSubmatch(file)
		if m == nil {
			return nil, fmt.Errorf("embedded schema %s: file name is not <name>.v<version>.avsc", file)
		}
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
		case len(s.fields) == 0 || s.fields[0] != VersionField:
			return nil, fmt.Errorf("embedded schema %s: first field must be %s", file, VersionField)
		case strconv.Itoa(s.Version) != m[2]:
			return nil, fmt.Errorf("embedded schema %s: %s default %d does not match the file name", file, VersionField, s.Version)
		case c.byName[s.Name] != nil:
			return nil, fmt.Errorf("embedded schemas %s and %s are both of %s: a record type has one schema", c.byName[s.Name].File, file, s.Name)
		}
		c.byName[s.Name] = s
		c.all = append(c.all, s)
	}
	slices.SortFunc(c.all, func(a, b *Schema) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// Embedded returns (copies of) every schema file of this package, ordered by record
// name: one per record type, its current version.
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
