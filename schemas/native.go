package schemas

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/linkedin/goavro/v2"
)

// Conversion between goavro's native form and a record struct, driven by the
// fields' `avro:"<name>"` tags and the reader schema: a string, bool, int32 or
// int (Avro int), int64 (long), time.Time (timestamp-millis, UTC), []byte or a
// slice of strings (array). A field of a ["null", X] union is null when its Go
// value is "" or nil. goavro decodes with the writer schema and does not
// resolve; fromNative does the part of Avro schema resolution larkline needs: a
// field the writer lacked takes the reader schema's default, and the usual
// promotions apply (int to long, a plain value to a nullable union and back, a
// plain long to a timestamp). Anything else is ErrIncompatibleSchema.

// field is one tagged struct field and the reader schema's field it maps to.
type field struct {
	index int    // in the struct
	name  string // in the schema
	union string // X of a ["null", X] union; "" when not nullable
}

var timeType = reflect.TypeFor[time.Time]()

// fieldsOf maps the tagged fields of T onto s.
func fieldsOf[T any](s *Schema) ([]field, error) {
	t := reflect.TypeFor[T]()
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("avro")
		if name == "" {
			continue
		}
		k := f.Type.Kind()
		if !(f.Type == timeType || k == reflect.String || k == reflect.Bool || k == reflect.Int || k == reflect.Int32 ||
			k == reflect.Int64 || k == reflect.Slice && (f.Type.Elem().Kind() == reflect.Uint8 || f.Type.Elem().Kind() == reflect.String)) {
			return nil, fmt.Errorf("%s.%s: Go type %s has no Avro mapping", s.Name, name, f.Type)
		}
		if !slices.Contains(s.fields, name) {
			return nil, fmt.Errorf("%s.%s: no such field in the schema", s.Name, name)
		}
		out = append(out, field{index: i, name: name, union: s.nullable[name]})
	}
	return out, nil
}

// toNative returns v's fields in goavro's native form; a field the struct does not
// tag is left to its schema default.
func toNative(fields []field, v reflect.Value) map[string]any {
	m := make(map[string]any, len(fields)+1)
	for _, f := range fields {
		fv := v.Field(f.index)
		var x any
		switch fv.Kind() {
		case reflect.Struct:
			x = fv.Addr().Interface().(*time.Time).UnixMilli()
		case reflect.String:
			x = fv.String()
		case reflect.Bool:
			x = fv.Bool()
		case reflect.Int, reflect.Int32:
			x = int32(fv.Int())
		case reflect.Int64:
			x = fv.Int()
		case reflect.Slice:
			if fv.Type().Elem().Kind() == reflect.Uint8 {
				x = fv.Bytes()
				break
			}
			a := make([]any, fv.Len())
			for i := range a {
				a[i] = fv.Index(i).String()
			}
			x = a
		}
		if f.union != "" {
			if fv.IsZero() {
				x = nil
			} else {
				x = goavro.Union(f.union, x)
			}
		}
		m[f.name] = x
	}
	return m
}

// fromNative sets the tagged fields of v (a settable struct) from a record decoded
// with its writer schema, resolved against the reader schema s. Bytes never alias
// the input.
func fromNative(s *Schema, fields []field, native any, v reflect.Value) error {
	m, ok := native.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: %s is a %T, want a record", ErrIncompatibleSchema, s.Name, native)
	}
	for _, f := range fields {
		x, ok := m[f.name]
		if !ok {
			if x, ok = s.defaults[f.name]; !ok {
				return incompatible(s, f.name, "missing in the writer schema and has no default")
			}
		}
		if x == nil && f.union != "" {
			continue // null: the zero value
		}
		if err := setNative(v.Field(f.index), x); err != nil {
			return incompatible(s, f.name, "%s", err)
		}
	}
	return nil
}

func incompatible(s *Schema, name, format string, args ...any) error {
	return fmt.Errorf("%w: %s.%s: %s", ErrIncompatibleSchema, s.Name, name, fmt.Sprintf(format, args...))
}

// setNative sets fv from a native value (JSON defaults arrive as float64).
func setNative(fv reflect.Value, x any) error {
	u := unwrap(x)
	switch fv.Kind() {
	case reflect.String:
		if s, ok := u.(string); ok {
			fv.SetString(s)
			return nil
		}
		return fmt.Errorf("want a string, have %T", x)
	case reflect.Bool:
		if b, ok := u.(bool); ok {
			fv.SetBool(b)
			return nil
		}
		return fmt.Errorf("want a boolean, have %T", x)
	case reflect.Int, reflect.Int32, reflect.Int64:
		if n, ok := integer(u, fv.Kind() == reflect.Int64); ok {
			fv.SetInt(n)
			return nil
		}
		return fmt.Errorf("want an integer, have %T", x)
	case reflect.Struct: // time.Time
		p := fv.Addr().Interface().(*time.Time)
		switch t := u.(type) {
		case time.Time:
			*p = t.UTC()
			return nil
		case int64, float64:
			if n, ok := integer(t, true); ok {
				*p = time.UnixMilli(n).UTC()
				return nil
			}
		}
		return fmt.Errorf("want a timestamp, have %T", x)
	}
	if fv.Type().Elem().Kind() == reflect.Uint8 {
		if b, ok := u.([]byte); ok {
			fv.SetBytes(bytes.Clone(b))
			return nil
		}
		return fmt.Errorf("want bytes or null, have %T", x)
	}
	a, ok := x.([]any)
	if !ok {
		return fmt.Errorf("want an array, have %T", x)
	}
	if len(a) == 0 {
		return nil
	}
	out := reflect.MakeSlice(fv.Type(), len(a), len(a))
	for i, item := range a {
		s, ok := unwrap(item).(string)
		if !ok {
			return fmt.Errorf("item %d is a %T, want a string", i, item)
		}
		out.Index(i).SetString(s)
	}
	fv.Set(out)
	return nil
}

// integer reads an int, or a long when allowLong, from goavro or a JSON default.
func integer(x any, allowLong bool) (int64, bool) {
	switch n := x.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, allowLong
	case float64:
		return int64(n), n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 &&
			(allowLong || n >= math.MinInt32 && n <= math.MaxInt32)
	}
	return 0, false
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
