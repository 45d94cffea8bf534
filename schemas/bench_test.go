package schemas

import (
	"context"
	"testing"
)

// BenchmarkEvidence measures encoding and decoding one evidence record in both
// wire formats (the registry id is resolved once, then cached).
func BenchmarkEvidence(b *testing.B) {
	ctx := context.Background()
	_, reg := inProcessRegistry(b)
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"single-object", nil},
		{"confluent", []Option{WithRegistry(reg)}},
	} {
		c, err := NewEvidenceCodec(bc.opts...)
		if err != nil {
			b.Fatal(err)
		}
		r := sampleEvidence()
		encoded, err := c.Encode(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encode/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(encoded)))
			for b.Loop() {
				if _, err := c.Encode(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("decode/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(encoded)))
			for b.Loop() {
				if _, err := c.Decode(ctx, encoded); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
