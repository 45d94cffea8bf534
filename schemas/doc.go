// Package schemas holds larkline's record schemas and the Avro codec of every
// record value that crosses a Kafka topic.
//
// The schemas are the embedded files <name>.v<version>.avsc (namespace io.larkline):
//
//	EvidenceRecord        larkline.evidence.v1        key <workspace>/<chat>/<message>, compacted
//	ClosedWindow          larkline.windows.closed.v1  key <workspace>/<chat>
//	CollectionCheckpoint  larkline.checkpoints.v1     key <workspace>/<chat>, compacted
//	WorkspaceRecord       larkline.workspaces.v1      key <workspace>, compacted
//	DeadLetter            larkline.deadletter.v1      envelope of a parked record
//
// Every schema starts with an int field schema_version whose default is the version
// in its file name; there is one file per record type, its current version (no
// earlier version was ever shipped: decisions D24). A change makes the file the next
// version; readers meet the older one through the registry and resolve it. Keys are
// built by schemas/ids, not here.
//
// Each record type has a Go struct with typed ids, a Validate method, and a
// [Codec] made by its constructor (NewEvidenceCodec, ...). Conversion to and from
// goavro's native maps is explicit, field by field; nullable Avro strings are plain
// Go strings where "" is null. Timestamps are timestamp-millis and decode in UTC.
//
// # Wire formats
//
// With a schema registry ([NewRegistry] on franz-go's sr.Client, [WithRegistry]),
// the format of every deployment, Encode writes the Confluent wire format (0x00,
// 4-byte big-endian schema id, body), registering the schema under <topic>-value on
// first use, or, with [RegistryOptions].AutoRegister off, only looking it up
// ([ErrSchemaNotRegistered] when the subject lacks it; [Codecs.Prepare] does it for
// every codec at start). Without one (tests) it writes the Avro
// single-object encoding (0xC3 0x01, 8-byte little-endian CRC-64-AVRO fingerprint,
// body). Decode reads both.
//
// # Errors and evolution
//
// Decode never panics. Bytes it cannot turn into a valid record give a
// [*DecodeError] naming the writer schema (fingerprint or id) and wrapping a
// sentinel: [ErrMalformed], [ErrUnknownSchema], [ErrNewerSchema],
// [ErrWrongRecordType], [ErrIncompatibleSchema], [ErrInvalidRecord],
// [ErrTombstone]. Such records are parked in the dead-letter topic
// ([NewDeadLetter]), never dropped; only registry failures are retried
// ([IsRetryable]). Data written with an older schema version of the record type
// (met by its registry id) is decoded with that writer schema and resolved into
// the current struct: fields the writer lacked take the current schema's defaults
// (goavro does not resolve; native.go does). goavro's
// block counts are bounded process-wide (maxGoavroBlockCount), so no count in
// corrupted bytes can make it allocate without bound.
//
// A reader refuses records of a version newer than it knows (ErrNewerSchema), so a
// new version rolls out readers first. The current ClosedWindow (version 3) names
// its evidence as an offset range of the chat's evidence partition
// ([ClosedWindow.Ranged]); synthesis waits for the evidence sink's committed offset
// to pass its end. Its evidence list and aggregate hash stay in the schema for
// records that list their evidence.
//
// The evidence codec decodes bodies of its current schema with a decoder of its
// own (fastevidence.go: the same validation, no goavro maps);
// a test and a fuzz target hold it to goavro's result on every input.
//
// # The evidence metadata contract
//
// meta.go holds what every producer of evidence agrees on beyond the schema: the keys
// metadata_json may hold ([MetaKeys]; never tokens, envelopes or text), the content
// hash ([ContentHash]: an edit or a recall changes it, a redelivery does not), the
// ineligibility reasons (Ineligible*), and the redaction rule ([RedactMetadata],
// [RedactedContentHash]) that a recall (the Lark normalizer) and the retention job
// (processors/retention, which adds [MetaRetention]) both follow, so that every
// redaction of a message is the same version wherever it was made.
//
// # Tombstones
//
// A null Kafka value deletes a key of a compacted topic. It is not a record: the
// producer writes a nil value itself, and a consumer checks for an empty value
// before calling Decode (which answers [ErrTombstone]).
//
// # Bounds
//
// This package does no Kafka or database I/O. Its only network use is the schema
// registry client (franz-go's sr.Client): a per-request timeout, no redirects, and
// bounded caches. It does not log and keeps no metrics; callers count and log
// the errors it returns, which carry ids, codes and hashes, never message text.
package schemas
