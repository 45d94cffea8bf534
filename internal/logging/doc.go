// Package logging builds larkline's structured loggers and holds the few helpers that
// keep logs private.
//
// Every larkline component takes an injected *slog.Logger; none uses a global logger.
// [New] builds the process logger from the two log settings (level and format), and
// [OrDiscard] turns a nil logger into one that discards, so constructors can accept nil.
//
// Logs carry ids and hashes only, never message text, tokens, secrets or raw payloads
// (design §15, §17). [HashID] gives a short, stable pseudonym for an identifier that
// should not be written out verbatim, such as a Lark chat id.
//
// The package does not redact attributes, sample, rotate files, or ship logs anywhere:
// callers choose what to log, and the process writes to a stream that the platform
// collects.
package logging
