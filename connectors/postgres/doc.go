// Package postgres is larkline's evidence sink: a franz-go consumer-group member that
// reads the compacted evidence topic (key <workspace>/<chat>/<message>, Avro
// EvidenceRecord values) and writes workspace_timeline_evidence through
// Writer (*store.Store), at least once and idempotently.
//
// # What a record does
//
//   - A version whose content_hash is already stored changes nothing (redelivery,
//     replay, a reset group); a new hash updates the row (an edit); a deleted version
//     redacts it (a recall: content emptied, deleted set). The store decides, keyed by
//     (workspace_id, source, source_type, source_key); an older version
//     (earlier source_updated_at) never replaces a newer one.
//   - A tombstone (a null, or empty, value) deletes the row of its key.
//   - A record that cannot be decoded (malformed bytes, an unknown or newer schema,
//     an invalid record), whose key does not match its value, that the store's
//     validation rejects, or that Postgres rejects with a data exception or a
//     constraint violation (SQLSTATE class 22 or 23) is parked in the dead-letter
//     topic as an Avro DeadLetter with its reason, and the sink goes on. The dead
//     letter is acknowledged by the broker before the record's offset is committed;
//     one too large for the dead-letter topic is sent without the original value
//     (its topic, partition and offset still locate it).
//
// # The latest offset carries the winner
//
// Compaction keeps a key's record at its latest offset. When the last version of a
// key in a batch is outranked by the stored row (a live version redelivered after
// its recall: Postgres keeps the redaction) and the stored row is a redaction, the
// sink publishes that redaction again to the key, acknowledged before the batch's
// offsets are committed, so that compaction, a rebuilt sink or any other reader of
// the topic never sees the text come back (republish.go, decisions D19). Reading it
// back changes nothing: it has the stored row's content hash and rank.
//
// # Batches and ordering
//
// One poll (at most MaxBatchRecords records) is one batch. Every record is decoded,
// and the table must end exactly as if the records had been applied one by one in
// offset order (a key always lives in one partition). Offset order is not version
// order: an edit or a recall read from history can sit below a redelivered original
// from the webhook, and which version stays depends on the row already stored. So
// the batch does not pick a winner per key: it hands the store, in one
// UpsertEvidence call and in offset order, every version of a key after the key's
// last tombstone, and the store applies them one by one under its version rule.
// Left out, and counted as superseded, are only versions that cannot change the
// outcome: those before the key's last tombstone, and a redelivery (the same content
// hash and rank as the version just before it). A key's tombstone runs first (one
// DeleteEvidence per workspace) and the versions after it in a later round. The calls
// of a round are split across Writers connections, each key in exactly one, and are
// independent transactions: the batch needs no atomicity because every call is
// idempotent and the offsets are committed only when all of them succeeded. When a
// call fails because of some row's data, the row the store names is parked, or the
// call is halved between keys, or one key's versions are tried one per call, until
// the bad rows are isolated; good rows are never parked, and the key is planned again
// without the parked version.
//
// Batches form a two-stage pipeline: while one batch is written (on its own
// goroutine), the next is fetched and decoded. Batches are written strictly one after
// the other and committed in order, so across batches, too, the versions of a key
// are applied in offset order.
//
// # Offsets, rebalances and outages
//
// Autocommit is off. A batch's offsets are committed (CommitRecords, the last record
// of each partition) only after its database writes and its dead-letter acks; a crash
// in between delivers the batch again, which changes nothing. The client uses
// kgo.BlockRebalanceOnPoll, and the sink allows rebalances only when no batch is in
// flight: whenever a poll brings nothing, and as soon as a rebalance waits
// (kgo.OnPartitionsCallbackBlocked), after which it finishes the batches in hand
// without starting another. OnPartitionsRevoked therefore always runs with every
// polled record committed or rewound, and a commit never lands on a partition this
// member no longer owns.
//
// A retryable failure (store.IsRetryable for Postgres, kafka.IsRetryable for the
// dead-letter producer and the commit, schemas.IsRetryable for the schema registry)
// pauses the batch and retries it with bounded exponential backoff and jitter
// (RetryBackoffMin to RetryBackoffMax) until it succeeds or Run's context ends:
// nothing is skipped. Heartbeats continue meanwhile (franz-go sends them from its own
// goroutine), so the member stays in the group. What must not happen is holding a
// rebalance for the length of an outage: when a rebalance waits for this member, the
// paused batches are given up: the consumer is rewound to their first offsets
// (kgo.Client.SetOffsets, before AllowRebalance), the rebalance proceeds, and the
// partitions this member keeps are read again from there while the others start at
// their committed offsets with their next owner. A rebalance therefore waits for at
// most one attempt in progress (AttemptTimeout, at most half the rebalance timeout)
// during an outage, and for at most two batch writes otherwise.
//
// Errors that are neither retryable nor about a record (an undefined table, a
// permission the database refuses, a registry that rejects the sink's credentials, a
// dead-letter topic the sink may not write) stop the sink: Run returns an error
// wrapping ErrFatal, with the batch uncommitted.
//
// # Lifecycle
//
// New validates the options; nothing connects until Run. Run consumes until its
// context ends, then finishes the in-flight batch (for at most DrainTimeout, after
// which the batch is left uncommitted and delivered again), leaves the group and
// returns. Close stops a running Run the same way and closes the Kafka client; the
// store and its pool belong to the caller.
//
// # Observability
//
// Metrics (registered on the injected registry): larkline_sink_evidence_total{outcome},
// larkline_sink_dead_lettered_total{reason}, larkline_sink_retries_total{operation},
// larkline_sink_batches_aborted_total{cause}, larkline_sink_batch_duration_seconds,
// larkline_sink_batch_records, larkline_sink_committed_records_total and the gauge
// larkline_sink_paused. Logs carry topics, partitions, offsets, workspace ids and
// hashed keys, never message text or record bytes.
//
// # Bounds
//
// The sink writes only workspace_timeline_evidence and the dead-letter topic. A recall
// it applies also withdraws or flags the entries citing the message and empties the AI
// summary, in the same transaction, by a trigger of the schema (migration 0005,
// decisions D12), whoever writes the redaction. It does
// not create topics or migrate the schema, decide eligibility or windows, or read
// the evidence it writes. It holds at most two batches in memory, and uses at most
// Writers database connections at a time.
package postgres
