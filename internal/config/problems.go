package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/larkline/larkline/internal/options"
)

// ErrInvalid is matched (errors.Is) by every error Load and Validate return for a
// configuration that is wrong, as opposed to one that could not be read.
var ErrInvalid = errors.New("invalid configuration")

// Problem is one thing wrong with a configuration: its Field is the key path, its
// Value the value as given (a string, quoted for strings; never a secret's).
type Problem = options.Problem

// Error lists every problem found in a configuration. It matches ErrInvalid.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "invalid configuration: " + e.Problems[0].Keyed()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Keyed())
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

// StageCheck runs one stage's Options.Check on the options the configuration maps
// onto and reports its problems under their keys ([Config.OptionProblems]).
type StageCheck func(*Config) []Problem

// ValidateWith is [Config.Validate] with the stages' rules, all problems in one
// *Error (matching ErrInvalid).
func (c *Config) ValidateWith(stages ...StageCheck) error {
	return asError(c.checked(nil, nil, stages))
}

// checked adds to problems (those found while loading) the file's own, then the
// stages'. A key already refused is not reported again: not by the file's rules
// when it did not parse (failed), not by a stage when the file or an earlier
// stage refused it (two stages that read one key would say the same thing twice,
// in their own words).
func (c *Config) checked(problems []Problem, failed map[string]bool, stages []StageCheck) []Problem {
	refused := make(map[string]bool, len(problems))
	for _, p := range problems {
		refused[p.Field] = true
	}
	for _, p := range c.validate() {
		if !failed[p.Field] {
			problems = append(problems, p)
			refused[p.Field] = true
		}
	}
	for _, stage := range stages {
		found := stage(c)
		said := make(map[Problem]bool, len(found))
		for _, p := range found {
			if !failed[p.Field] && !refused[p.Field] && !said[p] {
				problems = append(problems, p)
				said[p] = true
			}
		}
		for _, p := range found {
			refused[p.Field] = true
		}
	}
	return problems
}

// FieldKeys maps the Go fields of one package's Options onto the configuration keys
// that set them ("PageSize" → "lark.api.pageSize"). A list field filled from
// several keys maps each of its values: "Producer.LargeRecordTopics=<name>" →
// the key whose value <name> is; such an entry wins over the field's own.
type FieldKeys map[string]string

// key is the configuration key of a problem's field (and value), if any.
func (k FieldKeys) key(p options.Problem) (string, bool) {
	if v, ok := p.Value.(string); ok {
		if key, ok := k[p.Field+"="+v]; ok {
			return key, true
		}
	}
	key, ok := k[p.Field]
	return key, ok
}

// OptionProblems reports err, the error of a package's Options.Check, under the
// configuration's keys: each option problem becomes a Problem with the key that
// set the field, the key's value and source, and the package's message. The rules
// stay in the package; this only names them in the file's terms. It returns nil
// for a nil err. An error that carries no option problems, or a field keys does
// not map (a rule about a value the configuration does not set), is reported
// under stage with the package's whole message, so nothing is lost.
func (c *Config) OptionProblems(stage string, keys FieldKeys, err error) []Problem {
	if err == nil {
		return nil
	}
	ps := options.ProblemsOf(err)
	if len(ps) == 0 {
		return []Problem{{Field: stage, Message: err.Error()}}
	}
	out := make([]Problem, 0, len(ps))
	for _, p := range ps {
		key, ok := keys.key(p)
		if !ok {
			out = append(out, Problem{Field: stage, Message: p.String()})
			continue
		}
		out = append(out, Problem{Field: key, Value: c.display(key, p.Value), Source: c.Origin(key), Message: p.Message})
	}
	return out
}

// display shows the key's value as the file gives it, or the package's value
// when the key is not one (secrets never appear).
func (c *Config) display(key string, fallback any) string {
	if v, ok := c.value(key); ok {
		return display(v)
	}
	return display(fallback)
}

// value is the typed value of a leaf key, or false for a path that is not one.
func (c *Config) value(path string) (any, bool) {
	idx, err := loadSchema()
	if err != nil {
		return nil, false
	}
	k := idx.byPath[path]
	if k == nil || k.kind == kindSection {
		return nil, false
	}
	return idx.field(reflect.ValueOf(c).Elem(), k).Interface(), true
}
