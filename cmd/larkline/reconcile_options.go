package main

import (
	"github.com/larkline/larkline/connectors/lark/reconcile"
	"github.com/larkline/larkline/internal/config"
)

// reconcileOptions: history reconciliation.
func reconcileOptions(cfg *config.Config) mapped[reconcile.Options] {
	l, a := cfg.Services.Workspace.Timeline.Lark, cfg.Lark.API
	retention := l.Retention.EvidenceRetention
	if !l.Retention.Enabled {
		retention = 0
	}
	m, o := newMapped[reconcile.Options]()
	set(m, &o.EvidenceTopic, "kafka.topics.evidence", cfg.Kafka.Topics.Evidence)
	set(m, &o.CheckpointTopic, "kafka.topics.checkpoints", cfg.Kafka.Topics.Checkpoints)
	set(m, &o.IngestionLookback, tl+"ingestionLookback", l.IngestionLookback)
	set(m, &o.ReconcileInterval, tl+"reconcileInterval", l.ReconcileInterval)
	set(m, &o.ReconcileOverlap, tl+"reconcileOverlap", l.ReconcileOverlap)
	set(m, &o.EvidenceRefreshInterval, tl+"evidenceRefreshInterval", l.EvidenceRefreshInterval)
	set(m, &o.EvidenceRefreshLookback, tl+"evidenceRefreshLookback", l.EvidenceRefreshLookback)
	set(m, &o.Retention, tl+"retention.evidenceRetention", retention)
	// Coverage passes follow the window clock (docs/decisions.md D15).
	set(m, &o.Window, tl+"synthesisWindow", l.SynthesisWindow)
	set(m, &o.RequestsPerSecond, "lark.api.requestsPerSecond", a.RequestsPerSecond)
	set(m, &o.Burst, "lark.api.burst", a.Burst)
	set(m, &o.MaxConcurrentChats, "lark.api.maxConcurrentChats", a.MaxConcurrentChats)
	set(m, &o.MaxPagesPerRun, "lark.api.maxPagesPerRun", a.MaxPagesPerRun)
	set(m, &o.PageSize, "lark.api.pageSize", a.PageSize)
	set(m, &o.MaxRetries, "lark.api.maxRetries", new(a.MaxRetries)) // 0: none
	set(m, &o.MaxBackoff, "lark.api.maxBackoff", a.MaxBackoff)
	return *m
}
