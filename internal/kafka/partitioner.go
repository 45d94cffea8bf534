package kafka

import (
	"hash"
	"hash/fnv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/schemas/ids"
)

// The partition of a record with key k among n partitions is
//
//	h := ChatHash(k)               // FNV-1a 32 of ids.PartitionKey(k), 0x80000000 folded to 0
//	p := int32(h) % n; if p < 0 { p = -p }
//
// which is exactly what sarama's NewCustomHashPartitioner (Goka's producers and
// emitters) computes when handed NewHasher, and what Goka's processors and views
// compute (|int32(h)| % n) when they look a key up. The two formulas differ only for
// h == 0x80000000, whose negation overflows int32; ChatHash never returns that value,
// so every component agrees on every key.
//
// FNV-1a of the chat key is also sarama's and Goka's default hash, so a plain sarama
// producer that keys records by <workspace>/<chat> lands on the same partitions.

// minInt32Hash is the one 32-bit hash value for which Goka's lookup arithmetic and
// sarama's partitioner disagree.
const minInt32Hash = 0x80000000

// ChatHash is the 32-bit hash that places a record: FNV-1a over ids.PartitionKey(key)
// (everything before the second '/'), with 0x80000000 folded to 0.
func ChatHash(key []byte) uint32 {
	h := fnv.New32a()
	_, _ = h.Write(ids.PartitionKey(key)) // hash.Hash never returns an error
	return fold(h.Sum32())
}

func fold(h uint32) uint32 {
	if h == minInt32Hash {
		return 0
	}
	return h
}

// Partition returns the partition of key among partitions partitions. partitions must
// be positive; for anything else Partition returns -1, which no topic has.
func Partition(key []byte, partitions int32) int32 {
	if partitions < 1 {
		return -1
	}
	p := int32(ChatHash(key)) % partitions
	if p < 0 {
		p = -p
	}
	return p
}

// Partitioner is the franz-go partitioner of every larkline producer: a keyed record
// goes to Partition(key, n). Keyless records (larkline writes none) are spread by
// franz-go's sticky partitioner.
func Partitioner() kgo.Partitioner {
	return kgo.StickyKeyPartitioner(func(key []byte, n int) int {
		return int(Partition(key, int32(n)))
	})
}

// NewHasher returns the hash.Hash32 to give Goka (goka.WithHasher, WithViewHasher,
// WithEmitterHasher); Hasher is the constructor in the form Goka takes. Its Sum32 is
// ChatHash of everything written since the last Reset, so it hashes only the partition
// key part of a record key. Writes are buffered until Sum32 because the partition key
// is known only once the whole key is written.
func NewHasher() hash.Hash32 { return &chatHasher{} }

// Hasher is NewHasher in the form goka.WithHasher expects.
func Hasher() func() hash.Hash32 { return NewHasher }

type chatHasher struct {
	buf []byte
}

func (h *chatHasher) Write(p []byte) (int, error) {
	h.buf = append(h.buf, p...)
	return len(p), nil
}

func (h *chatHasher) Sum32() uint32 { return ChatHash(h.buf) }

// Sum appends the big-endian Sum32 to b, like hash/fnv.
func (h *chatHasher) Sum(b []byte) []byte {
	s := h.Sum32()
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

func (h *chatHasher) Reset()         { h.buf = h.buf[:0] }
func (h *chatHasher) Size() int      { return 4 }
func (h *chatHasher) BlockSize() int { return 1 }
