package schemas

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Every error of this package wraps one of them; test with errors.Is.
var (
	// ErrUnknownSchema: the record names a writer schema (fingerprint or registry
	// id) this reader cannot find. Park the record; retrying will not help unless the
	// schema is added.
	ErrUnknownSchema = errors.New("unknown writer schema")
	// ErrNewerSchema: the writer schema is a newer version of the record type than
	// this binary knows. Park the record; a newer binary can read it.
	ErrNewerSchema = errors.New("writer schema is newer than this reader")
	// ErrWrongRecordType: the writer schema is known but describes another record
	// type (e.g. a closed window on the evidence topic).
	ErrWrongRecordType = errors.New("writer schema is another record type")
	// ErrIncompatibleSchema: the writer schema is an older or foreign schema of the
	// record type that cannot be resolved into the reader schema (a reader field
	// without default is missing, or a field has an unconvertible type).
	ErrIncompatibleSchema = errors.New("writer schema cannot be read as the reader schema")
	// ErrMalformed: the bytes are not a record of any wire format this package
	// reads, or they end early, or the body does not match its writer schema.
	ErrMalformed = errors.New("malformed record bytes")
	// ErrInvalidRecord: the record is well-formed Avro but breaks a rule of its type
	// (an id that does not parse, a bad hash, an inconsistent key). Returned by
	// Validate, by Encode before writing and by Decode after reading.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrTombstone: Decode was given an empty value. A null value is a tombstone
	// on a compacted topic; callers handle it before decoding, this package never
	// produces one.
	ErrTombstone = errors.New("empty value (a tombstone is the caller's to handle)")
	// ErrRegistry: a schema registry request failed. See RegistryError and
	// IsRetryable.
	ErrRegistry = errors.New("schema registry request failed")
	// ErrSchemaRejected: the registry refused to register the schema under its
	// subject: HTTP 409 (incompatible with the subject's earlier versions under the
	// subject's compatibility rule, e.g. BACKWARD) or 422 (not a valid schema). It
	// wraps ErrRegistry and is not retryable: nothing is produced until the schema or
	// the subject's compatibility setting is changed.
	ErrSchemaRejected = errors.New("schema registry refused the schema")
	// ErrSchemaNotRegistered: automatic registration is off and the registry's
	// subject does not hold the codec's schema. Register it (`larkline schemas
	// register`) before starting; nothing is produced until then.
	ErrSchemaNotRegistered = errors.New("schema not registered")
	// ErrIncompatibleChange: the registry's compatibility check says the schema may
	// not be the subject's next version (`larkline schemas check`).
	ErrIncompatibleChange = errors.New("schema is incompatible with the subject's registered versions")
)

// DecodeError is returned by Decode for bytes it cannot turn into a record. It says
// which writer schema the bytes named, so a caller can park the record in the
// dead-letter topic with that reference.
type DecodeError struct {
	// Record is the full Avro name of the type the reader expected.
	Record string
	// Format is the wire format of the bytes; 0 when not recognized.
	Format WireFormat
	// Fingerprint is the writer schema fingerprint (single-object encoding only).
	Fingerprint uint64
	// SchemaID is the writer schema registry id (Confluent wire format only).
	SchemaID uint32
	// Err wraps one of the sentinel errors.
	Err error
}

func (e *DecodeError) Error() string {
	if ref := e.SchemaRef(); ref != "" {
		return "decode " + e.Record + " (" + ref + "): " + e.Err.Error()
	}
	return "decode " + e.Record + ": " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// SchemaRef is the writer schema the bytes named: avro-crc64:<hex> or
// confluent-id:<id>; empty when the header could not be read.
func (e *DecodeError) SchemaRef() string {
	switch e.Format {
	case SingleObject:
		return FingerprintString(e.Fingerprint)
	case Confluent:
		return ConfluentIDString(e.SchemaID)
	default:
		return ""
	}
}

// SchemaRefOf returns the writer schema reference carried by a DecodeError in err's
// chain, for DeadLetter.OriginalSchema.
func SchemaRefOf(err error) (string, bool) {
	var de *DecodeError
	if errors.As(err, &de) {
		if ref := de.SchemaRef(); ref != "" {
			return ref, true
		}
	}
	return "", false
}

// IsUnknownSchema reports whether err says the record was written with a schema
// this reader does not have or that is newer than it (ErrUnknownSchema or
// ErrNewerSchema). Such a record is parked, not retried and not dropped.
func IsUnknownSchema(err error) bool {
	return errors.Is(err, ErrUnknownSchema) || errors.Is(err, ErrNewerSchema)
}

// IsRetryable reports whether the operation that returned err may succeed when
// repeated unchanged: a schema registry that could not be reached, timed out, or
// answered 408, 429 or 5xx. Every other error of this package is permanent for the
// given input: malformed bytes stay malformed.
func IsRetryable(err error) bool {
	var re *RegistryError
	if errors.As(err, &re) {
		return re.Retryable()
	}
	return false
}

// RegistryError describes a failed schema registry request.
type RegistryError struct {
	// Op says what was being done, e.g. "register subject larkline.evidence.v1-value".
	Op string
	// StatusCode is the HTTP status; 0 when no response arrived.
	StatusCode int
	// Code is the registry's error_code when the body carried one.
	Code int
	// Message is the registry's message, truncated.
	Message string
	// Err is the transport or decoding cause, if any.
	Err error
	// register is set for a registration (POST /subjects/{subject}/versions).
	register bool
}

// Rejected reports whether the registry refused a registration (409 or 422).
func (e *RegistryError) Rejected() bool {
	return e.register && (e.StatusCode == 409 || e.StatusCode == 422)
}

func (e *RegistryError) Error() string {
	s := "schema registry: " + e.Op
	if e.StatusCode != 0 {
		s += fmt.Sprintf(": HTTP %d", e.StatusCode)
	}
	if e.Code != 0 {
		s += fmt.Sprintf(" (error code %d)", e.Code)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.register && e.StatusCode == 409 {
		s += " (the schema is incompatible with the subject's earlier versions under its compatibility setting; " +
			"nothing was produced)"
	}
	return s
}

func (e *RegistryError) Unwrap() []error {
	out := []error{ErrRegistry}
	if e.Rejected() {
		out = append(out, ErrSchemaRejected)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// Retryable reports whether repeating the request may succeed.
func (e *RegistryError) Retryable() bool {
	switch {
	case e.StatusCode == 0:
		// No response: connection refused, reset, or the per-request timeout. A
		// caller that cancelled its own context is stopping, not retrying.
		return !errors.Is(e.Err, context.Canceled)
	case e.StatusCode == 408 || e.StatusCode == 429:
		return true
	default:
		return e.StatusCode >= 500
	}
}
