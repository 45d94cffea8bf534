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

// BenchmarkEvidenceDecodePaths: the evidence codec's own decoder (fastevidence.go)
// against goavro's generic decode of the same Confluent value, side by side; the
// window processor and the evidence sink decode every evidence record this way.
func BenchmarkEvidenceDecodePaths(b *testing.B) {
	ctx := context.Background()
	_, reg := inProcessRegistry(b)
	c, err := NewEvidenceCodec(WithRegistry(reg))
	if err != nil {
		b.Fatal(err)
	}
	encoded, err := c.Encode(ctx, sampleEvidence())
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []struct {
		name  string
		codec *Codec[EvidenceRecord]
	}{{"fast", c}, {"goavro", c.slow()}} {
		if _, err := p.codec.Decode(ctx, encoded); err != nil { // resolve the id once
			b.Fatal(err)
		}
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(encoded)))
			for b.Loop() {
				if _, err := p.codec.Decode(ctx, encoded); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
