package schemas

import (
	"context"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// v0Native is sampleEvidenceNulls as a writer of testdata/evidence.v0.avsc (which has
// no actor_display_name and no ineligible_reason) would have written it.
func v0Native(t testing.TB) map[string]any {
	t.Helper()
	r := sampleEvidenceNulls()
	m := evidenceNative(t, r)
	delete(m, "actor_display_name")
	delete(m, "ineligible_reason")
	m[VersionField] = int32(0)
	return m
}

// TestDecodeOlderSchema: records of an older schema version are decoded with their
// writer schema and resolved into the current struct; the fields the writer lacked
// take the current schema's defaults (null).
func TestDecodeOlderSchema(t *testing.T) {
	ctx := context.Background()
	v0Text := mustSchemaText(t, "testdata/evidence.v0.avsc")
	v0, err := ParseSchema(v0Text)
	if err != nil {
		t.Fatal(err)
	}
	if v0.Version != 0 {
		t.Fatalf("v0 fixture has version %d", v0.Version)
	}
	native := v0Native(t)
	soe, err := v0.codec.SingleFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleEvidenceNulls()
	want.IneligibleReason = "" // the v0 writer could not say why; the default is null

	t.Run("single-object without the writer schema", func(t *testing.T) {
		c, err := NewEvidenceCodec()
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Decode(ctx, soe)
		if !errors.Is(err, ErrUnknownSchema) || !IsUnknownSchema(err) {
			t.Fatalf("error %v, want ErrUnknownSchema", err)
		}
		if ref, _ := SchemaRefOf(err); ref != FingerprintString(v0.Fingerprint) {
			t.Fatalf("schema ref %q, want the v0 fingerprint", ref)
		}
	})
	t.Run("confluent with the writer schema in the registry", func(t *testing.T) {
		fake, reg := startRegistry(t)
		id := fake.add(DefaultEvidenceTopic+"-value", v0Text)
		body, err := v0.codec.BinaryFromNative(binary.BigEndian.AppendUint32([]byte{0}, id), native)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewEvidenceCodec(WithRegistry(reg))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second decode is served from the cache
			got, err := c.Decode(ctx, body)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		}
		if n := fake.count("GET ids"); n != 1 {
			t.Fatalf("%d schema fetches, want 1", n)
		}
	})
}

func TestDecodeIncompatibleOrNewerSchema(t *testing.T) {
	ctx := context.Background()
	fake, reg := startRegistry(t)
	c, err := NewEvidenceCodec(WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}

	// A newer writer (v2 adds reaction_count): parked, not guessed at.
	v2, err := ParseSchema(mustSchemaText(t, "testdata/evidence.v2.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	n2 := evidenceNative(t, sampleEvidence())
	n2[VersionField], n2["reaction_count"] = int32(2), int32(5)
	v2ID := fake.add(DefaultEvidenceTopic+"-value", v2.JSON)
	v2Bytes, err := v2.codec.BinaryFromNative(binary.BigEndian.AppendUint32([]byte{0}, v2ID), n2)
	if err != nil {
		t.Fatal(err)
	}

	// An older writer without content_hash, which has no default.
	old, err := ParseSchema(mustSchemaText(t, "testdata/evidence.incompatible.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	n0 := evidenceNative(t, sampleEvidence())
	delete(n0, "content_hash")
	n0[VersionField] = int32(0)
	oldID := fake.add(DefaultEvidenceTopic+"-value", old.JSON)
	oldBytes, err := old.codec.BinaryFromNative(binary.BigEndian.AppendUint32([]byte{0}, oldID), n0)
	if err != nil {
		t.Fatal(err)
	}

	// A closed window registered under the evidence subject by mistake.
	windowID := fake.add(DefaultEvidenceTopic+"-value", mustSchemaText(t, "workspace.v1.avsc"))
	wc, _ := NewClosedWindowCodec()
	wb, err := wc.Encode(ctx, sampleWindow())
	if err != nil {
		t.Fatal(err)
	}
	windowBytes := append(binary.BigEndian.AppendUint32([]byte{0}, windowID), wb[10:]...)

	// A registry id that does not exist.
	unknownBytes := append([]byte{0, 0, 0, 0x30, 0x39}, oldBytes[5:]...)

	cases := []struct {
		name    string
		value   []byte
		want    error
		unknown bool
	}{
		{"newer version", v2Bytes, ErrNewerSchema, true},
		{"missing field without default", oldBytes, ErrIncompatibleSchema, false},
		{"another record type", windowBytes, ErrWrongRecordType, false},
		{"unknown id", unknownBytes, ErrUnknownSchema, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // verdicts are cached and stay the same
				_, err := c.Decode(ctx, tc.value)
				if !errors.Is(err, tc.want) {
					t.Fatalf("error %v, want %v", err, tc.want)
				}
				if IsUnknownSchema(err) != tc.unknown {
					t.Fatalf("IsUnknownSchema(%v) = %v", err, !tc.unknown)
				}
				if IsRetryable(err) {
					t.Fatalf("%v must not be retryable", err)
				}
				if ref, _ := SchemaRefOf(err); ref != ConfluentIDString(binary.BigEndian.Uint32(tc.value[1:5])) {
					t.Fatalf("schema ref %q", ref)
				}
			}
		})
	}
}
