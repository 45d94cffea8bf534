// Package deadletters lists and re-drives the records stages parked in the
// dead-letter topic (issue #19): `larkline deadletters list` and `larkline
// deadletters redrive`, and the exporter of larkline_deadletters_* metrics.
//
// A re-drive feeds a parked record back through its stage after the cause was fixed:
//
//   - sink: the record is read again from the evidence topic at the offset
//     the dead letter names (dead letters of evidence carry no value, decisions D9)
//     and written through the sink's own decoding, checks and evidence rule
//     (postgres.Redrive). Gone from that offset means a newer version of the message
//     replaced it (compaction: an edit, a recall, a retention tombstone): superseded,
//     nothing to do.
//   - synthesis, workspaces: the original value (kept in the dead letter, or read
//     again at its offset) is produced once more to its source topic with its key;
//     both consumers are idempotent (window state by compare-and-set; workspace
//     versions that are not newer are ignored).
//   - windows: not re-driven here; its state lives in Kafka; run a new processor
//     version (docs/operations.md).
//
// Checks (issue #29): a dead letter is re-driven only from and to its stage's input
// topic (RedriverOptions.SourceTopics; a dead letter naming another topic is refused,
// so a forged one cannot choose where larkline produces), and a record of a
// workspace and chat only when the chat is bound to that workspace (a redacted
// evidence version or a tombstone passes). Redrive's apply=false is a dry run: the
// same checks, nothing written, the outcome would_redrive; the CLI defaults to it.
//
// Idempotency: every re-drive that finished (applied, unchanged, superseded,
// reproduced) appends a marker to the dead-letter topic, a DeadLetter with reason
// "redriven" naming the dead letter's own partition and offset and the outcome in its
// error field. A dead letter with a marker is not re-driven again. A record still
// refused gets no marker and is tried again on the next re-drive.
package deadletters
