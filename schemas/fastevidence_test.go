package schemas

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// agreeFastSlow decodes b with the evidence codec's own decoder and with goavro, and
// fails unless both give the same record or an error of the same kind.
func agreeFastSlow(t *testing.T, fast *Codec[EvidenceRecord], b []byte) {
	t.Helper()
	ctx := context.Background()
	fv, ferr := fast.Decode(ctx, b)
	sv, serr := fast.slow().Decode(ctx, b)
	switch {
	case (ferr == nil) != (serr == nil):
		t.Fatalf("fast and goavro paths disagree on %x:\n fast:   %v\n goavro: %v", b, ferr, serr)
	case ferr != nil:
		if ReasonOf(ferr) != ReasonOf(serr) || errors.Is(ferr, ErrInvalidRecord) != errors.Is(serr, ErrInvalidRecord) {
			t.Fatalf("fast and goavro paths fail differently on %x:\n fast:   %v\n goavro: %v", b, ferr, serr)
		}
	case !reflect.DeepEqual(fv, sv):
		t.Fatalf("fast and goavro paths decode %x differently:\n fast:   %+v\n goavro: %+v", b, fv, sv)
	}
}

func evidenceSeeds(t testing.TB, c *Codec[EvidenceRecord]) [][]byte {
	var out [][]byte
	deleted := sampleEvidence()
	deleted.Deleted, deleted.Content, deleted.SynthesisEligible, deleted.IneligibleReason = true, "", false, IneligibleDeleted
	for _, r := range []EvidenceRecord{sampleEvidence(), sampleEvidenceNulls(), deleted} {
		b, err := c.Encode(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestEvidenceFastDecodeAgrees: the evidence codec's own decoder is in use for the
// current schema and agrees with goavro on valid records and on 30,000 mutations of
// them (flipped bytes, truncations, insertions).
func TestEvidenceFastDecodeAgrees(t *testing.T) {
	c, err := NewEvidenceCodec()
	if err != nil {
		t.Fatal(err)
	}
	if !c.fast {
		t.Fatal("the evidence codec does not use its own decoder for the current schema")
	}
	seeds := evidenceSeeds(t, c)
	for _, b := range seeds {
		agreeFastSlow(t, c, b)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 30_000 {
		b := append([]byte(nil), seeds[i%len(seeds)]...)
		switch rng.IntN(4) {
		case 0: // flip a body byte
			p := 10 + rng.IntN(len(b)-10)
			b[p] ^= byte(1 + rng.IntN(255))
		case 1: // truncate
			b = b[:10+rng.IntN(len(b)-10)]
		case 2: // insert a byte
			p := 10 + rng.IntN(len(b)-10)
			b = append(b[:p], append([]byte{byte(rng.IntN(256))}, b[p:]...)...)
		case 3: // set a byte to a small value (lengths, indexes, booleans)
			p := 10 + rng.IntN(len(b)-10)
			b[p] = byte(rng.IntN(4))
		}
		agreeFastSlow(t, c, b)
	}
}

// FuzzEvidenceFastDecode explores the agreement further:
// go test -fuzz FuzzEvidenceFastDecode ./schemas
func FuzzEvidenceFastDecode(f *testing.F) {
	c, err := NewEvidenceCodec()
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range evidenceSeeds(f, c) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { agreeFastSlow(t, c, b) })
}
