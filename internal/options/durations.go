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
// first negative one ("<Name> <value> is negative"). It is [Problems.Durations]
// for constructors that report one problem.
func Durations(ds ...Duration) error {
	var p Problems
	p.Durations(ds...)
	if len(p.list) == 0 {
		return nil
	}
	return fmt.Errorf("%s %s is negative", p.list[0].Field, p.list[0].Value)
}
