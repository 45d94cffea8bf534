package kafka

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/schemas/ids"
)

// gokaLookup is the arithmetic of goka's Processor.hash and View.hash (v1.1.14), used
// when Goka looks a key up in a table: |int32(h)| % n.
func gokaLookup(key []byte, n int32) int32 {
	h := NewHasher()
	_, _ = h.Write(key)
	v := int32(h.Sum32())
	if v < 0 {
		v = -v
	}
	return v % n
}

// saramaPartition runs sarama's own NewCustomHashPartitioner with our hasher, as Goka's
// producer builders install it.
func saramaPartition(t *testing.T, p sarama.Partitioner, key []byte, n int32) int32 {
	t.Helper()
	got, err := p.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(key)}, n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func randomID(r *rand.Rand, prefix string) string {
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:"
	b := []byte(prefix)
	for n := 1 + r.IntN(40); n > 0; n-- {
		b = append(b, alpha[r.IntN(len(alpha))])
	}
	return string(b)
}

// collidingChatKey is a chat key whose FNV-1a 32 hash is 0x80000000 (found by an
// exhaustive search; the test below re-checks it), the one value for which Goka's
// lookup arithmetic and sarama's partitioner would disagree without the fold.
const collidingChatKey = "ws-fnv/oc_be223rh"

func TestPartitionAgreesWithSaramaGokaAndFranz(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	counts := []int32{1, 2, 3, 5, 6, 7, 8, 12, 16, 24, 31, 32, 50, 64, 100, 127, 1000, 4096}
	sp := sarama.NewCustomHashPartitioner(Hasher())("topic")
	fp := Partitioner().ForTopic("topic")

	keys := [][]byte{[]byte(collidingChatKey), []byte(collidingChatKey + "/om_x")}
	for i := 0; i < 3000; i++ {
		w := ids.WorkspaceID(randomID(r, ""))
		c := ids.ChatID(randomID(r, "oc_"))
		m := ids.MessageID(randomID(r, "om_"))
		keys = append(keys, []byte(ids.EvidenceKey(w, c, m)), []byte(ids.ChatKey(w, c)))
	}
	for _, n := range counts {
		t.Run(fmt.Sprintf("partitions=%d", n), func(t *testing.T) {
			for _, k := range keys {
				want := Partition(k, n)
				if want < 0 || want >= n {
					t.Fatalf("Partition(%q, %d) = %d, out of range", k, n, want)
				}
				if got := saramaPartition(t, sp, k, n); got != want {
					t.Fatalf("sarama partition of %q among %d = %d, Partition = %d", k, n, got, want)
				}
				if got := gokaLookup(k, n); got != want {
					t.Fatalf("goka lookup of %q among %d = %d, Partition = %d", k, n, got, want)
				}
				if got := fp.Partition(&kgo.Record{Key: k}, int(n)); got != int(want) {
					t.Fatalf("franz-go partition of %q among %d = %d, Partition = %d", k, n, got, want)
				}
			}
		})
	}
}

func TestMessagesOfOneChatShareThePartitionOfTheChatKey(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		w := ids.WorkspaceID(randomID(r, ""))
		c := ids.ChatID(randomID(r, "oc_"))
		n := int32(1 + r.IntN(128))
		want := Partition([]byte(ids.ChatKey(w, c)), n)
		for j := 0; j < 20; j++ {
			key := ids.EvidenceKey(w, c, ids.MessageID(randomID(r, "om_")))
			if got := Partition([]byte(key), n); got != want {
				t.Fatalf("message key %q -> partition %d, its chat key -> %d (n=%d)", key, got, want, n)
			}
		}
	}
}

func TestChatHash(t *testing.T) {
	fnvOf := func(s string) uint32 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(s))
		return h.Sum32()
	}
	if got := fnvOf(collidingChatKey); got != minInt32Hash {
		t.Fatalf("fixture %q: FNV-1a = %#x, want %#x; the fixture is wrong", collidingChatKey, got, uint32(minInt32Hash))
	}
	tests := []struct {
		name string
		key  string
		want uint32
	}{
		{"evidence key hashes its chat key", "ws1/oc_a/om_b", fnvOf("ws1/oc_a")},
		{"chat key hashes whole", "ws1/oc_a", fnvOf("ws1/oc_a")},
		{"key without separator hashes whole", "plain", fnvOf("plain")},
		{"extra separators after the second are ignored", "ws1/oc_a/om_b/extra", fnvOf("ws1/oc_a")},
		{"empty key", "", fnvOf("")},
		{"0x80000000 folds to 0", collidingChatKey, 0},
		{"0x80000000 folds to 0 for its messages too", collidingChatKey + "/om_1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChatHash([]byte(tt.key)); got != tt.want {
				t.Fatalf("ChatHash(%q) = %#x, want %#x", tt.key, got, tt.want)
			}
		})
	}
}

func TestPartitionRejectsNonPositiveCounts(t *testing.T) {
	for _, n := range []int32{0, -1, -100} {
		if got := Partition([]byte("ws/oc_a"), n); got != -1 {
			t.Fatalf("Partition(_, %d) = %d, want -1", n, got)
		}
	}
}

func TestHasherBuffersWritesAndResets(t *testing.T) {
	h := NewHasher()
	if h.Size() != 4 || h.BlockSize() != 1 {
		t.Fatalf("Size, BlockSize = %d, %d; want 4, 1", h.Size(), h.BlockSize())
	}
	// Written in pieces that split the separators.
	for _, part := range []string{"ws", "1/oc", "_a/", "om", "_b"} {
		_, _ = h.Write([]byte(part))
	}
	want := ChatHash([]byte("ws1/oc_a"))
	if got := h.Sum32(); got != want {
		t.Fatalf("Sum32 after split writes = %#x, want %#x", got, want)
	}
	if got, exp := h.Sum([]byte{9}), []byte{9, byte(want >> 24), byte(want >> 16), byte(want >> 8), byte(want)}; !bytes.Equal(got, exp) {
		t.Fatalf("Sum = %x, want %x", got, exp)
	}
	h.Reset()
	_, _ = h.Write([]byte("other/oc_z/om_1"))
	if got, want := h.Sum32(), ChatHash([]byte("other/oc_z")); got != want {
		t.Fatalf("Sum32 after Reset = %#x, want %#x (Reset must clear earlier writes)", got, want)
	}
	if a, b := NewHasher(), NewHasher(); a == b {
		t.Fatal("NewHasher returned a shared hasher")
	}
}
