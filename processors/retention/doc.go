// Package retention is larkline's evidence retention job (design §15): it removes chat
// text older than the organisation's retention period from Postgres and from the
// compacted evidence topic, and cleans the collection and window state that only
// served that evidence. It is on by default; every process warns at start when
// retention is off, or on while the process runs no retention role.
//
// Lark message evidence older than now − Options.Retention is redacted (ModeRedact:
// the row stays as a redacted version, marked as retention's so the drafts citing
// it are withdrawn but not as a recall, decisions D12) or deleted (ModeDelete: the
// row and its bindings go, a tombstone is published). In the same statement the AI
// drafts no person touched that cite the batch are withdrawn and the AI summary is
// emptied (issue #29); people's entries are never changed. Checkpoints of aged-out
// workspaces and stale window states are removed too.
//
// Each batch is first acknowledged by Kafka, then changed in Postgres in one
// statement, so a failure in between only publishes the same redaction again next
// run. A Postgres advisory lock keeps two runs apart (ErrBusy); a run stops between
// batches after MaxRunTime and the next carries on. docs/operations.md ("How the
// retention job works") has every rule and the known limits.
//
// Bounds: one database connection for the advisory lock plus one for its statements,
// at most one batch of records in memory. Logs carry workspace ids, row ids, hashes
// and counts, never message text; metrics are larkline_retention_*.
package retention
