package schemas

import (
	"context"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// fuzzCheck decodes b with c and checks the decoder's contract: a typed error, or a
// valid record that survives a second round trip unchanged.
func fuzzCheck[T any](t *testing.T, c *Codec[T], validate func(*T) error, b []byte) {
	ctx := context.Background()
	v, err := c.Decode(ctx, b)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) || ReasonOf(err) == ReasonOther {
			t.Fatalf("untyped decode error %T: %v", err, err)
		}
		if IsRetryable(err) {
			t.Fatalf("an in-process registry made a retryable error: %v", err)
		}
		return
	}
	if err := validate(&v); err != nil {
		t.Fatalf("decoded an invalid record: %v", err)
	}
	again, err := c.Encode(ctx, v)
	if err != nil {
		t.Fatalf("re-encode a decoded record: %v", err)
	}
	v2, err := c.Decode(ctx, again)
	if err != nil {
		t.Fatalf("decode a re-encoded record: %v", err)
	}
	if !reflect.DeepEqual(v, v2) {
		t.Fatalf("second round trip changed the record\n%+v\n%+v", v, v2)
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder of every record type. `go test`
// runs the seed corpus only; run `go test -fuzz FuzzDecode ./schemas` to explore.
func FuzzDecode(f *testing.F) {
	ctx := context.Background()
	fake, reg := inProcessRegistry(f)
	v0 := mustSchemaText(f, "testdata/evidence.v0.avsc")
	// Decoders with the registry (they read both formats); the seeds are written in
	// the single-object encoding by codecs without one.
	c, err := NewCodecs(Topics{}, WithRegistry(reg))
	if err != nil {
		f.Fatal(err)
	}
	w, err := NewCodecs(Topics{})
	if err != nil {
		f.Fatal(err)
	}
	evidence, windows, checkpoints, workspaces, deadLetters := c.Evidence, c.ClosedWindow, c.Checkpoint, c.Workspace, c.DeadLetter
	v0ID := fake.add(DefaultEvidenceTopic+"-value", v0)

	add := func(b []byte, err error) {
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// Also the same body in the Confluent format, once the schema is registered.
		if len(b) > 10 {
			fp := binary.LittleEndian.Uint64(b[2:10])
			for _, s := range mustEmbedded(f) {
				if s.Fingerprint == fp {
					id := fake.add(s.Name+"-value", s.JSON)
					f.Add(append(binary.BigEndian.AppendUint32([]byte{0}, id), b[10:]...))
				}
			}
			f.Add(b[:len(b)/2])
		}
	}
	add(w.Evidence.Encode(ctx, sampleEvidence()))
	add(w.Evidence.Encode(ctx, sampleEvidenceNulls()))
	add(w.Evidence.Encode(ctx, sampleEvidenceDeleted()))
	add(w.ClosedWindow.Encode(ctx, sampleWindow()))
	add(w.Checkpoint.Encode(ctx, sampleCheckpoint()))
	add(w.Checkpoint.Encode(ctx, sampleCheckpointEmpty()))
	add(w.Workspace.Encode(ctx, sampleWorkspace()))
	add(w.DeadLetter.Encode(ctx, sampleDeadLetter()))
	v0Schema, err := ParseSchema(v0)
	if err != nil {
		f.Fatal(err)
	}
	n := v0Native(f)
	soe0, err := v0Schema.codec.SingleFromNative(nil, n)
	add(soe0, err)
	f.Add(append(binary.BigEndian.AppendUint32([]byte{0}, v0ID), soe0[10:]...))
	f.Add([]byte{})
	f.Add([]byte{0xC3, 0x01})
	f.Add([]byte{0, 0, 0, 0, 99, 2})
	f.Add([]byte(`{"workspace_id":"ws"}`))

	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzCheck(t, evidence, (*EvidenceRecord).Validate, b)
		fuzzCheck(t, windows, (*ClosedWindow).Validate, b)
		fuzzCheck(t, checkpoints, (*CollectionCheckpoint).Validate, b)
		fuzzCheck(t, workspaces, (*WorkspaceRecord).Validate, b)
		fuzzCheck(t, deadLetters, (*DeadLetter).Validate, b)
	})
}

func mustEmbedded(t testing.TB) []Schema {
	t.Helper()
	all, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return all
}
