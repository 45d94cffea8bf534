package kafka

import "strconv"

// Record and batch size limits.
//
// Kafka's defaults stop at about 1 MB: a broker accepts record batches of up to
// message.max.bytes (1,048,588) unless a topic's max.message.bytes says otherwise,
// sarama's producer refuses records (and closes batches) at Producer.MaxMessageBytes
// (1 MiB in sarama 1.45) and franz-go's at ProducerBatchMaxBytes (1,000,012). A
// closed window carries one entry per message, so a burst of 10,000 messages into
// one chat makes a closed-window record of about 2 MB, and the last loop record of
// the window processor's fold, which carries the refs folded so far, about 1.2 MB.
// The limits below let such records through, explicitly, on every hop:
//
//   - the producer: sarama's Producer.MaxMessageBytes (SaramaConfig) and franz-go's
//     ProducerBatchMaxBytes for the topics in ProducerOptions.LargeRecordTopics are
//     MaxBatchBytes;
//   - the broker: DefaultTopicSpecs gives the closed-window and dead-letter topics
//     max.message.bytes = MaxBatchBytes, and the topic manager NewGoka installs
//     creates (or raises) Goka's <group>-loop and <group>-table topics with it;
//   - the consumers: a fetch returns the first record batch of a partition whole
//     even when it is larger than the fetch limits (KIP-74), so franz-go's
//     FetchMaxBytes and FetchMaxPartitionBytes stay at their defaults (stated
//     explicitly), and BrokerMaxReadBytes, the one hard limit on a response, is
//     large enough for a full fetch plus one batch of MaxBatchBytes. Sarama reads
//     with Consumer.Fetch.Max = 0 (no limit but sarama.MaxResponseSize, 100 MiB).
//
// # The largest window that fits
//
// A closed-window record is a few hundred bytes of window fields plus, per message,
// its Avro entry: the evidence key (2-byte length, workspace, '/', chat, '/',
// message), the message id (1-2-byte length), occurred_at and source_updated_at
// (7-byte longs until the year 4199), the content hash (2-byte length, 64 hex) and
// the deleted flag: workspace + chat + 2·message + 86 bytes (+1 per id of 64 bytes
// or more). A loop record of the fold carries per message less than that (id,
// times, hash and flags: message + 82 bytes), and group-table values less still.
// With MaxRecordBytes = 16 MiB:
//
//   - Lark ids (chat and message ids of 35 to 38 bytes), workspace id of up to 128
//     bytes: at most 330 bytes per entry, so every window of up to 50,000 messages
//     fits; with a workspace id of 16 bytes (about 200 bytes per entry), up to
//     about 80,000 do;
//   - ids at the record contract's limits (128 bytes each, ids.MaxIDLen): 599 bytes
//     per entry, about 28,000 messages.
//
// Since closed-window record version 3 (an offset range instead of a list) the
// window processor's records are under 1 KiB whatever the window's size; the limit
// still bounds version 1 and 2 records on the topic and the dead letters.
const (
	// MaxRecordBytes is the largest record (key and value) larkline writes to the
	// closed-window topic and to the window processor's loop and table topics.
	MaxRecordBytes = 16 << 20

	// MaxBatchBytes is max.message.bytes of the topics that carry records of up to
	// MaxRecordBytes (closed windows, dead letters, Goka's loop and table topics) and
	// the batch limit of the producers that write to them. The MiB above
	// MaxRecordBytes holds a dead letter that parks a record of MaxRecordBytes (the
	// error text, names and key it adds are a few KiB), the batch and record framing,
	// and compression that grows an incompressible batch (sarama, unlike franz-go,
	// does not fall back to an uncompressed batch).
	MaxBatchBytes = MaxRecordBytes + 1<<20

	// DefaultBatchMaxBytes is franz-go's batch limit for every topic not in
	// ProducerOptions.LargeRecordTopics: franz-go's own default, below Kafka's
	// default message.max.bytes, so a topic created with broker defaults accepts
	// every batch.
	DefaultBatchMaxBytes = 1_000_012

	// FetchMaxBytes is what a franz-go fetch asks a broker for at most (franz-go's
	// default, Kafka's fetch.max.bytes): a soft limit, a larger first batch still
	// comes whole.
	FetchMaxBytes = 50 << 20
	// FetchMaxPartitionBytes is what a franz-go fetch asks for per partition at most
	// (franz-go's default, Kafka's max.partition.fetch.bytes); soft as FetchMaxBytes.
	FetchMaxPartitionBytes = 1 << 20
	// BrokerMaxReadBytes is the hard limit on one response franz-go reads (a guard
	// against corrupt length prefixes): a full fetch plus one batch of MaxBatchBytes
	// and framing, within the 100 MiB franz-go defaults to.
	BrokerMaxReadBytes = 100 << 20
)

// ConfigMaxMessageBytes is the topic config that bounds a record batch.
const ConfigMaxMessageBytes = "max.message.bytes"

// maxBatchBytesConfig is MaxBatchBytes as a topic config value.
var maxBatchBytesConfig = strconv.Itoa(MaxBatchBytes)
