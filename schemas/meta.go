package schemas

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// The evidence metadata contract: the keys an evidence record's metadata_json may hold,
// the content hash every producer of evidence computes, and the redaction rule (what a
// recalled or expired message keeps). Every stage that writes evidence (the Lark
// normalizer, reconciliation, the retention job) follows these, so a recall event, a
// later history read and a retention run produce the same redacted version.

// Metadata keys. An evidence record's metadata holds only these keys (design §7.4, §9:
// chat, thread, reply, type and attachment references); never tokens, never the raw
// envelope, never message text.
const (
	MetaChatID              = "chat_id"               // string
	MetaChatType            = "chat_type"             // string, absent when the transport does not say
	MetaThreadID            = "thread_id"             // string
	MetaRootID              = "root_id"               // string
	MetaParentID            = "parent_id"             // string
	MetaUpperMessageID      = "upper_message_id"      // string: merge_forward container of a child
	MetaMessageType         = "message_type"          // string
	MetaSenderType          = "sender_type"           // string: user|app|anonymous|unknown
	MetaSenderAppID         = "sender_app_id"         // string, app senders only
	MetaEdited              = "edited"                // bool, present when true
	MetaDeleted             = "deleted"               // bool, present when true
	MetaTruncated           = "truncated"             // bool, present when true
	MetaTextBytes           = "text_bytes"            // int: length of the whole text, with truncated
	MetaImageKey            = "image_key"             // string: image message, or video cover
	MetaImageKeys           = "image_keys"            // []string: images inside a post
	MetaFileKey             = "file_key"              // string: file, folder, audio, media, sticker
	MetaFileName            = "file_name"             // string
	MetaMediaFileKeys       = "media_file_keys"       // []string: videos inside a post
	MetaDurationMS          = "duration_ms"           // int64: audio and media
	MetaShareChatID         = "share_chat_id"         // string
	MetaShareUserID         = "share_user_id"         // string
	MetaTaskID              = "task_id"               // string
	MetaCalendarID          = "calendar_id"           // string
	MetaCalendarEventID     = "calendar_event_id"     // string
	MetaForwardedMessageIDs = "forwarded_message_ids" // []string: legacy merge_forward content
	MetaMentionOpenIDs      = "mention_open_ids"      // []string
	MetaMentionAll          = "mention_all"           // bool, present when true
	MetaRefsTruncated       = "refs_truncated"        // bool: a list above hit the normalizer's cap
	// MetaRetention marks a redaction made by the retention job (processors/retention),
	// not a recall: present, true, only there. A recall withdraws the AI drafts citing
	// the message; retention leaves entries alone (decisions D12).
	MetaRetention = "retention"
)

// MetaKeys returns every metadata key above, in declaration order (a new slice).
func MetaKeys() []string {
	return []string{
		MetaChatID, MetaChatType, MetaThreadID, MetaRootID, MetaParentID, MetaUpperMessageID,
		MetaMessageType, MetaSenderType, MetaSenderAppID, MetaEdited, MetaDeleted, MetaTruncated,
		MetaTextBytes, MetaImageKey, MetaImageKeys, MetaFileKey, MetaFileName, MetaMediaFileKeys,
		MetaDurationMS, MetaShareChatID, MetaShareUserID, MetaTaskID, MetaCalendarID,
		MetaCalendarEventID, MetaForwardedMessageIDs, MetaMentionOpenIDs, MetaMentionAll,
		MetaRefsTruncated, MetaRetention,
	}
}

// redactionKeptKeys are the metadata keys a redacted message keeps: structure and
// identity, nothing derived from content.
var redactionKeptKeys = []string{
	MetaChatID, MetaChatType, MetaThreadID, MetaRootID, MetaParentID, MetaUpperMessageID,
	MetaMessageType, MetaSenderType, MetaSenderAppID,
}

// RedactionKeptKeys returns the metadata keys a redaction keeps, besides MetaDeleted
// (always set) and MetaRetention (set by the retention job): a new slice.
func RedactionKeptKeys() []string { return append([]string(nil), redactionKeptKeys...) }

// RedactMetadata returns the metadata of the redacted version of a message whose
// metadata is md: the kept keys of md and MetaDeleted true. md is not modified.
func RedactMetadata(md map[string]any) map[string]any {
	out := make(map[string]any, len(redactionKeptKeys)+1)
	for _, k := range redactionKeptKeys {
		if v, ok := md[k]; ok {
			out[k] = v
		}
	}
	out[MetaDeleted] = true
	return out
}

// contentHashDomain versions the canonical encoding. Changing what is hashed or how
// text is rendered must change it, so that old and new hashes never collide by accident.
const contentHashDomain = "larkline/lark-message-content/v1"

// ContentRef is one semantic reference of a message's content (an attachment key, a
// file name, a shared chat id, …), part of its content hash.
type ContentRef struct {
	Name  string
	Value string
}

// ContentHash is the hex SHA-256 of the canonical encoding of a message's semantic
// content: the message type, the SHA-256 of the whole cleaned text (before truncation),
// the refs in order, and the deletion flag. Every field is length-prefixed, so no two
// different contents share an encoding. Ids, timestamps, sender, chat type and mention
// ids are deliberately absent: a redelivery, or the same message read from history
// instead of the event, hashes the same; an edit or a recall does not.
func ContentHash(messageType string, textDigest [sha256.Size]byte, refs []ContentRef, deleted bool) string {
	b := make([]byte, 0, 128+len(refs)*48)
	b = appendHashField(b, contentHashDomain)
	b = appendHashField(b, messageType)
	b = append(b, textDigest[:]...)
	b = binary.AppendUvarint(b, uint64(len(refs)))
	for _, r := range refs {
		b = appendHashField(b, r.Name)
		b = appendHashField(b, r.Value)
	}
	if deleted {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// emptyTextDigest is the SHA-256 of the empty text, the text of every redacted message.
var emptyTextDigest = sha256.Sum256(nil)

// RedactedContentHash is the content hash of every redaction of a message of type
// messageType: no text, no refs, deleted. It differs from every non-deleted version's
// and is the same for a recall event, a later history read and a retention run.
func RedactedContentHash(messageType string) string {
	return ContentHash(messageType, emptyTextDigest, nil, true)
}

func appendHashField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
