// Package kafka is the Kafka plumbing shared by every larkline stage: one place that
// turns a narrow, validated Options value into franz-go client options and a sarama
// configuration for Goka, the one partitioner both of them use, topic provisioning and
// checking, the retryable-error decision for Kafka I/O, and consumer-group lag.
//
// What it provides:
//
//   - NewClientOptions and GroupConsumerOptions: franz-go ([kgo]) options with every
//     producer and consumer setting chosen explicitly (acks, idempotence, linger,
//     buffering, compression, partitioner, commit policy, reset offset).
//   - SaramaConfig and NewGoka, whose ProcessorOptions, EmitterOptions and
//     ViewOptions install that configuration, Goka's topic manager settings and the
//     hasher: the same decisions expressed for sarama, so a Goka processor and a
//     franz-go client on the same topic agree on acks, compression, start offset and,
//     above all, on partitions. Sarama 1.45.1 (what Goka v1.1.14 pulls in) works
//     against Kafka 4.x when its protocol version is at least 2.1 (default 3.6.0).
//   - The partitioner: a record key <workspace>/<chat>/<message> is placed by hashing
//     only <workspace>/<chat> (ids.PartitionKey). Partition computes it, Partitioner
//     installs it in franz-go, and Hasher is the hash.Hash32 constructor handed to
//     Goka (goka.WithHasher), which sarama's NewCustomHashPartitioner and Goka's own
//     key-to-partition lookups reduce to the same partition.
//   - EnsureTopics and DefaultTopicSpecs: create missing topics and report, never
//     change, existing topics whose partitions, replication or cleanup policy differ.
//   - The record limits (limits.go): MaxRecordBytes (16 MiB) for closed windows and
//     the window processor's loop and table records, MaxBatchBytes for the topics and
//     producers that carry them, the consumers' fetch limits, and the largest window
//     that fits. The topic manager NewGoka installs creates Goka's own loop and table
//     topics with that limit, or raises it on existing ones.
//   - IsRetryable: whether a Kafka error (franz-go, sarama, network, context) is worth
//     retrying.
//   - Lag and Evaluator: per-partition consumer lag in offsets and in time (age of
//     the oldest unconsumed record), and a Burrow-style status per group.
//
// Bounds: this package owns no long-running loop and no global state. It does not
// encode or decode record values (see the schemas package), does not decide topic
// names (configuration does), and never alters an existing topic except to raise
// max.message.bytes of a Goka group's own loop and table topics. Logs and errors
// carry topic, group and partition identifiers only, never record contents or
// credentials.
package kafka
