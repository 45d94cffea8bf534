package options

import (
	"fmt"
	"time"
)

// Duration is one duration option: its name in errors, where it lives, its default.
type Duration struct {
	Name    string
	V       *time.Duration
	Default time.Duration
}

// Durations sets every zero option to its default and returns an error naming the
// first negative one ("<Name> <value> is negative"); options before it keep their
// defaults, the rest are untouched.
func Durations(ds ...Duration) error {
	for _, d := range ds {
		switch {
		case *d.V == 0:
			*d.V = d.Default
		case *d.V < 0:
			return fmt.Errorf("%s %s is negative", d.Name, *d.V)
		}
	}
	return nil
}
