package schemas

import (
	"fmt"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// The evidence record is decoded for every evidence record by the evidence sink and
// the window processor, so its current schema has a decoder of its own, about 4x
// faster than goavro with a quarter of the allocations (docs/perf.md). A test and
// a fuzz target (FuzzEvidenceFastDecode) hold it to goavro's result on every input.

// fastReader reads an untrusted body the way goavro does: the first malformation is
// kept in err and later reads return zero values.
type fastReader struct {
	b   []byte
	pos int
	err error
}

func (r *fastReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", ErrMalformed, what, r.pos)
	}
}

// varint reads goavro's unsigned varint (no bound on its length, as goavro).
func (r *fastReader) varint() uint64 {
	var u uint64
	for shift := uint(0); r.err == nil; shift += 7 {
		if r.pos >= len(r.b) {
			r.fail("varint cut short")
			return 0
		}
		c := r.b[r.pos]
		r.pos++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return u
}

func (r *fastReader) long() int64 {
	u := r.varint()
	return int64(u>>1) ^ -int64(u&1)
}

// int is an Avro int as goavro reads it: the varint truncated to 32 bits.
func (r *fastReader) int() int32 {
	u := r.varint()
	return int32(u>>1) ^ -int32(u&1)
}

func (r *fastReader) str() string {
	n := r.long()
	if r.err == nil && (n < 0 || n > int64(len(r.b)-r.pos)) {
		r.fail("string length past the end")
	}
	if r.err != nil {
		return ""
	}
	s := string(r.b[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return s
}

// optStr reads a ["null", "string"] union.
func (r *fastReader) optStr() string {
	switch r.long() {
	case 0:
		return ""
	case 1:
		return r.str()
	default:
		r.fail("union index out of range")
		return ""
	}
}

func (r *fastReader) boolean() bool {
	if r.err == nil && (r.pos >= len(r.b) || r.b[r.pos] > 1) {
		r.fail("boolean not 0 or 1")
	}
	if r.err != nil {
		return false
	}
	r.pos++
	return r.b[r.pos-1] == 1
}

// millis is timestamp-millis as goavro turns it into a time.
func (r *fastReader) millis() time.Time {
	ms := r.long()
	s := ms / 1e3
	return time.Unix(s, (ms-s*1e3)*1e6).UTC()
}

// fastEvidence decodes a body written with the current evidence schema.
func fastEvidence(reader *Schema, body []byte) (EvidenceRecord, error) {
	r := fastReader{b: body}
	version := r.int()
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
	if i := r.long(); r.err == nil && (i < 0 || i >= int64(len(ingestPaths))) {
		r.fail("enum index out of range")
	} else if r.err == nil {
		e.IngestPath = ingestPaths[i]
	}
	switch {
	case r.err != nil:
		return EvidenceRecord{}, r.err
	case r.pos != len(body):
		return EvidenceRecord{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(body)-r.pos)
	case int(version) > reader.Version:
		return EvidenceRecord{}, fmt.Errorf("%w: record says %s %d, this reader knows up to %d", ErrNewerSchema, VersionField, version, reader.Version)
	}
	if err := e.Validate(); err != nil {
		return EvidenceRecord{}, err
	}
	return e, nil
}
