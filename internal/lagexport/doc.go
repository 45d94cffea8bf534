// Package lagexport exports the consumer lag of larkline's own consumer groups to
// Prometheus, named like the lag exporters data teams already run (Burrow, kminion,
// kafka_exporter):
//
//	larkline_consumergroup_lag{group,topic,partition}          records not yet consumed
//	larkline_consumergroup_lag_seconds{group,topic,partition}  age of the oldest of them
//	larkline_consumergroup_status{group,status}                1 for the current status, else 0
//	larkline_consumergroup_members{group}                      members of the group
//
// An [Exporter] polls on its own steady interval and replaces an immutable snapshot
// that a scrape only reads, because the Burrow-style evaluator (kafka.Evaluator) needs
// its samples at a known pace from one owner, and a scrape must never call Kafka. A
// failed poll shows every group as ERR with no lag series, never old lag as current.
// Labels are bounded (groups, topics, partitions); logs carry group names and error
// classes only. docs/operations.md ("Read lag", "How the lag exporter samples") has
// the statuses, the series' exact meaning and the bounds.
package lagexport
