package main

import (
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/processors/windows"
)

// windowsOptions: the window processor of one version.
func windowsOptions(cfg *config.Config, version string) mapped[windows.Options] {
	l, t := cfg.Services.Workspace.Timeline.Lark, cfg.Kafka.Topics
	m, o := newMapped[windows.Options]()
	set(m, &o.ProcessorVersion, "windows.processorVersion", version)
	set(m, &o.GroupPrefix, "kafka.groupPrefix", cfg.Kafka.GroupPrefix)
	set(m, &o.EvidenceTopic, "kafka.topics.evidence", t.Evidence)
	set(m, &o.CheckpointTopic, "kafka.topics.checkpoints", t.Checkpoints)
	set(m, &o.ClosedTopic, "kafka.topics.windowsClosed", t.WindowsClosed)
	set(m, &o.DeadLetterTopic, "kafka.topics.deadLetter", t.DeadLetter)
	set(m, &o.Window, tl+"synthesisWindow", l.SynthesisWindow)
	set(m, &o.Grace, tl+"synthesisWindowCloseGrace", l.SynthesisWindowCloseGrace)
	set(m, &o.RequireCoverage, tl+"reconciliationEnabled", l.ReconciliationActive())
	set(m, &o.Retention, tl+"ingestionLookback", l.IngestionLookback)
	set(m, &o.ScanInterval, tl+"synthesisScanInterval", l.SynthesisScanInterval)
	set(m, &o.OversizedVersions, "windows.oversizedVersions", new(cfg.Windows.OversizedVersions)) // 0: never flag
	set(m, &o.HotStandby, "windows.hotStandby", cfg.Windows.HotStandby)
	set(m, &o.CheckTopicsOnly, "kafka.manageTopics", !cfg.Kafka.ManageTopics)
	set(m, &o.TopicReplication, "kafka.replicationFactor", cfg.Kafka.ReplicationFactor)
	return *m
}
