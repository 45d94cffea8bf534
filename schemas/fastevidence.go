package schemas

import (
	"fmt"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// The evidence record is decoded for every record of the evidence topic by the
// evidence sink and the window processor, so its current schema has a decoder of
// its own: the same structural check as every body (checkBinary), then the fields
// read in schema order straight into the struct, without goavro's generic maps,
// then the same validation. Older writer schemas (and any schema the reader does
// not know by fingerprint) still go through goavro and schema resolution. A fuzz
// test (FuzzEvidenceFastDecode) holds the two paths to the same result on every
// input: the same record, or an error of the same kind.

// evidenceFastFields is the field order fastEvidence reads.
var evidenceFastFields = []string{
	VersionField, "workspace_id", "chat_id", "message_id", "source", "source_type", "source_key",
	"occurred_at", "source_updated_at", "observed_at", "actor_id", "actor_display_name", "message_type",
	"content", "content_hash", "deleted", "synthesis_eligible", "ineligible_reason", "thread_id", "root_id",
	"parent_id", "metadata_json", "ingest_path",
}

// fastEvidenceFits reports whether s is the schema fastEvidence decodes.
func fastEvidenceFits(s *Schema) bool {
	if s == nil || s.root == nil || len(s.root.fields) != len(evidenceFastFields) {
		return false
	}
	for i, f := range s.root.fields {
		if f.name != evidenceFastFields[i] {
			return false
		}
	}
	return true
}

// fastReader reads a body checkBinary accepted: lengths, indexes and booleans are
// known to be in range, so it never fails; it still stops at the end of the buffer.
type fastReader struct {
	b   []byte
	pos int
}

func (r *fastReader) long() int64 {
	var u uint64
	for shift := uint(0); shift < 70 && r.pos < len(r.b); shift += 7 {
		c := r.b[r.pos]
		r.pos++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1)
}

func (r *fastReader) str() string {
	n := int(r.long())
	if n < 0 || n > len(r.b)-r.pos {
		n = max(0, len(r.b)-r.pos)
	}
	s := string(r.b[r.pos : r.pos+n])
	r.pos += n
	return s
}

// optStr reads a ["null", "string"] union.
func (r *fastReader) optStr() string {
	if r.long() == 0 {
		return ""
	}
	return r.str()
}

func (r *fastReader) boolean() bool {
	if r.pos >= len(r.b) {
		return false
	}
	v := r.b[r.pos] == 1
	r.pos++
	return v
}

// millis is timestamp-millis as goavro turns it into a time.
func (r *fastReader) millis() time.Time {
	ms := r.long()
	s := ms / 1e3
	return time.Unix(s, (ms-s*1e3)*1e6).UTC()
}

var ingestPaths = []IngestPath{IngestEvent, IngestReconcile, IngestRefresh, IngestManual}

// fastEvidence decodes a current-schema evidence body that checkBinary accepted.
func fastEvidence(reader *Schema, body []byte) (EvidenceRecord, error) {
	r := fastReader{b: body}
	if v := r.long(); int(v) > reader.Version {
		return EvidenceRecord{}, fmt.Errorf("%w: record says %s %d, this reader knows up to %d", ErrNewerSchema, VersionField, v, reader.Version)
	}
	e := EvidenceRecord{
		WorkspaceID:     ids.WorkspaceID(r.str()),
		ChatID:          ids.ChatID(r.str()),
		MessageID:       ids.MessageID(r.str()),
		Source:          r.str(),
		SourceType:      r.str(),
		SourceKey:       r.str(),
		OccurredAt:      r.millis(),
		SourceUpdatedAt: r.millis(),
		ObservedAt:      r.millis(),
		ActorID:         r.str(),
	}
	e.ActorDisplayName = r.optStr()
	e.MessageType = r.str()
	e.Content = r.str()
	e.ContentHash = r.str()
	e.Deleted = r.boolean()
	e.SynthesisEligible = r.boolean()
	e.IneligibleReason = r.optStr()
	e.ThreadID = r.optStr()
	e.RootID = ids.MessageID(r.optStr())
	e.ParentID = ids.MessageID(r.optStr())
	e.MetadataJSON = r.str()
	if i := r.long(); i >= 0 && i < int64(len(ingestPaths)) {
		e.IngestPath = ingestPaths[i]
	}
	if err := e.Validate(); err != nil {
		return EvidenceRecord{}, err
	}
	return e, nil
}
