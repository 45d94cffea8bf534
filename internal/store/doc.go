// Package store is larkline's PostgreSQL repository: the schema and its migrations, and
// the reads and writes every stage makes on the tables of the design
// (lark-timeline-ingestion.md §9, §10, §12.4, §13): workspaces and their chat bindings,
// workspace_timeline_evidence, workspace_timeline_sync_states (chat collection
// checkpoints and non-empty synthesis windows), workspace_timeline_entries with
// workspace_timeline_entry_evidence, and workspace_timeline_summaries.
//
// # Schema
//
// Migrate applies the SQL files embedded from migrations/ in version order, each in
// its own transaction, under a Postgres advisory lock, recording version, name and
// checksum in schema_migrations. It is idempotent; a failing migration leaves the
// schema as it was; an applied migration whose file changed is an error.
//
// One deviation from the design's evidence table: a stored generated column chat_id,
// derived from a Lark message's source_key (chat/<chat>/message/<message>), indexed
// with (workspace_id, chat_id, occurred_at, id) so that a window's evidence is read
// without filtering the workspace's other chats. Being generated, it cannot disagree
// with source_key.
//
// # Guarantees
//
//   - Evidence upserts are keyed by (workspace_id, source, source_type, source_key) and
//     are a no-op when content_hash is unchanged; an older version (earlier
//     source_updated_at) never replaces a newer one, a deleted version always replaces
//     a live one and is never replaced by a live one. A batch of 256 rows or more
//     is COPYed into a temporary table and written by one statement per occurrence
//     of a key (a smaller one goes straight to INSERT … ON CONFLICT), in one
//     transaction; each row's outcome is reported in input order.
//   - Lists are keyset-paginated on (occurred_at, id) with a hard page limit, stable
//     when timestamps are equal.
//   - A window state row is created only when the window holds evidence, or when a
//     window whose evidence never came ends needing attention (MarkWindowNeedsAttention);
//     it moves by compare-and-set (ClaimWindow, TransitionWindow) and its claimant is
//     fenced by the attempt number (WindowLease), so a worker that lost its window to a
//     stale takeover cannot write to it. Staleness is measured on the database clock;
//     a live claimant refreshes it (HeartbeatWindow). A retried or taken-over window
//     keeps its cursor and chunk counters: it resumes at its next undone chunk.
//   - An evidence row keeps the evidence-topic offset of the record that first carried
//     its message (Evidence.Offset); RangeQuery.BelowOffset reads by it.
//   - A chat collection checkpoint never moves backwards.
//   - Synthesis never changes the text of a confirmed, hidden, human-created or
//     human-edited entry, nor a human summary.
//   - Every change to a binding or a bound workspace sends NOTIFY larkline_bindings
//     '<chat_id>' in the same transaction (ListenBindings).
//
// # Bounds
//
// The store validates input before writing and rejects it with errors wrapping
// ErrInvalid (ids via package ids, text that Postgres cannot store such as NUL bytes
// or invalid UTF-8, sizes above the exported Max* constants). It does not log, keeps
// no caches and owns no goroutines except inside ListenBindings. It does not decide
// eligibility, windowing or synthesis: callers do. Errors wrap sentinels (ErrNotFound,
// ErrConflict, ErrHumanOwned, ErrInvalid, ErrEmptyWindow, ErrTooMany, ErrMigration) or
// the driver's errors; IsRetryable is the one retry decision for this I/O boundary.
package store
