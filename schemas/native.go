package schemas

import (
	"bytes"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/linkedin/goavro/v2"
)

// This file converts between goavro's native form (map[string]any with goavro's
// union, logical-type and numeric conventions) and Go values, explicitly, field by
// field. goavro decodes with the writer schema and does not resolve; reading here
// does the part of Avro schema resolution larkline needs: a field the writer schema
// did not have takes the reader schema's default, and the usual promotions apply
// (int to long, a plain value to a nullable union and back, a long without logical
// type to a timestamp). Anything else is ErrIncompatibleSchema.

// ---- writing

func millis(t time.Time) int64 { return t.UnixMilli() }

// optMillis encodes an optional timestamp whose field defaults to 0: the zero time
// is 0 (the epoch), which optTimestamp reads back as the zero time.
func optMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// nullableString encodes "" as null.
func nullableString(s string) any {
	if s == "" {
		return nil
	}
	return goavro.Union("string", s)
}

// nullableBytes encodes nil as null; an empty non-nil slice stays empty bytes.
func nullableBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return goavro.Union("bytes", b)
}

// ---- reading

// fieldReader reads one record's native map: a field the writer lacked takes the
// reader schema's default. The first problem is kept in err; later calls return
// zero values.
type fieldReader struct {
	s    *Schema // the reader schema
	name string  // the record's full name in s
	m    map[string]any
	err  error
}

func newFieldReader(s *Schema, name string, v any) *fieldReader {
	r := &fieldReader{s: s, name: name}
	m, ok := v.(map[string]any)
	if !ok {
		r.err = fmt.Errorf("%w: %s is a %T, want a record", ErrIncompatibleSchema, name, v)
		return r
	}
	r.m = m
	return r
}

func (r *fieldReader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s.%s: %s", ErrIncompatibleSchema, r.name, name, fmt.Sprintf(format, args...))
	}
}

// get returns the writer's value of a field or, when the writer had no such field,
// the reader schema's default.
func (r *fieldReader) get(name string) (any, bool) {
	if r.err != nil {
		return nil, false
	}
	if v, ok := r.m[name]; ok {
		return v, true
	}
	if def, ok := r.s.records[r.name].defaults[name]; ok {
		return def, true
	}
	r.fail(name, "missing in the writer schema and has no default")
	return nil, false
}

// unwrap strips goavro's union wrapper {"type": value} from a scalar.
func unwrap(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for _, inner := range m {
			return inner
		}
	}
	return v
}

func (r *fieldReader) str(name string) string {
	v, ok := r.get(name)
	if !ok {
		return ""
	}
	if s, ok := unwrap(v).(string); ok {
		return s
	}
	r.fail(name, "want a string, have %T", v)
	return ""
}

// optStr reads a nullable string; null is "".
func (r *fieldReader) optStr(name string) string {
	v, ok := r.get(name)
	if !ok || v == nil {
		return ""
	}
	if s, ok := unwrap(v).(string); ok {
		return s
	}
	r.fail(name, "want a string or null, have %T", v)
	return ""
}

func (r *fieldReader) boolean(name string) bool {
	v, ok := r.get(name)
	if !ok {
		return false
	}
	if b, ok := unwrap(v).(bool); ok {
		return b
	}
	r.fail(name, "want a boolean, have %T", v)
	return false
}

// integer returns an int or long (JSON defaults arrive as float64).
func (r *fieldReader) integer(name string, allowLong bool) (int64, bool) {
	v, ok := r.get(name)
	if !ok {
		return 0, false
	}
	switch n := unwrap(v).(type) {
	case int32:
		return int64(n), true
	case int64:
		if allowLong {
			return n, true
		}
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			if allowLong || (n >= math.MinInt32 && n <= math.MaxInt32) {
				return int64(n), true
			}
		}
	}
	r.fail(name, "want an integer, have %T", v)
	return 0, false
}

func (r *fieldReader) long(name string) int64 {
	n, _ := r.integer(name, true)
	return n
}

func (r *fieldReader) int32(name string) int32 {
	n, _ := r.integer(name, false)
	return int32(n)
}

// timestamp reads a timestamp-millis (or a plain long of Unix milliseconds) in UTC.
func (r *fieldReader) timestamp(name string) time.Time {
	v, ok := r.get(name)
	if !ok {
		return time.Time{}
	}
	switch t := unwrap(v).(type) {
	case time.Time:
		return t.UTC()
	case int64:
		return time.UnixMilli(t).UTC()
	case float64:
		if t == math.Trunc(t) && t >= math.MinInt64 && t < math.MaxInt64 {
			return time.UnixMilli(int64(t)).UTC()
		}
	}
	r.fail(name, "want a timestamp, have %T", v)
	return time.Time{}
}

// optTimestamp reads a timestamp whose 0 (the epoch, the field's default) means
// unknown: it returns the zero time for it.
func (r *fieldReader) optTimestamp(name string) time.Time {
	t := r.timestamp(name)
	if t.UnixMilli() == 0 {
		return time.Time{}
	}
	return t
}

// optBytes reads nullable bytes; null is nil. The result never aliases the input.
func (r *fieldReader) optBytes(name string) []byte {
	v, ok := r.get(name)
	if !ok || v == nil {
		return nil
	}
	switch b := unwrap(v).(type) {
	case []byte:
		return bytes.Clone(b)
	case string: // a JSON default: code points 0-255 are the bytes
		out := make([]byte, 0, len(b))
		for _, c := range b {
			if c > 0xff {
				r.fail(name, "default has a code point above 255")
				return nil
			}
			out = append(out, byte(c))
		}
		return out
	}
	r.fail(name, "want bytes or null, have %T", v)
	return nil
}

// list reads an array.
func (r *fieldReader) list(name string) []any {
	v, ok := r.get(name)
	if !ok {
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		r.fail(name, "want an array, have %T", v)
	}
	return a
}

// records reads an array of records: a field reader per item.
func (r *fieldReader) records(name string) []*fieldReader {
	a, item := r.list(name), r.s.records[r.name].items[name]
	if item == "" && r.err == nil {
		r.fail(name, "the reader schema's items are not records")
	}
	if r.err != nil {
		return nil
	}
	out := make([]*fieldReader, len(a))
	for i, x := range a {
		out[i] = newFieldReader(r.s, item, x)
	}
	return out
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
