// Package options holds the rules larkline's constructors share for their options.
//
// Durations: every stage reads its zero values the same way: zero takes the
// documented default, a negative value is an error naming the option.
//
// Problems and Error: a package owns the rules of its options (ranges, relations
// between them, limits of the systems it talks to) and reports each broken one as a
// Problem naming the option's Go field. The package's constructor returns them as an
// *Error matching its sentinel (ErrInvalidOptions); the configuration layer, which
// maps YAML keys onto those fields, reports the same problems under the key's name
// and source (cmd/larkline's option checks), as Problems too (Field the key, Source
// where its value came from; Keyed renders them). No rule is written twice.
//
// Unset: an option whose 0 is a meaningful value (no retries, send at once) is a
// pointer, nil taking the default; there is no -1 sentinel.
//
// It does no I/O and keeps no state.
package options
