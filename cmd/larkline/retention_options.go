package main

import (
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/processors/retention"
)

// retentionOptions: the retention job.
func retentionOptions(cfg *config.Config) mapped[retention.Options] {
	r := cfg.Services.Workspace.Timeline.Lark.Retention
	m, o := newMapped[retention.Options]()
	nest(m, &o.Kafka, kafkaOptions(cfg, "retention"))
	set(m, &o.EvidenceTopic, "kafka.topics.evidence", cfg.Kafka.Topics.Evidence)
	set(m, &o.CheckpointTopic, "kafka.topics.checkpoints", cfg.Kafka.Topics.Checkpoints)
	set(m, &o.Retention, tl+"retention.evidenceRetention", r.EvidenceRetention)
	set(m, &o.Mode, tl+"retention.mode", retention.Mode(r.Mode))
	set(m, &o.Interval, tl+"retention.interval", r.Interval)
	return *m
}
