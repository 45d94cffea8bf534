package main

import (
	"slices"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/lagexport"
)

// lagOptions: the lag exporter. larkline's own groups are named by
// kafka.groupPrefix, the others by lag.groups; a rule on the whole list (how many)
// is about lag.groups, the only part an operator lengthens.
func lagOptions(cfg *config.Config) mapped[lagexport.Options] {
	m, o := newMapped[lagexport.Options]()
	nest(m, &o.Kafka, kafkaOptions(cfg, "lag"))
	own := larklineGroups(cfg)
	for _, g := range lagGroups(cfg) {
		key := "lag.groups"
		if slices.Contains(own, g) {
			key = "kafka.groupPrefix"
		}
		add(m, &o.Groups, key, g)
	}
	set(m, &o.Groups, "lag.groups", o.Groups)
	add(m, &o.GroupPrefixes, "kafka.groupPrefix", versionGroupsPrefix(cfg))
	set(m, &o.KafkaLagExporter.Enabled, "lag.kafkaLagExporterMetrics", cfg.Lag.KafkaLagExporterMetrics)
	set(m, &o.KafkaLagExporter.ClusterName, "lag.clusterName", cfg.Lag.ClusterName)
	return *m
}
