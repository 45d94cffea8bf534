package synthesis

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

// Keys of an evidence row's metadata_json that the worker reads: the normalizer's
// whitelist (connectors/lark/normalize Meta*; a test keeps them equal). Anything else
// in the metadata is ignored.
const (
	metaThreadID    = "thread_id"
	metaRootID      = "root_id"
	metaParentID    = "parent_id"
	metaMessageType = "message_type"
	metaSenderType  = "sender_type"

	// senderTypeApp marks a message sent by an application (a bot).
	senderTypeApp = "app"
)

// evidenceMeta is the part of metadata_json the worker reads.
type evidenceMeta struct {
	ThreadID    string `json:"thread_id"`
	RootID      string `json:"root_id"`
	ParentID    string `json:"parent_id"`
	MessageType string `json:"message_type"`
	SenderType  string `json:"sender_type"`
}

// messageIDOf returns the message id of a Lark message source key
// chat/<chat>/message/<message> (ids.MessageSourceKey).
func messageIDOf(chat ids.ChatID, sourceKey string) (ids.MessageID, error) {
	prefix := ids.MessageSourceKey(chat, "")
	if !strings.HasPrefix(sourceKey, prefix) {
		return "", fmt.Errorf("evidence source key is not a message of chat %s", chat)
	}
	return ids.ParseMessageID(sourceKey[len(prefix):])
}

// toMessage turns an evidence row of chat into what a synthesizer sees. Metadata that
// is not a JSON object of strings where strings are expected is ignored field by field
// (the message then simply has no thread or type); the type defaults to text.
func toMessage(chat ids.ChatID, e store.Evidence, context bool) (synth.Message, error) {
	msgID, err := messageIDOf(chat, e.SourceKey)
	if err != nil {
		return synth.Message{}, fmt.Errorf("evidence %d: %w", e.ID, err)
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(e.Metadata, &raw) // a bad document leaves raw empty
	str := func(k string) string {
		var s string
		if v, ok := raw[k]; ok && json.Unmarshal(v, &s) == nil {
			return s
		}
		return ""
	}
	m := evidenceMeta{
		ThreadID: str(metaThreadID), RootID: str(metaRootID), ParentID: str(metaParentID),
		MessageType: str(metaMessageType), SenderType: str(metaSenderType),
	}
	if m.MessageType == "" {
		m.MessageType = synth.MessageTypeText
	}
	// A root or parent that is not a valid message id, or that names the message
	// itself, links nothing.
	if _, err := ids.ParseMessageID(m.RootID); err != nil || m.RootID == string(msgID) {
		m.RootID = ""
	}
	if _, err := ids.ParseMessageID(m.ParentID); err != nil || m.ParentID == string(msgID) {
		m.ParentID = ""
	}
	return synth.Message{
		EvidenceID:   e.ID,
		MessageID:    msgID,
		SenderOpenID: e.ActorID,
		SenderName:   e.ActorDisplayName,
		OccurredAt:   e.OccurredAt.UTC(),
		Text:         e.Content,
		MessageType:  m.MessageType,
		ThreadID:     m.ThreadID,
		RootID:       m.RootID,
		ParentID:     m.ParentID,
		Context:      context,
		Deleted:      e.Deleted,
		FromBot:      m.SenderType == senderTypeApp,
	}, nil
}

// aggregate is the window's aggregate content hash (design §10.2): lower-case hex
// SHA-256 over the ordered (evidence id, content hash) pairs included, each written as
// id "\n" content_hash "\n". It is what last_seen_content_hash records.
type aggregate struct {
	h hash.Hash
	n int
}

func newAggregate() *aggregate { return &aggregate{h: sha256.New()} }

func (a *aggregate) add(id int64, contentHash string) {
	a.h.Write([]byte(strconv.FormatInt(id, 10)))
	a.h.Write([]byte{'\n'})
	a.h.Write([]byte(contentHash))
	a.h.Write([]byte{'\n'})
	a.n++
}

func (a *aggregate) sum() string { return hex.EncodeToString(a.h.Sum(nil)) }

// AggregateHash returns the aggregate content hash the worker records for a window
// whose included evidence is rows, in (occurred_at, id) order.
func AggregateHash(rows []store.Evidence) string {
	a := newAggregate()
	for i := range rows {
		a.add(rows[i].ID, rows[i].ContentHash)
	}
	return a.sum()
}
