package schemas

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
	"testing"
)

func TestRedactMetadata(t *testing.T) {
	in := map[string]any{}
	for _, k := range MetaKeys() {
		in[k] = "x"
	}
	before := maps.Clone(in)
	got := RedactMetadata(in)
	if !maps.Equal(in, before) {
		t.Fatal("RedactMetadata modified its input")
	}
	want := map[string]any{MetaDeleted: true}
	for _, k := range []string{MetaChatID, MetaChatType, MetaThreadID, MetaRootID, MetaParentID,
		MetaUpperMessageID, MetaMessageType, MetaSenderType, MetaSenderAppID} {
		want[k] = "x"
	}
	if !maps.Equal(got, want) {
		t.Errorf("RedactMetadata kept %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if got := RedactMetadata(nil); len(got) != 1 || got[MetaDeleted] != true {
		t.Errorf("RedactMetadata(nil) = %v", got)
	}
	keys := RedactionKeptKeys()
	keys[0] = "changed"
	if RedactionKeptKeys()[0] == "changed" {
		t.Error("RedactionKeptKeys returned the package's own slice")
	}
}

// TestRedactedContentHashGolden pins the hash of a redaction, recomputed from the
// documented encoding: the domain, the type, the digest of "", no refs, deleted.
func TestRedactedContentHashGolden(t *testing.T) {
	field := func(b []byte, s string) []byte {
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	for _, mt := range []string{"text", "image", "post"} {
		empty := sha256.Sum256(nil)
		var enc []byte
		enc = field(enc, "larkline/lark-message-content/v1")
		enc = field(enc, mt)
		enc = append(enc, empty[:]...)
		enc = binary.AppendUvarint(enc, 0)
		enc = append(enc, 1)
		sum := sha256.Sum256(enc)
		if got, want := RedactedContentHash(mt), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("RedactedContentHash(%q) = %s, want %s", mt, got, want)
		}
		if RedactedContentHash(mt) == ContentHash(mt, empty, nil, false) {
			t.Errorf("%s: a redaction hashes like an empty live message", mt)
		}
	}
}
