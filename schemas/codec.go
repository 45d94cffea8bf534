package schemas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// WireFormat says how a record value names its writer schema.
type WireFormat int

const (
	// SingleObject is the Avro single-object encoding (0xC3 0x01, 8-byte CRC-64-AVRO
	// fingerprint, body): the format without a schema registry (tests).
	SingleObject WireFormat = 1
	// Confluent is the Confluent wire format (0x00, 4-byte schema id, body).
	Confluent WireFormat = 2
)

func (f WireFormat) String() string {
	switch f {
	case SingleObject:
		return "single-object"
	case Confluent:
		return "confluent"
	}
	return fmt.Sprintf("WireFormat(%d)", int(f))
}

var confluentHeader sr.ConfluentHeader

// WireSchemaRef reads only the header of a record value and returns the writer
// schema it names (avro-crc64:<hex> or confluent-id:<id>).
func WireSchemaRef(b []byte) (string, bool) {
	if fp, _, err := goavro.FingerprintFromSOE(b); err == nil {
		return FingerprintString(fp), true
	}
	if id, _, err := confluentHeader.DecodeID(b); err == nil {
		return ConfluentIDString(uint32(id)), true
	}
	return "", false
}

// Option configures a Codec.
type Option func(*options)

type options struct {
	registry *Registry
	topic    string
}

// WithRegistry makes the codec write the Confluent wire format and resolve schema
// ids through r; without it the codec writes the single-object encoding.
func WithRegistry(r *Registry) Option { return func(o *options) { o.registry = r } }

// WithTopic sets the topic whose subject (<topic>-value) the schema is registered
// under; the default is the record type's default topic.
func WithTopic(topic string) Option { return func(o *options) { o.topic = topic } }

// recordType describes one record type to the generic codec; the struct's
// `avro` tags map its fields (native.go).
type recordType[T any] struct {
	name     string
	topic    string
	validate func(*T) error
	// fast, when set, decodes a body of the current schema without goavro
	// (fastevidence.go), reading the fields in the order of the struct's tags.
	fast func(reader *Schema, body []byte) (T, error)
}

// writer is a writer schema a codec has met, or the reason it cannot read it.
type writer struct {
	schema *Schema
	err    error
}

// Codec encodes and decodes one record type; it is safe for concurrent use. Encode
// validates and writes the embedded schema. Decode reads both wire formats,
// resolves an older writer schema into the current one, validates, and returns a
// *DecodeError for anything it cannot read; it never panics.
type Codec[T any] struct {
	rt       *recordType[T]
	reader   *Schema
	fields   []field
	format   WireFormat
	registry *Registry
	subject  string
	byFP     map[uint64]*writer // every embedded schema; read-only after construction
	fast     bool               // the record type's own decoder reads the current schema

	mu     sync.Mutex
	id     uint32
	haveID bool
	byID   map[uint32]*writer
}

func newCodec[T any](rt *recordType[T], opts []Option) (*Codec[T], error) {
	o := options{topic: rt.topic}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	cat, err := loadCatalog()
	if err != nil {
		return nil, fmt.Errorf("schemas: load embedded schemas: %w", err)
	}
	cur := cat.byName[rt.name]
	if cur == nil {
		return nil, fmt.Errorf("schemas: no embedded schema for %s", rt.name)
	}
	if err := checkTopic(o.topic); err != nil {
		return nil, fmt.Errorf("schemas: %s codec: %w", rt.name, err)
	}
	fields, err := fieldsOf[T](cur)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s codec: %w", rt.name, err)
	}
	c := &Codec[T]{rt: rt, reader: cur, fields: fields, format: SingleObject, registry: o.registry, subject: o.topic + "-value",
		byFP: map[uint64]*writer{}, byID: map[uint32]*writer{}}
	if o.registry != nil {
		c.format = Confluent
	}
	c.fast = rt.fast != nil && len(fields)+1 == len(cur.fields) // the tags name the schema's fields in order
	for i, f := range fields {
		c.fast = c.fast && cur.fields[i+1] == f.name
	}
	for _, s := range cat.all { // other record types are recognised as such
		c.byFP[s.Fingerprint] = c.classify(s)
	}
	return c, nil
}

func checkTopic(topic string) error {
	if topic == "" || len(topic) > maxTopicLen || topic == "." || topic == ".." {
		return fmt.Errorf("topic must be 1..%d bytes and not . or ..", maxTopicLen)
	}
	if !isToken(topic) || strings.Contains(topic, ":") { // Kafka's characters: a token's but ':'
		return fmt.Errorf("topic %q has characters outside [A-Za-z0-9._-]", topic)
	}
	return nil
}

// classify decides whether this codec can read data written with s.
func (c *Codec[T]) classify(s *Schema) *writer {
	switch {
	case s.Name != c.rt.name:
		return &writer{err: fmt.Errorf("%w: writer schema is %s", ErrWrongRecordType, s.Name)}
	case s.Version > c.reader.Version:
		return &writer{err: fmt.Errorf("%w: writer schema is version %d, this reader knows up to %d", ErrNewerSchema, s.Version, c.reader.Version)}
	}
	return &writer{schema: s}
}

// Schema returns (a copy of) the schema Encode writes: the embedded one.
func (c *Codec[T]) Schema() Schema { return *c.reader }

// WireFormat returns the format Encode writes.
func (c *Codec[T]) WireFormat() WireFormat { return c.format }

// Subject returns the schema registry subject, <topic>-value.
func (c *Codec[T]) Subject() string { return c.subject }

// registryText is the schema as registered: the embedded file's JSON, compacted.
func (c *Codec[T]) registryText() string {
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(c.reader.JSON)); err != nil {
		return c.reader.JSON // parsed at load, so never
	}
	return compact.String()
}

// Register registers the current schema under the codec's subject (with the
// registry's AutoRegister off, only looks it up: ErrSchemaNotRegistered when
// missing) and returns its id. Encode does it on first use.
func (c *Codec[T]) Register(ctx context.Context) (uint32, error) {
	if c.registry == nil {
		return 0, fmt.Errorf("schemas: register %s: no schema registry configured", c.rt.name)
	}
	c.mu.Lock()
	id, ok := c.id, c.haveID
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	register := c.registry.Register
	if !c.registry.AutoRegister() {
		register = c.registry.Lookup
	}
	id, err := register(ctx, c.subject, c.registryText())
	if err != nil {
		return 0, fmt.Errorf("schemas: register %s: %w", c.rt.name, err)
	}
	c.mu.Lock()
	c.id, c.haveID = id, true
	putBounded(c.byID, id, &writer{schema: c.reader}, DefaultRegistryMaxCachedSchemas)
	c.mu.Unlock()
	return id, nil
}

// Encode validates v and returns its value bytes in the codec's wire format. In the
// Confluent format the first call registers the schema and may block on the
// registry (IsRetryable tells whether a failure may pass). An invalid record yields
// ErrInvalidRecord.
func (c *Codec[T]) Encode(ctx context.Context, v T) ([]byte, error) {
	if err := c.rt.validate(&v); err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.rt.name, err)
	}
	native := toNative(c.fields, reflect.ValueOf(&v).Elem())
	native[VersionField] = int32(c.reader.Version)
	buf := make([]byte, 0, 512)
	var err error
	if c.format == Confluent {
		id, rerr := c.Register(ctx)
		if rerr != nil {
			return nil, fmt.Errorf("encode %s: %w", c.rt.name, rerr)
		}
		buf, _ = confluentHeader.AppendEncode(buf, int(id), nil)
		buf, err = c.reader.codec.BinaryFromNative(buf, native)
	} else {
		buf, err = c.reader.codec.SingleFromNative(buf, native)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.rt.name, err)
	}
	return buf, nil
}

// slow returns a codec of the same options that never uses the record type's own
// decoder (tests and the benchmark compare the two).
func (c *Codec[T]) slow() *Codec[T] {
	return &Codec[T]{rt: c.rt, reader: c.reader, fields: c.fields, format: c.format, registry: c.registry, subject: c.subject,
		byFP: c.byFP, byID: map[uint32]*writer{}}
}

// Decode reads one record value in either wire format. Every error is a
// *DecodeError wrapping one of the package's sentinels or a registry failure
// (IsRetryable). It blocks only to fetch an unknown schema id (then cached).
func (c *Codec[T]) Decode(ctx context.Context, b []byte) (T, error) {
	var zero T
	de := &DecodeError{Record: c.rt.name}
	fail := func(err error) (T, error) {
		de.Err = err
		return zero, de
	}
	var w *writer
	var body []byte
	switch {
	case len(b) == 0:
		return fail(ErrTombstone)
	case b[0] == 0xC3:
		fp, rest, err := goavro.FingerprintFromSOE(b)
		if err != nil {
			return fail(fmt.Errorf("%w: single-object header: %w", ErrMalformed, err))
		}
		de.Format, de.Fingerprint, body = SingleObject, fp, rest
		if w = c.byFP[fp]; w == nil {
			return fail(fmt.Errorf("%w: no known schema has this fingerprint", ErrUnknownSchema))
		}
	case b[0] == 0x00:
		id, rest, err := confluentHeader.DecodeID(b)
		if err != nil {
			return fail(fmt.Errorf("%w: Confluent header: %w", ErrMalformed, err))
		}
		de.Format, de.SchemaID, body = Confluent, uint32(id), rest
		if w, err = c.writerByID(ctx, de.SchemaID); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("%w: first byte %#02x starts neither a single-object (0xc3 0x01) nor a Confluent (0x00) value", ErrMalformed, b[0]))
	}
	if w.err != nil {
		return fail(w.err)
	}
	v, err := c.decodeBody(w.schema, body)
	if err != nil {
		return fail(err)
	}
	return v, nil
}

func (c *Codec[T]) writerByID(ctx context.Context, id uint32) (*writer, error) {
	c.mu.Lock()
	w, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		return w, nil
	}
	if c.registry == nil {
		return nil, fmt.Errorf("%w: no schema registry is configured to resolve the id", ErrUnknownSchema)
	}
	text, err := c.registry.SchemaByID(ctx, id)
	switch {
	case errors.Is(err, ErrIncompatibleSchema):
		w = &writer{err: err}
	case err != nil:
		return nil, err // not cached: the id may be registered later
	default:
		s, perr := ParseSchema(text)
		switch {
		case perr != nil:
			w = &writer{err: fmt.Errorf("%w: registry schema does not parse as an Avro record: %w", ErrIncompatibleSchema, perr)}
		case c.byFP[s.Fingerprint] != nil:
			w = c.byFP[s.Fingerprint]
		default:
			w = c.classify(s)
		}
	}
	c.mu.Lock()
	putBounded(c.byID, id, w, DefaultRegistryMaxCachedSchemas)
	c.mu.Unlock()
	return w, nil
}

func (c *Codec[T]) decodeBody(s *Schema, body []byte) (T, error) {
	var zero T
	if c.fast && s.Fingerprint == c.reader.Fingerprint {
		return c.rt.fast(c.reader, body)
	}
	native, err := nativeFromBinary(s, body)
	if err != nil {
		return zero, err
	}
	if m, ok := native.(map[string]any); ok {
		if v, ok := m[VersionField].(int32); ok && int(v) > c.reader.Version {
			return zero, fmt.Errorf("%w: record says %s %d, this reader knows up to %d", ErrNewerSchema, VersionField, v, c.reader.Version)
		}
	}
	var rec T
	if err := fromNative(c.reader, c.fields, native, reflect.ValueOf(&rec).Elem()); err != nil {
		return zero, err
	}
	if err := c.rt.validate(&rec); err != nil {
		return zero, err
	}
	return rec, nil
}

// nativeFromBinary runs goavro on an untrusted body; a goavro panic (a last line of
// defence) becomes ErrMalformed.
func nativeFromBinary(s *Schema, body []byte) (native any, err error) {
	defer func() {
		if r := recover(); r != nil {
			native, err = nil, fmt.Errorf("%w: avro decoder panicked: %v", ErrMalformed, r)
		}
	}()
	native, rest, err := s.codec.NativeFromBinary(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rest))
	}
	return native, nil
}

// Topics names the topic of every record type; a zero field takes the default.
type Topics struct {
	Evidence, ClosedWindow, Checkpoint, Workspace, DeadLetter string
}

// Codecs bundles one codec per record type, built with the same options.
type Codecs struct {
	Evidence     *Codec[EvidenceRecord]
	ClosedWindow *Codec[ClosedWindow]
	Checkpoint   *Codec[CollectionCheckpoint]
	Workspace    *Codec[WorkspaceRecord]
	DeadLetter   *Codec[DeadLetter]
}

// NewCodecs builds every codec with opts plus the topic of its record type.
func NewCodecs(t Topics, opts ...Option) (*Codecs, error) {
	with := func(topic, def string) []Option {
		if topic == "" {
			topic = def
		}
		return append(append([]Option(nil), opts...), WithTopic(topic))
	}
	var c Codecs
	var err [5]error
	c.Evidence, err[0] = newCodec(evidenceType, with(t.Evidence, DefaultEvidenceTopic))
	c.ClosedWindow, err[1] = newCodec(closedWindowType, with(t.ClosedWindow, DefaultClosedWindowTopic))
	c.Checkpoint, err[2] = newCodec(checkpointType, with(t.Checkpoint, DefaultCheckpointTopic))
	c.Workspace, err[3] = newCodec(workspaceType, with(t.Workspace, DefaultWorkspaceTopic))
	c.DeadLetter, err[4] = newCodec(deadLetterType, with(t.DeadLetter, DefaultDeadLetterTopic))
	if err := errors.Join(err[:]...); err != nil {
		return nil, err
	}
	return &c, nil
}

// SubjectSchema is one codec's record type, registry subject and schema text.
type SubjectSchema struct{ Record, Subject, Schema string }

// Subjects returns every codec's subject and schema, in a fixed order.
func (c *Codecs) Subjects() []SubjectSchema {
	return []SubjectSchema{c.Evidence.subjectSchema(), c.ClosedWindow.subjectSchema(),
		c.Checkpoint.subjectSchema(), c.Workspace.subjectSchema(), c.DeadLetter.subjectSchema()}
}

func (c *Codec[T]) subjectSchema() SubjectSchema {
	return SubjectSchema{Record: c.rt.name, Subject: c.subject, Schema: c.registryText()}
}

// Prepare resolves every codec's schema id at start (Register), so that a missing
// or refused schema or an unreachable registry stops the process before it
// consumes or produces anything. Without a registry it does nothing.
func (c *Codecs) Prepare(ctx context.Context) error {
	if c.Evidence.registry == nil {
		return nil
	}
	return errors.Join(prepare(ctx, c.Evidence), prepare(ctx, c.ClosedWindow), prepare(ctx, c.Checkpoint),
		prepare(ctx, c.Workspace), prepare(ctx, c.DeadLetter))
}

func prepare[T any](ctx context.Context, c *Codec[T]) error {
	_, err := c.Register(ctx)
	return err
}
