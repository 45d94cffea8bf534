package lagexport

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/larkline/larkline/internal/kafka"
)

// kafkaLagExporterSeries are kafka-lag-exporter's metric names and label names, as
// its README documents them: what a team's dashboards and alerts query.
var kafkaLagExporterSeries = map[string][]string{
	"kafka_consumergroup_group_offset":          {"client_id", "cluster_name", "consumer_id", "group", "member_host", "partition", "topic"},
	"kafka_consumergroup_group_lag":             {"client_id", "cluster_name", "consumer_id", "group", "member_host", "partition", "topic"},
	"kafka_consumergroup_group_lag_seconds":     {"client_id", "cluster_name", "consumer_id", "group", "member_host", "partition", "topic"},
	"kafka_consumergroup_group_max_lag":         {"cluster_name", "group", "is_simple_consumer"},
	"kafka_consumergroup_group_max_lag_seconds": {"cluster_name", "group", "is_simple_consumer"},
	"kafka_consumergroup_group_sum_lag":         {"cluster_name", "group", "is_simple_consumer"},
	"kafka_consumergroup_group_topic_sum_lag":   {"cluster_name", "group", "is_simple_consumer", "topic"},
	"kafka_partition_latest_offset":             {"cluster_name", "partition", "topic"},
}

// TestKafkaLagExporterSeries scrapes the exporter over HTTP, as Prometheus does, and
// compares the kafka-lag-exporter compatible series' names, label names and values
// with what kafka-lag-exporter exports; without the option none of them appear.
func TestKafkaLagExporterSeries(t *testing.T) {
	snap := Snapshot{At: time.Unix(1_700_000_000, 0), Groups: []GroupSnapshot{
		{Group: "payments-consumer", Status: kafka.StatusWarn, Lag: kafka.GroupLag{Group: "payments-consumer", State: "Stable", Members: 2, Partitions: []kafka.PartitionLag{
			{Topic: "payments", Partition: 0, Committed: 90, End: 100, Lag: 10, LagTime: 3 * time.Second},
			{Topic: "payments", Partition: 1, Committed: 50, End: 80, Lag: 30, LagTime: kafka.LagTimeUnknown},
		}}},
		{Group: "batch-job", Status: kafka.StatusStop, Lag: kafka.GroupLag{Group: "batch-job", State: "Empty", Partitions: []kafka.PartitionLag{
			{Topic: "payments", Partition: 0, Committed: 100, End: 100, Lag: 0},
		}}},
		{Group: "unreadable", Status: kafka.StatusErr, Lag: kafka.GroupLag{Group: "unreadable", Err: errors.New("denied")}},
	}}
	for _, tc := range []struct {
		name    string
		enabled bool
	}{{"enabled", true}, {"disabled", false}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			e, err := New(Options{
				Kafka:            kafka.Options{Brokers: []string{"127.0.0.1:1"}},
				Groups:           []string{"payments-consumer", "batch-job", "unreadable"},
				Registry:         reg,
				KafkaLagExporter: KafkaLagExporterOptions{Enabled: tc.enabled, ClusterName: "prod-eu"},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			e.swap(snap)
			families := scrape(t, reg)
			type key struct{ name, labels string }
			values := map[key]float64{}
			for name, want := range kafkaLagExporterSeries {
				mf, ok := families[name]
				if !tc.enabled {
					if ok {
						t.Fatalf("%s exported without the option", name)
					}
					continue
				}
				if !ok {
					t.Fatalf("%s not exported; got %v", name, slices.Sorted(maps.Keys(families)))
				}
				for _, m := range mf.GetMetric() {
					var names []string
					labels := ""
					for _, l := range m.GetLabel() {
						names = append(names, l.GetName())
						if l.GetValue() != "" {
							labels += l.GetName() + "=" + l.GetValue() + ","
						}
					}
					sort.Strings(names)
					if !slices.Equal(names, want) {
						t.Errorf("%s labels %v, want kafka-lag-exporter's %v", name, names, want)
					}
					values[key{name, labels}] = m.GetGauge().GetValue()
				}
			}
			if !tc.enabled {
				return
			}
			for k, want := range map[key]float64{
				{"kafka_consumergroup_group_lag", "cluster_name=prod-eu,group=payments-consumer,partition=1,topic=payments,"}:         30,
				{"kafka_consumergroup_group_offset", "cluster_name=prod-eu,group=payments-consumer,partition=0,topic=payments,"}:      90,
				{"kafka_consumergroup_group_lag_seconds", "cluster_name=prod-eu,group=payments-consumer,partition=0,topic=payments,"}: 3,
				{"kafka_consumergroup_group_max_lag", "cluster_name=prod-eu,group=payments-consumer,is_simple_consumer=false,"}:       30,
				{"kafka_consumergroup_group_sum_lag", "cluster_name=prod-eu,group=payments-consumer,is_simple_consumer=false,"}:       40,
				{"kafka_consumergroup_group_max_lag", "cluster_name=prod-eu,group=batch-job,is_simple_consumer=true,"}:                0,
				{"kafka_partition_latest_offset", "cluster_name=prod-eu,partition=1,topic=payments,"}:                                 80,
			} {
				if got, ok := values[k]; !ok || got != want {
					t.Errorf("%s{%s} = %v (present %v), want %v", k.name, k.labels, got, ok, want)
				}
			}
			for k := range values {
				if k.labels == "cluster_name=prod-eu,group=unreadable,is_simple_consumer=true," {
					t.Errorf("%s exported for a group whose lag could not be read", k.name)
				}
			}
		})
	}
}

func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}
