package schemas

import (
	"bytes"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/linkedin/goavro/v2"
)

// Conversion between goavro's native form and Go values, field by field. goavro
// decodes with the writer schema and does not resolve; fieldReader does the part of
// Avro schema resolution larkline needs: a field the writer lacked takes the reader
// schema's default, and the usual promotions apply (int to long, a plain value to a
// nullable union and back, a plain long to a timestamp). Anything else is
// ErrIncompatibleSchema.

func millis(t time.Time) int64 { return t.UnixMilli() }

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

// fieldReader reads one record's native map against the reader schema s. The first
// problem is kept in err; later calls return zero values.
type fieldReader struct {
	s   *Schema
	m   map[string]any
	err error
}

func newFieldReader(s *Schema, v any) *fieldReader {
	r := &fieldReader{s: s}
	if r.m, _ = v.(map[string]any); r.m == nil {
		r.err = fmt.Errorf("%w: %s is a %T, want a record", ErrIncompatibleSchema, s.Name, v)
	}
	return r
}

func (r *fieldReader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s.%s: %s", ErrIncompatibleSchema, r.s.Name, name, fmt.Sprintf(format, args...))
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
	if def, ok := r.s.defaults[name]; ok {
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
	if v, ok := r.get(name); !ok || v == nil {
		return ""
	}
	return r.str(name)
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
func (r *fieldReader) integer(name string, allowLong bool) int64 {
	v, ok := r.get(name)
	if !ok {
		return 0
	}
	switch n := unwrap(v).(type) {
	case int32:
		return int64(n)
	case int64:
		if allowLong {
			return n
		}
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 && (allowLong || n >= math.MinInt32 && n <= math.MaxInt32) {
			return int64(n)
		}
	}
	r.fail(name, "want an integer, have %T", v)
	return 0
}

func (r *fieldReader) long(name string) int64  { return r.integer(name, true) }
func (r *fieldReader) int32(name string) int32 { return int32(r.integer(name, false)) }

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

// optBytes reads nullable bytes; null is nil. The result never aliases the input.
func (r *fieldReader) optBytes(name string) []byte {
	v, ok := r.get(name)
	if !ok || v == nil {
		return nil
	}
	if b, ok := unwrap(v).([]byte); ok {
		return bytes.Clone(b)
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
