package schemas

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// WireFormat says how a record value names its writer schema.
type WireFormat int

const (
	// SingleObject is the Avro single-object encoding: 0xC3 0x01, the 8-byte
	// little-endian CRC-64-AVRO fingerprint of the writer schema's parsing canonical
	// form, then the Avro binary body. Used when no schema registry is configured.
	SingleObject WireFormat = 1
	// Confluent is the Confluent wire format: 0x00, the 4-byte big-endian schema
	// registry id of the writer schema, then the Avro binary body.
	Confluent WireFormat = 2
)

func (f WireFormat) String() string {
	switch f {
	case SingleObject:
		return "single-object"
	case Confluent:
		return "confluent"
	default:
		return fmt.Sprintf("WireFormat(%d)", int(f))
	}
}

const (
	soeHeaderLen       = 10
	confluentHeaderLen = 5
	initialEncodeCap   = 512
)

// WireSchemaRef reads only the header of a record value and returns the writer
// schema it names (avro-crc64:<hex> or confluent-id:<id>), for dead letters of
// values that were never decoded.
func WireSchemaRef(b []byte) (string, bool) {
	switch {
	case len(b) >= soeHeaderLen && b[0] == 0xC3 && b[1] == 0x01:
		return FingerprintString(binary.LittleEndian.Uint64(b[2:soeHeaderLen])), true
	case len(b) >= confluentHeaderLen && b[0] == 0x00:
		return ConfluentIDString(binary.BigEndian.Uint32(b[1:confluentHeaderLen])), true
	default:
		return "", false
	}
}

// Option configures a Codec.
type Option func(*options)

type options struct {
	registry *Registry
	topic    string
}

// WithRegistry makes the codec write the Confluent wire format and resolve
// Confluent schema ids through r; without it the codec writes the single-object
// encoding (tests).
func WithRegistry(r *Registry) Option { return func(o *options) { o.registry = r } }

// WithTopic sets the topic whose value subject (<topic>-value) the schema is
// registered under; the default is the record type's default topic.
func WithTopic(topic string) Option { return func(o *options) { o.topic = topic } }

// recordType describes one record type to the generic codec.
type recordType[T any] struct {
	name       string
	topic      string
	toNative   func(*T) map[string]any
	fromNative func(f *fieldReader) (T, error)
	validate   func(*T) error
	// fast, when set, decodes an untrusted body written with the current schema
	// without goavro; fastFits says whether it matches the current schema's layout
	// (a mismatch disables it rather than misread data).
	fast     func(reader *Schema, body []byte) (T, error)
	fastFits func(*Schema) bool
}

// writer is a writer schema a codec has met, or the reason it cannot read it.
type writer struct {
	schema *Schema
	err    error
}

// Codec encodes and decodes one record type. It is safe for concurrent use; create
// one per record type and process and share it.
//
// Encode validates the record and writes the current (embedded) schema. Decode
// accepts both wire formats, resolves an older writer schema into
// the current one (missing fields take their defaults), validates the result and
// returns a *DecodeError for anything it cannot read. It never panics on any input.
//
// A Kafka tombstone (null value) is not a record: producers write a nil value
// themselves to delete a key, and consumers check for an empty value before calling
// Decode, which answers ErrTombstone.
type Codec[T any] struct {
	rt       *recordType[T]
	reader   *Schema
	format   WireFormat
	registry *Registry
	subject  string
	// byFP holds every writer schema the single-object encoding may name; it is
	// filled by the constructor and only read afterwards.
	byFP map[uint64]*writer

	mu     sync.Mutex
	id     uint32
	haveID bool
	byID   map[uint32]*writer

	// fast: the record type's own decoder reads bodies of the current schema.
	fast bool
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
	cur, err := cat.current(rt.name)
	if err != nil {
		return nil, fmt.Errorf("schemas: %w", err)
	}
	if err := checkTopic(o.topic); err != nil {
		return nil, fmt.Errorf("schemas: %s codec: %w", rt.name, err)
	}
	format := SingleObject
	if o.registry != nil {
		format = Confluent
	}
	c := &Codec[T]{
		rt:       rt,
		reader:   cur,
		format:   format,
		registry: o.registry,
		subject:  o.topic + "-value",
		byFP:     map[uint64]*writer{},
		byID:     map[uint32]*writer{},
	}
	c.fast = rt.fast != nil && rt.fastFits != nil && rt.fastFits(cur)
	// Every embedded schema: other record types are recognised as such.
	for _, s := range cat.all {
		c.byFP[s.Fingerprint] = c.classify(s)
	}
	return c, nil
}

func checkTopic(topic string) error {
	if topic == "" || len(topic) > maxTopicLen || topic == "." || topic == ".." {
		return fmt.Errorf("topic must be 1..%d bytes and not . or ..", maxTopicLen)
	}
	for i := 0; i < len(topic); i++ {
		b := topic[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.') {
			return fmt.Errorf("topic %q has characters outside [A-Za-z0-9._-]", topic)
		}
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
	default:
		return &writer{schema: s}
	}
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
		return c.reader.JSON // parsed at load, so never: keep the text as written
	}
	return compact.String()
}

// Register registers the current schema under the codec's subject and returns its
// id; Encode does it on first use in the Confluent format. With the registry's
// AutoRegister off it only looks the schema up (ErrSchemaNotRegistered when the
// subject lacks it). Call it at startup to fail early when the registry is
// unreachable, rejects the schema or lacks it.
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
// Confluent format the first call registers the schema, so Encode may block on the
// registry; IsRetryable tells whether such a failure may pass when repeated. An
// invalid record yields ErrInvalidRecord and nothing is written.
func (c *Codec[T]) Encode(ctx context.Context, v T) ([]byte, error) {
	if err := c.rt.validate(&v); err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.rt.name, err)
	}
	native := c.rt.toNative(&v)
	native[VersionField] = int32(c.reader.Version)
	buf := make([]byte, 0, initialEncodeCap)
	var err error
	switch c.format {
	case Confluent:
		id, rerr := c.Register(ctx)
		if rerr != nil {
			return nil, fmt.Errorf("encode %s: %w", c.rt.name, rerr)
		}
		buf = append(buf, 0, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(buf[1:], id)
		buf, err = c.reader.codec.BinaryFromNative(buf, native)
	default:
		buf, err = c.reader.codec.SingleFromNative(buf, native)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.rt.name, err)
	}
	return buf, nil
}

// slow returns a codec of the same options that never uses the record type's own
// decoder (tests compare the two).
func (c *Codec[T]) slow() *Codec[T] {
	d := &Codec[T]{rt: c.rt, reader: c.reader, format: c.format, registry: c.registry, subject: c.subject,
		byFP: c.byFP, byID: map[uint32]*writer{}}
	return d
}

// Decode reads one record value in either wire format. Every error is a
// *DecodeError wrapping ErrTombstone, ErrMalformed, ErrUnknownSchema,
// ErrNewerSchema, ErrWrongRecordType, ErrIncompatibleSchema, ErrInvalidRecord, or a
// registry failure (IsRetryable). Decode blocks only to fetch an unknown Confluent
// schema id from the registry; the answer is cached.
func (c *Codec[T]) Decode(ctx context.Context, b []byte) (T, error) {
	var zero T
	de := &DecodeError{Record: c.rt.name}
	fail := func(err error) (T, error) {
		de.Err = err
		return zero, de
	}
	if len(b) == 0 {
		return fail(ErrTombstone)
	}
	var w *writer
	var body []byte
	switch b[0] {
	case 0xC3:
		if len(b) < soeHeaderLen || b[1] != 0x01 {
			return fail(fmt.Errorf("%w: single-object header is not 0xc3 0x01 and 8 fingerprint bytes", ErrMalformed))
		}
		de.Format, de.Fingerprint = SingleObject, binary.LittleEndian.Uint64(b[2:soeHeaderLen])
		var ok bool
		if w, ok = c.byFP[de.Fingerprint]; !ok {
			return fail(fmt.Errorf("%w: no known schema has this fingerprint", ErrUnknownSchema))
		}
		body = b[soeHeaderLen:]
	case 0x00:
		if len(b) < confluentHeaderLen {
			return fail(fmt.Errorf("%w: Confluent header shorter than %d bytes", ErrMalformed, confluentHeaderLen))
		}
		de.Format, de.SchemaID = Confluent, binary.BigEndian.Uint32(b[1:confluentHeaderLen])
		var err error
		if w, err = c.writerByID(ctx, de.SchemaID); err != nil {
			return fail(err)
		}
		body = b[confluentHeaderLen:]
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
		return nil, err // unknown ids are not cached: the id may be registered later
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
	rec, err := c.rt.fromNative(newFieldReader(c.reader, c.reader.Name, native))
	if err != nil {
		return zero, err
	}
	if err := c.rt.validate(&rec); err != nil {
		return zero, err
	}
	return rec, nil
}

// nativeFromBinary runs goavro on an untrusted body (its block counts bounded by
// maxGoavroBlockCount). The recover is a last line of defence: a goavro panic
// becomes ErrMalformed.
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
