package kafka

import "strconv"

// Record and batch size limits. Kafka stops at about 1 MB by default (the broker's
// message.max.bytes, sarama's Producer.MaxMessageBytes, franz-go's
// ProducerBatchMaxBytes). larkline's closed windows are small (an offset range, under
// 1 KiB), but a dead letter parks whatever record failed and Goka's loop and table
// values grow with a window, so the limits are set explicitly on every hop
// (docs/operations.md, "Record size limits"):
//
//   - producers: sarama's Producer.MaxMessageBytes (SaramaConfig), and franz-go's
//     ProducerBatchMaxBytes for ProducerOptions.LargeRecordTopics, are MaxBatchBytes;
//   - the broker: DefaultTopicSpecs gives the closed-window and dead-letter topics,
//     and NewGoka's topic manager Goka's loop and table topics, max.message.bytes =
//     MaxBatchBytes;
//   - consumers: a fetch returns a partition's first batch whole (KIP-74), so the
//     fetch limits stay at their (stated) defaults, and BrokerMaxReadBytes, the one
//     hard limit, holds a full fetch plus one batch of MaxBatchBytes.
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
