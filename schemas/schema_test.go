package schemas

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/linkedin/goavro/v2"
)

// TestReleasedSchemasAreImmutable pins the fingerprint of every schema. A failure
// here means an .avsc was edited: make it the next version (file name and
// schema_version default) and pin it here; registry readers resolve the older one.
func TestReleasedSchemasAreImmutable(t *testing.T) {
	released := map[string]uint64{
		"evidence.v1.avsc":      0xc662c2202ab1ca98,
		"window_closed.v3.avsc": 0x70e4a26c4787c704,
		"checkpoint.v2.avsc":    0xdd72f0bca875429d,
		"workspace.v1.avsc":     0x41cc66501b2b397b,
		"deadletter.v1.avsc":    0xb348ac3f6034b59b,
	}
	all, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(released) {
		t.Fatalf("%d embedded schemas, %d pinned: pin every new version", len(all), len(released))
	}
	for _, s := range all {
		t.Run(s.File, func(t *testing.T) {
			want, ok := released[s.File]
			if !ok {
				t.Fatalf("%s is not pinned", s.File)
			}
			if s.Fingerprint != want {
				t.Fatalf("fingerprint %#016x, pinned %#016x: a released schema changed", s.Fingerprint, want)
			}
			if got := crc64Avro([]byte(s.Canonical)); got != s.Fingerprint {
				t.Fatalf("goavro fingerprint %#016x, CRC-64-AVRO of the canonical form %#016x", s.Fingerprint, got)
			}
			if !strings.HasPrefix(s.Name, Namespace+".") || s.Version < 1 || s.fields[0] != VersionField {
				t.Fatalf("schema %s version %d fields %v", s.Name, s.Version, s.fields)
			}
		})
	}
}

// crc64Avro is the reference implementation from the Avro specification.
func crc64Avro(buf []byte) uint64 {
	const empty = 0xc15d213aa4d7a795
	var table [256]uint64
	for i := range table {
		fp := uint64(i)
		for range 8 {
			fp = (fp >> 1) ^ (empty & -(fp & 1))
		}
		table[i] = fp
	}
	fp := uint64(empty)
	for _, b := range buf {
		fp = (fp >> 8) ^ table[byte(fp)^b]
	}
	return fp
}

func TestFingerprintMatchesSpecVector(t *testing.T) {
	// The Avro specification's test vector: CRC-64-AVRO of the canonical form "null".
	c, err := goavro.NewCodec(`"null"`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rabin != 7195948357588979594 || crc64Avro([]byte(`"null"`)) != 7195948357588979594 {
		t.Fatalf("fingerprint of null: goavro %d, reference %d", c.Rabin, crc64Avro([]byte(`"null"`)))
	}
}

func TestBuildCatalogRejects(t *testing.T) {
	const rec = `{"type":"record","name":"X","namespace":"io.larkline","fields":[{"name":"schema_version","type":"int","default":%s},{"name":"a","type":"string"}]}`
	v := func(n string) []byte { return []byte(strings.Replace(rec, "%s", n, 1)) }
	cases := []struct {
		name    string
		files   fstest.MapFS
		wantErr string
	}{
		{"bad file name", fstest.MapFS{"x.avsc": {Data: v("1")}}, "file name"},
		{"version mismatch", fstest.MapFS{"x.v2.avsc": {Data: v("1")}}, "does not match"},
		{"not json", fstest.MapFS{"x.v1.avsc": {Data: []byte("{")}}, "parse avro schema"},
		{"not a record", fstest.MapFS{"x.v1.avsc": {Data: []byte(`"string"`)}}, "not a record"},
		{"outside namespace", fstest.MapFS{"x.v1.avsc": {Data: []byte(strings.Replace(string(v("1")), "io.larkline", "com.example", 1))}}, "outside namespace"},
		{"no version field", fstest.MapFS{"x.v1.avsc": {Data: []byte(`{"type":"record","name":"X","namespace":"io.larkline","fields":[{"name":"a","type":"string"}]}`)}}, "first field"},
		{"no fields", fstest.MapFS{"x.v1.avsc": {Data: []byte(`{"type":"record","name":"X","namespace":"io.larkline","fields":[]}`)}}, "first field"},
		{"version not integer", fstest.MapFS{"x.v1.avsc": {Data: v("1.5")}}, "integer default"},
		{"two versions of one type", fstest.MapFS{"x.v1.avsc": {Data: v("1")}, "x.v2.avsc": {Data: []byte(strings.Replace(string(v("2")), `"string"`, `"long"`, 1))}}, "are both of io.larkline.X"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildCatalog(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseSchemaVersion(t *testing.T) {
	cases := []struct {
		name    string
		field   string
		version int
		wantErr bool
	}{
		{"none", `{"name":"a","type":"string"}`, 0, false},
		{"int", `{"name":"schema_version","type":"int","default":3}`, 3, false},
		{"no default", `{"name":"schema_version","type":"int"}`, 0, true},
		{"string", `{"name":"schema_version","type":"string","default":"3"}`, 0, true},
		{"negative", `{"name":"schema_version","type":"int","default":-1}`, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchema(`{"type":"record","name":"T","fields":[` + tc.field + `]}`)
			if tc.wantErr {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil || s.Version != tc.version {
				t.Fatalf("version %v, err %v", s, err)
			}
		})
	}
}

func TestErrorHelpers(t *testing.T) {
	de := &DecodeError{Record: NameEvidenceRecord, Format: Confluent, SchemaID: 42, Err: ErrNewerSchema}
	wrapped := errors.Join(errors.New("context"), de)
	if ref, ok := SchemaRefOf(wrapped); !ok || ref != "confluent-id:42" {
		t.Fatalf("SchemaRefOf = %q %v", ref, ok)
	}
	if !IsUnknownSchema(wrapped) || ReasonOf(wrapped) != ReasonNewerSchema {
		t.Fatalf("IsUnknownSchema/ReasonOf of %v", wrapped)
	}
	if _, ok := SchemaRefOf(errors.New("plain")); ok {
		t.Fatal("plain error has a schema ref")
	}
	if got := (&DecodeError{Record: "R", Err: ErrMalformed}).Error(); got != "decode R: malformed record bytes" {
		t.Fatalf("error text %q", got)
	}
	if got := WireFormat(7).String(); got != "WireFormat(7)" {
		t.Fatal(got)
	}
}
