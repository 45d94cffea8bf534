package lagexport

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/kafka"
)

// kafka-lag-exporter (github.com/seglo/kafka-lag-exporter) compatible series: the
// same names and label names, so that a team's dashboards and alerts written for it
// work on larkline's exporter unchanged. Values come from the same sample as the
// larkline_consumergroup_* series. The member labels (member_host, consumer_id,
// client_id) are present but empty: the sample does not read partition assignments,
// and queries aggregate them away in practice. is_simple_consumer is "true" for a
// group without members, as kafka-lag-exporter reports groups it finds no consumers
// for.
var (
	compatPartitionLabels = []string{"cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id"}
	compatGroupLabels     = []string{"cluster_name", "group", "is_simple_consumer"}

	descKLEOffset = prometheus.NewDesc("kafka_consumergroup_group_offset",
		"kafka-lag-exporter compatible: the group's committed offset of the partition.", compatPartitionLabels, nil)
	descKLELag = prometheus.NewDesc("kafka_consumergroup_group_lag",
		"kafka-lag-exporter compatible: records of the partition the group has not consumed.", compatPartitionLabels, nil)
	descKLELagSeconds = prometheus.NewDesc("kafka_consumergroup_group_lag_seconds",
		"kafka-lag-exporter compatible: how long the oldest unconsumed record of the partition has waited.", compatPartitionLabels, nil)
	descKLEMaxLag = prometheus.NewDesc("kafka_consumergroup_group_max_lag",
		"kafka-lag-exporter compatible: the group's largest partition lag in records.", compatGroupLabels, nil)
	descKLEMaxLagSeconds = prometheus.NewDesc("kafka_consumergroup_group_max_lag_seconds",
		"kafka-lag-exporter compatible: the group's largest partition lag in seconds.", compatGroupLabels, nil)
	descKLESumLag = prometheus.NewDesc("kafka_consumergroup_group_sum_lag",
		"kafka-lag-exporter compatible: the group's lag in records over all partitions.", compatGroupLabels, nil)
	descKLETopicSumLag = prometheus.NewDesc("kafka_consumergroup_group_topic_sum_lag",
		"kafka-lag-exporter compatible: the group's lag in records over the topic's partitions.",
		[]string{"cluster_name", "group", "topic", "is_simple_consumer"}, nil)
	descKLELatestOffset = prometheus.NewDesc("kafka_partition_latest_offset",
		"kafka-lag-exporter compatible: the partition's end offset.", []string{"cluster_name", "topic", "partition"}, nil)
)

func describeCompat(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKLEOffset, descKLELag, descKLELagSeconds, descKLEMaxLag,
		descKLEMaxLagSeconds, descKLESumLag, descKLETopicSumLag, descKLELatestOffset} {
		ch <- d
	}
}

func collectCompat(ch chan<- prometheus.Metric, cluster string, snap Snapshot) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	latest := map[string]bool{} // topic/partition already exported: groups share topics
	for _, g := range snap.Groups {
		if g.Lag.Err != nil {
			continue
		}
		simple := strconv.FormatBool(g.Lag.Members == 0)
		var maxLag, sumLag int64
		maxSeconds := 0.0
		topicSum := map[string]int64{}
		var topics []string
		for _, p := range g.Lag.Partitions {
			if p.Err != nil {
				continue
			}
			part := fmt.Sprint(p.Partition)
			if _, ok := topicSum[p.Topic]; !ok {
				topics = append(topics, p.Topic)
			}
			topicSum[p.Topic] += p.Lag
			sumLag += p.Lag
			maxLag = max(maxLag, p.Lag)
			gauge(descKLEOffset, float64(p.Committed), cluster, g.Group, p.Topic, part, "", "", "")
			gauge(descKLELag, float64(p.Lag), cluster, g.Group, p.Topic, part, "", "", "")
			if p.LagTime != kafka.LagTimeUnknown {
				gauge(descKLELagSeconds, p.LagTime.Seconds(), cluster, g.Group, p.Topic, part, "", "", "")
				maxSeconds = max(maxSeconds, p.LagTime.Seconds())
			}
			if key := p.Topic + "/" + part; !latest[key] {
				latest[key] = true
				gauge(descKLELatestOffset, float64(p.End), cluster, p.Topic, part)
			}
		}
		gauge(descKLEMaxLag, float64(maxLag), cluster, g.Group, simple)
		gauge(descKLEMaxLagSeconds, maxSeconds, cluster, g.Group, simple)
		gauge(descKLESumLag, float64(sumLag), cluster, g.Group, simple)
		for _, t := range topics {
			gauge(descKLETopicSumLag, float64(topicSum[t]), cluster, g.Group, t, simple)
		}
	}
}
