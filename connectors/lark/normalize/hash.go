package normalize

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// hashDomain versions the canonical encoding. Changing what is hashed or how text is
// rendered must change it, so that old and new hashes never collide by accident.
const hashDomain = "larkline/lark-message-content/v1"

// ref is one semantic reference of a message's content (an attachment key, a file
// name, a shared chat id, …). refs are part of the content hash and of the metadata.
type ref struct {
	name  string
	value string
}

// emptyTextDigest is the SHA-256 of the empty text, the text of every deleted message.
var emptyTextDigest = sha256.Sum256(nil)

// contentHash is the hex SHA-256 of the canonical encoding of a message's semantic
// content: the message type, the SHA-256 of the whole cleaned text (before truncation),
// the refs in order, and the deletion flag. Every field is length-prefixed, so no two
// different contents share an encoding. Ids, timestamps, sender, chat type and mention
// ids are deliberately absent: a redelivery, or the same message read from history
// instead of the event, hashes the same; an edit or a recall does not.
func contentHash(messageType string, textDigest [sha256.Size]byte, refs []ref, deleted bool) string {
	b := make([]byte, 0, 128+len(refs)*48)
	b = appendField(b, hashDomain)
	b = appendField(b, messageType)
	b = append(b, textDigest[:]...)
	b = binary.AppendUvarint(b, uint64(len(refs)))
	for _, r := range refs {
		b = appendField(b, r.name)
		b = appendField(b, r.value)
	}
	if deleted {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
