package schemas

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Every error of this package wraps one of them.
var (
	// ErrUnknownSchema: the record names a writer schema this reader cannot find.
	ErrUnknownSchema = errors.New("unknown writer schema")
	// ErrNewerSchema: the writer schema is newer than this binary knows.
	ErrNewerSchema = errors.New("writer schema is newer than this reader")
	// ErrWrongRecordType: the writer schema describes another record type.
	ErrWrongRecordType = errors.New("writer schema is another record type")
	// ErrIncompatibleSchema: the writer schema cannot be resolved into the reader's.
	ErrIncompatibleSchema = errors.New("writer schema cannot be read as the reader schema")
	// ErrMalformed: the bytes are no record of a wire format read here, or are cut short.
	ErrMalformed = errors.New("malformed record bytes")
	// ErrInvalidRecord: well-formed Avro that breaks a rule of its type (Validate).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrTombstone: Decode was given an empty value (the caller's to handle).
	ErrTombstone = errors.New("empty value (a tombstone is the caller's to handle)")
	// ErrRegistry: a schema registry request failed (RegistryError, IsRetryable).
	ErrRegistry = errors.New("schema registry request failed")
	// ErrSchemaRejected: the registry refused to register the schema (HTTP 409
	// incompatible, 422 invalid). It wraps ErrRegistry and is not retryable.
	ErrSchemaRejected = errors.New("schema registry refused the schema")
	// ErrSchemaNotRegistered: AutoRegister is off and the subject lacks the schema.
	ErrSchemaNotRegistered = errors.New("schema not registered")
	// ErrIncompatibleChange: the registry's compatibility check refuses the schema
	// as the subject's next version (`larkline schemas check`).
	ErrIncompatibleChange = errors.New("schema is incompatible with the subject's registered versions")
)

// DecodeError is returned by Decode for bytes it cannot turn into a record; it
// names the writer schema the bytes named, for the dead letter.
type DecodeError struct {
	Record      string     // full Avro name of the type the reader expected
	Format      WireFormat // 0 when not recognized
	Fingerprint uint64     // single-object encoding only
	SchemaID    uint32     // Confluent wire format only
	Err         error      // wraps a sentinel
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

// IsUnknownSchema reports whether err is ErrUnknownSchema or ErrNewerSchema.
func IsUnknownSchema(err error) bool {
	return errors.Is(err, ErrUnknownSchema) || errors.Is(err, ErrNewerSchema)
}

// IsRetryable reports whether the operation that returned err may succeed when
// repeated: a registry that could not be reached, timed out, or answered 408, 429
// or 5xx. Every other error of this package is permanent for its input.
func IsRetryable(err error) bool {
	var re *RegistryError
	if errors.As(err, &re) {
		return re.Retryable()
	}
	return false
}

// RegistryError describes a failed schema registry request.
type RegistryError struct {
	Op         string // what was being done, e.g. "register subject larkline.evidence.v1-value"
	StatusCode int    // HTTP status; 0 when no response arrived
	Code       int    // the registry's error_code, when given
	Message    string // the registry's message, truncated
	Err        error  // the transport cause, if any
	register   bool   // a registration
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
	case e.StatusCode == 0: // no response; a cancelled caller is stopping, not retrying
		return !errors.Is(e.Err, context.Canceled)
	case e.StatusCode == 408 || e.StatusCode == 429:
		return true
	default:
		return e.StatusCode >= 500
	}
}
