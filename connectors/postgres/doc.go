// Package postgres is larkline's evidence sink: a franz-go consumer-group member that
// reads the compacted evidence topic (key <workspace>/<chat>/<message>, Avro
// EvidenceRecord values) and writes workspace_timeline_evidence through Writer
// (*store.Store), at least once and idempotently.
//
// A batch is one poll; every version of a key is handed to the store in offset order
// and the store's version rule decides which stays, so the table ends as if the
// records had been applied one by one. Offsets are committed only after the writes
// and the dead-letter acks; records the data or the schema refuses are parked in the
// dead-letter topic; a retryable outage pauses and retries without skipping, and a
// rebalance never waits for the length of an outage. A redaction outranked by a late
// live version is published again so compaction keeps it (decisions D19).
//
// New validates the options; Run consumes and drains; Close stops Run and closes the
// Kafka client. Logs carry ids and hashed keys, never message text or record bytes.
// docs/operations.md ("How the evidence sink writes a batch") has every rule: record
// outcomes, batches and ordering, offsets, rebalances, outages and bounds.
package postgres
