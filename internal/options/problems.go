package options

import (
	"errors"
	"fmt"
	"strings"
)

// Problem is one value that breaks a rule: an option of a package, or a key of
// the configuration (internal/config reports the packages' problems under their
// keys, D17).
type Problem struct {
	// Field is the option's Go name in its Options struct ("PageSize"; for a
	// nested struct, the path "Producer.Linger"), or the configuration's key path
	// (kafka.producer.acks; http.apiTokens[1].sha256) or environment variable.
	Field string
	// Value is the offending value: as the package saw it (after its defaults),
	// or as the configuration gives it (quoted for strings, "[REDACTED]" for a set
	// secret). nil or "" when the problem is about no one value.
	Value any
	// Source is where a configuration value came from ("larkline.yaml:12", "env
	// LARKLINE_…", "default"); empty for an option or when unknown.
	Source string
	// Message says what is allowed, and why where it is not obvious ("must be
	// between 1 and 50: Lark's message list accepts page_size 1-50").
	Message string
}

// String is "Field value: message", or "Field: message" for a problem about no
// value (a missing dependency).
func (p Problem) String() string {
	if p.Value == nil {
		return p.Field + ": " + p.Message
	}
	return fmt.Sprintf("%s %v: %s", p.Field, p.Value, p.Message)
}

// Keyed is the problem as the configuration reports it: "key = value (source):
// message", without the parts that are empty.
func (p Problem) Keyed() string {
	var b strings.Builder
	b.WriteString(p.Field)
	if v := fmt.Sprint(p.Value); p.Value != nil && v != "" {
		b.WriteString(" = " + v)
	}
	if p.Source != "" {
		b.WriteString(" (" + p.Source + ")")
	}
	return b.String() + ": " + p.Message
}

// Error lists every problem a package found in its options. It matches (errors.Is)
// the package's sentinel, such as reconcile.ErrInvalidOptions, and its text is the
// sentinel's followed by each problem.
type Error struct {
	Sentinel error
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return e.Sentinel.Error() + ": " + strings.Join(parts, "; ")
}

func (e *Error) Unwrap() error { return e.Sentinel }

// Problems collects the problems of one Options value. The zero value is ready.
type Problems struct {
	list []Problem
}

// Add records that field, whose value is value, breaks the rule format says.
func (p *Problems) Add(field string, value any, format string, args ...any) {
	p.list = append(p.list, Problem{Field: field, Value: value, Message: fmt.Sprintf(format, args...)})
}

// Durations sets every zero option to its default and records each negative one
// ("must not be negative").
func (p *Problems) Durations(ds ...Duration) {
	for _, d := range ds {
		switch {
		case *d.V == 0:
			*d.V = d.Default
		case *d.V < 0:
			p.Add(d.Name, *d.V, "must not be negative")
		}
	}
}

// Len is the number of problems recorded so far.
func (p *Problems) Len() int { return len(p.list) }

// Err returns nil when nothing was recorded, otherwise an *Error matching sentinel.
func (p *Problems) Err(sentinel error) error {
	if len(p.list) == 0 {
		return nil
	}
	return &Error{Sentinel: sentinel, Problems: append([]Problem(nil), p.list...)}
}

// ProblemsOf returns the problems err carries (through any wrapping), or nil when it
// carries none: an error that is not about option values.
func ProblemsOf(err error) []Problem {
	var e *Error
	if errors.As(err, &e) {
		return e.Problems
	}
	return nil
}
