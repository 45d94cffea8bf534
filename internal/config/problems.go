package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error Load and Validate return for a
// configuration that is wrong, as opposed to one that could not be read.
var ErrInvalid = errors.New("invalid configuration")

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path is the key path (kafka.producer.acks; http.apiTokens[1].sha256), or the
	// environment variable for a variable that names no key.
	Path string
	// Value is the offending value as given, quoted for strings; "[REDACTED]" for a
	// set secret; empty when the problem is not about one value.
	Value string
	// Source is where the value came from ("larkline.yaml:12", "env LARKLINE_…",
	// "default"); empty when unknown.
	Source string
	// Message says what is wrong and what is allowed.
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Path)
	if p.Value != "" {
		b.WriteString(" = ")
		b.WriteString(p.Value)
	}
	if p.Source != "" {
		b.WriteString(" (")
		b.WriteString(p.Source)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(p.Message)
	return b.String()
}

// Error lists every problem found in a configuration. It matches ErrInvalid.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "invalid configuration: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func asError(problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	return &Error{Problems: problems}
}
