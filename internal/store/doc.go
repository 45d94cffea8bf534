// Package store is larkline's PostgreSQL repository: the schema and its migrations, and
// the reads and writes every stage makes on the tables of the design
// (lark-timeline-ingestion.md §9, §10, §12.4, §13): workspaces and their chat bindings,
// evidence, sync states (collection checkpoints, synthesis windows), timeline entries
// with their evidence, and summaries.
//
// Migrate applies the embedded migrations under an advisory lock. Evidence upserts are
// idempotent and follow one version rule; lists are keyset-paginated; window state
// moves by compare-and-set with a fenced lease; a human's text is never changed by
// synthesis; every binding change sends NOTIFY larkline_bindings in its transaction.
//
// The store validates input (errors wrap ErrInvalid), does not log, keeps no cache and
// decides no eligibility, windowing or synthesis. Errors wrap the documented sentinels
// or the driver's; IsRetryable is the one retry decision for this I/O boundary.
// docs/operations.md ("How the store keeps the tables") has the schema, every
// guarantee and the bounds.
package store
