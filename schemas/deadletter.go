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
// io.larkline.DeadLetter). Value is as sensitive as the topic it came from; Error
// carries ids and hashes only.
type DeadLetter struct {
	Stage  string `avro:"stage"`  // an ids.Stage (ids.ParseStage also reads the pre-D30 "evidence_sink", "workspace_feed")
	Reason string `avro:"reason"` // a short code, e.g. ReasonUnknownSchema
	Error  string `avro:"error"`  // at most MaxDeadLetterErrorBytes
	// Topic, Partition and Offset locate the original record; -1 when unknown.
	Topic     string `avro:"topic"`
	Partition int32  `avro:"partition"`
	Offset    int64  `avro:"offset"`
	// Key and Value are the original bytes; nil is null, distinct from empty.
	Key      []byte    `avro:"key"`
	Value    []byte    `avro:"value"`
	FailedAt time.Time `avro:"failed_at"`
	// OriginalSchema is the writer schema of Value when known (WireSchemaRef's form).
	OriginalSchema string `avro:"original_schema"`
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

// ByReference drops the original value from d, which then names the record by
// topic, partition and offset only: evidence-topic records are parked this way, so
// chat text lives only where retention and recall reach it (decisions D9).
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
}

// NewDeadLetterCodec returns the codec of DeadLetter values.
func NewDeadLetterCodec(opts ...Option) (*Codec[DeadLetter], error) {
	return newCodec(deadLetterType, opts)
}
