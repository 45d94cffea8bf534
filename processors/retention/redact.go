package retention

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// unknownMessageType stands in for a row whose metadata lacks a usable message type
// (never the case for rows the sink wrote): the redaction hash needs one.
const unknownMessageType = "unknown"

// evidenceRow is the part of a workspace_timeline_evidence row retention reads.
type evidenceRow struct {
	ID              int64
	Workspace       ids.WorkspaceID
	SourceKey       string
	OccurredAt      time.Time
	SourceUpdatedAt time.Time
	ActorID         string
	ActorName       string
	Content         string
	ContentHash     string
	Metadata        []byte
	Deleted         bool
	Eligible        bool
}

// ref is the evidence key of a row: its topic key when it parses.
type ref struct {
	chat ids.ChatID
	msg  ids.MessageID
	ok   bool
}

func parseRef(sourceKey string) ref {
	parts := strings.Split(sourceKey, "/")
	if len(parts) != 4 || parts[0] != "chat" || parts[2] != "message" {
		return ref{}
	}
	c, err := ids.ParseChatID(parts[1])
	if err != nil {
		return ref{}
	}
	m, err := ids.ParseMessageID(parts[3])
	if err != nil {
		return ref{}
	}
	return ref{chat: c, msg: m, ok: true}
}

// topicKey is <workspace>/<chat>/<message>.
func (r evidenceRow) topicKey() (string, bool) {
	k := parseRef(r.SourceKey)
	if !k.ok {
		return "", false
	}
	return ids.EvidenceKey(r.Workspace, k.chat, k.msg), true
}

// redaction is the redacted version of one row.
type redaction struct {
	hash     string
	metadata []byte // JSON object
	// record is the version to publish; nil when the row has no valid key or its
	// fields do not make a valid record.
	record *schemas.EvidenceRecord
}

// redact computes the redacted version of r by the evidence contract's redaction rule
// (schemas.RedactMetadata, schemas.RedactedContentHash), the one a recall follows too:
// the same content hash for the message type, the same metadata keys.
func redact(r evidenceRow, observed time.Time) redaction {
	md := map[string]any{}
	if len(r.Metadata) > 0 {
		// A jsonb object column always decodes; an undecodable value counts as empty.
		_ = json.Unmarshal(r.Metadata, &md)
		if md == nil {
			md = map[string]any{}
		}
	}
	mt, _ := md[schemas.MetaMessageType].(string)
	if !isToken(mt, schemas.MaxTokenLen) {
		mt = unknownMessageType
	}
	redMeta := schemas.RedactMetadata(md)
	redHash := schemas.RedactedContentHash(mt)
	// Marked as retention's, so that the redaction is not taken for a recall, which
	// would withdraw the AI drafts citing the message (migration 0005, decisions D12).
	redMeta[schemas.MetaRetention] = true
	meta, err := json.Marshal(redMeta)
	if err != nil {
		// Only kept structural values of an already stored JSON object: cannot fail.
		meta = []byte(`{"deleted":true,"retention":true}`)
	}
	out := redaction{hash: redHash, metadata: meta}

	k := parseRef(r.SourceKey)
	if !k.ok {
		return out
	}
	rec := schemas.EvidenceRecord{
		WorkspaceID:       r.Workspace,
		ChatID:            k.chat,
		MessageID:         k.msg,
		Source:            ids.SourceLark,
		SourceType:        ids.SourceTypeLarkMessage,
		SourceKey:         r.SourceKey,
		OccurredAt:        r.OccurredAt.UTC(),
		SourceUpdatedAt:   r.SourceUpdatedAt.UTC(),
		ObservedAt:        observed.UTC(),
		MessageType:       mt,
		ContentHash:       redHash,
		Deleted:           true,
		SynthesisEligible: false,
		IneligibleReason:  schemas.IneligibleDeleted,
		MetadataJSON:      string(meta),
		// The schema has no retention ingest path; an operator-initiated change is
		// the closest of event, reconcile, refresh and manual.
		IngestPath: schemas.IngestManual,
	}
	if isToken(r.ActorID, ids.MaxIDLen) {
		rec.ActorID = r.ActorID
	}
	if s, _ := md[schemas.MetaThreadID].(string); isToken(s, ids.MaxIDLen) {
		rec.ThreadID = s
	}
	if s, _ := md[schemas.MetaRootID].(string); s != "" {
		rec.RootID, _ = ids.ParseMessageID(s)
	}
	if s, _ := md[schemas.MetaParentID].(string); s != "" {
		rec.ParentID, _ = ids.ParseMessageID(s)
	}
	if rec.Validate() == nil {
		out.record = &rec
	}
	return out
}

// alreadyRedacted reports whether r is exactly retention's redacted version (a
// previous run): the redaction's hash and metadata, retention's marker included. A
// row that merely looks redacted (a recall's, or any deleted row without text) is not
// skipped (issue #29): it is redacted again, which publishes the redaction and
// withdraws the AI drafts citing it.
func alreadyRedacted(r evidenceRow, red redaction) bool {
	if !r.Deleted || r.Eligible || r.Content != "" || r.ActorName != "" || r.ContentHash != red.hash {
		return false
	}
	return jsonEqual(r.Metadata, red.metadata)
}

func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// isToken mirrors the schemas token rule: 1..max bytes of [A-Za-z0-9_.:-].
func isToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// keptMetadataKeys are the metadata keys a redaction keeps (the evidence contract's
// rule) plus the ones redact adds, sorted. The SQL pre-filter uses them to skip rows
// already redacted; alreadyRedacted stays the authority, so a key missing here only
// costs a re-read.
var keptMetadataKeys = func() []string {
	keys := append(schemas.RedactionKeptKeys(), schemas.MetaDeleted, schemas.MetaRetention)
	slices.Sort(keys)
	return keys
}()
