// Package options holds the rule larkline's constructors apply to their duration
// options, so that every stage reads its zero values the same way: zero takes the
// documented default, a negative value is an error naming the option. It does no
// I/O and keeps no state; callers wrap its error in their own sentinel
// (ErrInvalidOptions and the like).
package options
