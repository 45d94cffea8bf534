// Package schemas holds larkline's record schemas and the Avro codec of every
// record value that crosses a Kafka topic.
//
// The schemas are the embedded files <name>.v<version>.avsc (namespace io.larkline),
// one per record type, its current version (decisions D24):
//
//	EvidenceRecord        larkline.evidence.v1        key <workspace>/<chat>/<message>, compacted
//	ClosedWindow          larkline.windows.closed.v1  key <workspace>/<chat>
//	CollectionCheckpoint  larkline.checkpoints.v1     key <workspace>/<chat>, compacted
//	WorkspaceRecord       larkline.workspaces.v1      key <workspace>, compacted
//	DeadLetter            larkline.deadletter.v1      envelope of a parked record
//
// Every schema starts with schema_version, whose default is the file's version.
// Each record type has a Go struct with typed ids (keys from schemas/ids), a
// Validate method and a [Codec]; its fields' `avro:"<name>"` tags drive the
// conversion to and from goavro's native maps ("" or nil is null in a nullable
// field; timestamps are millisecond UTC).
//
// With a schema registry ([NewRegistry], franz-go's sr.Client; [WithRegistry]) Encode
// writes the Confluent wire format, registering the schema under <topic>-value on
// first use or, with AutoRegister off, only looking it up ([Codecs.Prepare] does it
// at start). Without one (tests) it writes the Avro single-object encoding. Decode
// reads both, never panics, and resolves data of an older schema version into the
// current struct (missing fields take their defaults); a newer one is refused
// (ErrNewerSchema), so readers roll out first. Its errors are a [*DecodeError]
// naming the writer schema and wrapping a sentinel; such records are parked in
// the dead-letter topic ([NewDeadLetter]), and only registry failures are retried
// ([IsRetryable]). A tombstone (empty value) is the caller's to handle.
//
// meta.go is the evidence metadata contract every producer of evidence follows:
// the metadata keys, the content hash and the redaction rule.
//
// The package does no Kafka or database I/O, logs nothing and keeps no metrics;
// its errors carry ids, codes and hashes, never message text.
package schemas
