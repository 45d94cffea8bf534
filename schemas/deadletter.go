package schemas

import (
	"errors"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// DefaultDeadLetterTopic is the topic of DeadLetter values.
const DefaultDeadLetterTopic = "larkline.deadletter.v1"

// Reason codes of this package's errors (DeadLetter.Reason, bounded metric labels).
const (
	ReasonTombstone          = "tombstone"
	ReasonUnknownSchema      = "unknown_schema"
	ReasonNewerSchema        = "newer_schema"
	ReasonWrongRecordType    = "wrong_record_type"
	ReasonIncompatibleSchema = "incompatible_schema"
	ReasonMalformed          = "malformed"
	ReasonInvalidRecord      = "invalid_record"
	ReasonRegistry           = "registry"
	ReasonOther              = "other"
)

// ReasonOf maps an error to its short reason code; ReasonOther for an error that
// wraps none of this package's sentinels.
func ReasonOf(err error) string {
	for _, r := range []struct {
		err  error
		code string
	}{
		{ErrTombstone, ReasonTombstone},
		{ErrNewerSchema, ReasonNewerSchema},
		{ErrUnknownSchema, ReasonUnknownSchema},
		{ErrWrongRecordType, ReasonWrongRecordType},
		{ErrIncompatibleSchema, ReasonIncompatibleSchema},
		{ErrMalformed, ReasonMalformed},
		{ErrInvalidRecord, ReasonInvalidRecord},
		{ErrRegistry, ReasonRegistry},
	} {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return ReasonOther
}

// DeadLetter is a record a stage could not process, parked with the reason (schema
// io.larkline.DeadLetter). Value is the original record bytes and is as sensitive
// as the topic it came from; Error carries ids and hashes only.
type DeadLetter struct {
	// Stage that parked the record (an ids.Stage; before D30 the sink wrote
	// "evidence_sink" and the workspace feed "workspace_feed": ids.ParseStage reads both).
	Stage string
	// Reason is a short code, e.g. ReasonUnknownSchema.
	Reason string
	// Error is the error text, at most MaxDeadLetterErrorBytes.
	Error string
	// Topic, Partition and Offset locate the original record; -1 when unknown.
	Topic     string
	Partition int32
	Offset    int64
	// Key and Value are the original bytes; nil is null, distinct from empty.
	Key      []byte
	Value    []byte
	FailedAt time.Time
	// OriginalSchema names the writer schema of Value when known
	// (avro-crc64:<hex> or confluent-id:<id>); nullable.
	OriginalSchema string
}

// NewDeadLetter builds the dead letter of a record that failed with cause: the
// reason code comes from ReasonOf, the error text is truncated to
// MaxDeadLetterErrorBytes, and the writer schema is taken from cause or, failing
// that, from the value's header.
func NewDeadLetter(stage ids.Stage, cause error, topic string, partition int32, offset int64, key, value []byte, failedAt time.Time) DeadLetter {
	d := DeadLetter{
		Stage:     string(stage),
		Reason:    ReasonOf(cause),
		Topic:     topic,
		Partition: partition,
		Offset:    offset,
		Key:       key,
		Value:     value,
		FailedAt:  failedAt,
	}
	if cause != nil {
		d.Error = truncateUTF8(cause.Error(), MaxDeadLetterErrorBytes)
	}
	if ref, ok := SchemaRefOf(cause); ok {
		d.OriginalSchema = ref
	} else if ref, ok := WireSchemaRef(value); ok {
		d.OriginalSchema = ref
	}
	return d
}

// ByReference drops the original value from d: the dead letter then names the record
// by topic, partition and offset only, and a re-drive reads it from there. Stages
// park evidence-topic records this way (issue #19, decisions D9): their values carry
// chat text, which must live only in the evidence topic and table, where retention and
// recall reach it (a recall's redacted version replaces the parked one under
// compaction; a retention tombstone removes it). The writer schema stays named.
func (d *DeadLetter) ByReference() {
	d.Value = nil
}

// IsByReference reports whether d carries no value but names where the original is.
func (d *DeadLetter) IsByReference() bool { return d.Value == nil && d.Offset >= 0 }

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (d *DeadLetter) Validate() error {
	c := checker{rec: NameDeadLetter}
	c.token("stage", d.Stage, MaxTokenLen)
	c.token("reason", d.Reason, MaxTokenLen)
	c.text("error", d.Error, MaxDeadLetterErrorBytes)
	if err := checkTopic(d.Topic); err != nil {
		c.fail("topic: %v", err)
	}
	if d.Partition < -1 {
		c.fail("partition %d is below -1", d.Partition)
	}
	if d.Offset < -1 {
		c.fail("offset %d is below -1", d.Offset)
	}
	c.time("failed_at", d.FailedAt)
	c.optToken("original_schema", d.OriginalSchema, maxSchemaRefLen)
	return c.err
}

var deadLetterType = &recordType[DeadLetter]{
	name:     NameDeadLetter,
	topic:    DefaultDeadLetterTopic,
	validate: (*DeadLetter).Validate,
	toNative: func(d *DeadLetter) map[string]any {
		return map[string]any{
			"stage":           d.Stage,
			"reason":          d.Reason,
			"error":           d.Error,
			"topic":           d.Topic,
			"partition":       d.Partition,
			"offset":          d.Offset,
			"key":             nullableBytes(d.Key),
			"value":           nullableBytes(d.Value),
			"failed_at":       millis(d.FailedAt),
			"original_schema": nullableString(d.OriginalSchema),
		}
	},
	fromNative: func(f *fieldReader) (DeadLetter, error) {
		d := DeadLetter{
			Stage:          f.str("stage"),
			Reason:         f.str("reason"),
			Error:          f.str("error"),
			Topic:          f.str("topic"),
			Partition:      f.int32("partition"),
			Offset:         f.long("offset"),
			Key:            f.optBytes("key"),
			Value:          f.optBytes("value"),
			FailedAt:       f.timestamp("failed_at"),
			OriginalSchema: f.optStr("original_schema"),
		}
		return d, f.err
	},
}

// NewDeadLetterCodec returns the codec of DeadLetter values.
func NewDeadLetterCodec(opts ...Option) (*Codec[DeadLetter], error) {
	return newCodec(deadLetterType, opts)
}
