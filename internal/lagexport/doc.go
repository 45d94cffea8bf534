// Package lagexport exports the consumer lag of larkline's own consumer groups to
// Prometheus, named like the lag exporters data teams already run (Burrow, kminion,
// kafka_exporter):
//
//	larkline_consumergroup_lag{group,topic,partition}          records not yet consumed
//	larkline_consumergroup_lag_seconds{group,topic,partition}  age of the oldest of them
//	larkline_consumergroup_status{group,status}                1 for the current status, else 0
//	larkline_consumergroup_members{group}                      members of the group
//
// plus two series about the exporter itself: larkline_lag_last_success_timestamp_seconds
// and larkline_lag_poll_failures_total.
//
// # Polling, not scraping
//
// An [Exporter] polls: Run samples the groups every Options.Interval (default 15s) with
// kafka.Lag, feeds the sample to one kafka.Evaluator, and replaces an immutable
// snapshot; a scrape (the exporter is a prometheus.Collector) only reads that snapshot.
// A collector that called Kafka on every scrape would tie broker load and scrape latency
// to the number of Prometheus servers and their intervals, and, worse, would feed the
// Burrow-style evaluator at the scrapers' rhythm: its STALL and growing-lag rules look
// at a window of samples and need them at a steady, known pace, from one owner. The
// snapshot is replaced whole, so a scrape never mixes two samples, and partitions or
// groups that disappear vanish from the next scrape (no stale gauge labels to reset).
//
// Each poll is bounded by Options.PollTimeout; the timestamp look-ups behind
// lag_seconds by LagOptions.TimestampTimeout within it. A poll that fails leaves a
// snapshot in which every group has status ERR and no lag series, so a dashboard never
// shows old lag as current; the failure is counted and logged.
//
// # Series and their meaning
//
//   - lag is the group's committed offset subtracted from the partition's end offset
//     (from the log start when the group committed nothing), never negative. A
//     partition whose offsets could not be read has no lag series; its group is ERR.
//   - lag_seconds is how long the oldest unconsumed record has been waiting (now minus
//     its timestamp), 0 when caught up. It is absent when it was not measured (the
//     look-up bound, LagOptions.MaxTimestampFetches, or no record arrived in time).
//   - status follows kafka.Evaluator: OK, WARN, STALL, STOP or ERR; exactly one of the
//     five series of a group is 1.
//   - members is absent when the group could not be described.
//   - A configured group that does not exist (its role never ran, or the group was
//     deleted) has nothing committed, hence nothing lagging: it reports 0 members,
//     no partitions and OK. Alert on members == 0 for the roles that must run.
//
// # Bounds
//
// Labels are the configured groups (at most MaxGroups), their topics and partitions:
// never workspace, chat or message ids. The exporter owns its Kafka client and one
// goroutine (Run's); it does not commit offsets, join groups or change topics. Logs
// carry group names and error classes only.
package lagexport
