// Package retention is larkline's evidence retention job (design §15): it removes chat
// text that is older than the organisation's retention period from Postgres and from
// the compacted evidence topic, and cleans the collection and window state that only
// served that evidence. It is on by default (internal/config: retention.enabled true,
// design §21); the retention role runs it, and every process warns at start when
// retention is turned off, or when it is on but the process runs no retention role.
//
// # What is due
//
// Lark message evidence (source lark, source_type lark_message) whose occurred_at is
// strictly before the cutoff, now − Options.Retention, evaluated once per run. A row
// at the cutoff or later is kept. Evidence of other sources is never touched.
//
// # Modes
//
//   - ModeRedact keeps the row (and its entry bindings) as a redacted version, the
//     same one a recall produces (schemas.RedactMetadata, schemas.RedactedContentHash): content "",
//     deleted = true, synthesis_eligible = false, metadata reduced to structure and
//     identity (chat, thread, reply, message and sender type; attachment keys, file
//     names and mentions are dropped), and the content_hash of a redaction of that
//     message type, so a redaction is recognisable by its hash wherever it appears.
//     Unlike a recall, its metadata carries "retention": true (schemas.MetaRetention):
//     a recall withdraws the AI drafts citing the message (migration 0005), a
//     retention redaction must not (decisions D12).
//     Beyond a recall it also clears actor_display_name (a cached profile value);
//     actor_id (an opaque open_id), the ids and the times stay. The redacted version
//     is published to the evidence topic (ingest path "manual": the schema has no
//     retention path), so compaction drops the text there too. A row already in
//     retention's form (its marker included) is skipped; one that merely looks
//     redacted (a recall's redaction, any deleted row without text) is redacted
//     again, with the marker.
//   - ModeDelete deletes the row, which cascades to its workspace_timeline_entry_evidence
//     bindings, and publishes a tombstone (null value) for its key
//     <workspace>/<chat>/<message> to the evidence topic.
//
// # What the timeline keeps
//
// Derived text goes with the evidence (issue #29). In the statement that redacts or
// deletes a batch (one transaction), the AI drafts no person touched (source ai,
// status draft, never human-edited) that cite a row of the batch are withdrawn as a
// recall withdraws them (status hidden, title and body emptied, withdrawn_at), and
// when one was, the workspace's AI summary loses its text and is due for a refresh.
// Entries of people, and AI entries a person confirmed, edited or hid, are the
// people's and are never changed. In delete mode entries lose their bindings to
// deleted evidence (the cascade), so an entry may end up with no evidence; in redact
// mode the bindings stay and point at redacted rows, which the API shows as deleted
// messages. Drafts of evidence redacted by runs before this rule are not revisited.
//
// # State of aged-out workspaces
//
// A workspace is aged out when it has no Lark evidence at or after the cutoff and
// none of its chat collection checkpoints (sync states lark/lark_messages) moved or
// was written since the cutoff. Its checkpoints are deleted, after a tombstone for
// each checkpoint-topic key <workspace>/<chat> (the window processor ignores
// checkpoint tombstones: coverage never moves backwards). If reconciliation ever runs
// for such a workspace again it starts from its ingestion lookback, as for a new chat.
//
// Synthesis window states (system/lark_timeline_window, every processor namespace)
// that have not changed since the cutoff are deleted. A window row is created only
// after its window closed, so such a window also ended before the cutoff. The window
// processor's own state ages out by itself (processors/windows Options.Retention) and
// it counts evidence older than that as aged out, so the versions and tombstones
// published here never reopen a window.
//
// # Order, idempotency and bounds
//
// Work goes in batches of Options.BatchSize rows, keyset-paginated per workspace by
// (occurred_at, id) on the evidence time index. Each batch is first produced to Kafka
// and acknowledged (acks=all, idempotent producer, kafka.NewClientOptions), and only
// then changed in Postgres in one statement. A failure in between leaves Postgres as
// it was, and the next run publishes the same redaction or tombstone again, which is
// harmless: the evidence sink applies a redaction or a tombstone idempotently and
// compaction keeps one. Once Kafka acknowledged a batch its database change runs to
// completion even when the run is being cancelled (bounded by DBTimeout). A run stops
// between batches after Options.MaxRunTime and reports Complete = false; the next run
// carries on, because done rows no longer match. A Postgres advisory lock keeps two
// runs (two replicas, or the CLI next to a running job) from working at once: the
// second gets ErrBusy. A dry run takes no lock, writes nothing and counts what a run
// would do.
//
// Known limit: a live edit of a message past retention that reaches Kafka after its
// redaction stays on the topic until compaction meets a later version of that key
// (Postgres keeps the redaction: a live version never replaces a deleted one).
// In delete mode the sink re-inserts such a late version and the next run deletes it
// again.
//
// # Bounds
//
// The job holds one database connection for the advisory lock plus one for its
// statements, and at most one batch of records in memory. Logs carry workspace ids,
// row ids, hashes and counts, never message text. Metrics: larkline_retention_rows_total
// {action=redacted|deleted|checkpoints_removed|windows_removed},
// larkline_retention_failures_total{reason=kafka|postgres|encode|invalid_row} and
// larkline_retention_last_success_timestamp_seconds (a complete, non-dry run).
package retention
