package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/processors/windows"
)

// runTopics is `larkline topics ensure [--dry-run]` and `larkline topics print
// --format kafka-topics|strimzi|terraform`.
func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("topics", topicsSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("topics "+sub, stderr)
	dry := fs.Bool("dry-run", false, "ensure: create nothing, report what would be created and every difference")
	format := fs.String("format", "kafka-topics", "print: kafka-topics (shell commands), strimzi (KafkaTopic resources) or terraform (kafka_topic resources)")
	cluster := fs.String("strimzi-cluster", "my-cluster", "print --format strimzi: the strimzi.io/cluster label")
	versions := fs.String("processor-versions", "", "comma-separated window processor versions whose Goka topics to include (default: windows.processorVersion)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if sub == "print" {
		if !slices.Contains([]string{"kafka-topics", "strimzi", "terraform"}, *format) {
			return fmt.Errorf("%w: --format must be kafka-topics, strimzi or terraform", errUsage)
		}
		cfg, err := loadConfig(*path)
		if err != nil {
			return err
		}
		vs := []string{cfg.Windows.ProcessorVersion}
		if *versions != "" {
			vs = strings.Split(*versions, ",")
		}
		return printTopics(stdout, allTopicSpecs(cfg, vs...), *format, cfg.Kafka.Brokers, *cluster)
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	cl, err := newKafkaClient(cfg, "admin")
	if err != nil {
		return err
	}
	defer cl.Close()
	create := cfg.Kafka.ManageTopics && !*dry
	if err := checkAccess(ctx, cl, topicsAccess(cfg, create)); err != nil {
		return err
	}
	specs := kafka.DefaultTopicSpecs(topicNames(cfg), cfg.Kafka.Partitions, cfg.Kafka.ReplicationFactor)
	ensure := kafka.EnsureTopics
	if !create {
		// Checking only: Goka's table and loop topics of the configured version too,
		// which the window processor creates itself only when it manages topics.
		specs = allTopicSpecs(cfg, cfg.Windows.ProcessorVersion)
		ensure = kafka.CheckTopics
	}
	report, err := ensure(ctx, kadm.NewClient(cl), specs)
	if err != nil {
		return err
	}
	for _, t := range report.Created {
		fmt.Fprintf(stdout, "created   %s\n", t)
	}
	for _, t := range report.Missing {
		if *dry {
			fmt.Fprintf(stdout, "missing   %s (would be created)\n", t)
		} else {
			fmt.Fprintf(stdout, "MISSING   %s (kafka.manageTopics is false: create it, see larkline topics print)\n", t)
		}
	}
	for _, t := range report.Matching {
		fmt.Fprintf(stdout, "ok        %s\n", t)
	}
	for _, p := range report.Set {
		fmt.Fprintf(stdout, "set       %s\n", p)
	}
	for _, p := range report.Warnings {
		fmt.Fprintf(stdout, "warning   %s (harmless, left unchanged)\n", p)
	}
	for _, p := range report.Problems {
		fmt.Fprintf(stdout, "MISMATCH  %s (left unchanged)\n", p)
	}
	if *dry && len(report.Problems) == 0 {
		return nil // missing topics are what a dry run reports, not an error
	}
	return report.Err()
}

// allTopicSpecs is every topic a deployment needs: larkline's five and, for each
// processor version, the Goka group's table and loop topics and its geometry topic.
func allTopicSpecs(cfg *config.Config, versions ...string) []kafka.TopicSpec {
	specs := kafka.DefaultTopicSpecs(topicNames(cfg), cfg.Kafka.Partitions, cfg.Kafka.ReplicationFactor)
	for _, v := range versions {
		g := string(windows.GroupName(cfg.Kafka.GroupPrefix, v))
		specs = append(specs, kafka.GokaTopicSpecs(g, cfg.Kafka.Partitions, cfg.Kafka.ReplicationFactor, cfg.Kafka.ReplicationFactor, 0)...)
		specs = append(specs, windows.GeometryTopicSpec(cfg.Kafka.GroupPrefix, v, cfg.Kafka.ReplicationFactor))
	}
	return specs
}

// k8sNameRE is what a Kubernetes object name may contain.
var k8sNameRE = regexp.MustCompile(`[^a-z0-9.-]+`)

// printTopics writes specs in one of the formats an estate manages topics with.
func printTopics(w io.Writer, specs []kafka.TopicSpec, format string, brokers []string, cluster string) error {
	var b strings.Builder
	for i, s := range specs {
		keys := slices.Sorted(maps.Keys(s.Configs))
		switch format {
		case "kafka-topics":
			fmt.Fprintf(&b, "# %s\nkafka-topics.sh --bootstrap-server %s --create --if-not-exists --topic %s --partitions %d --replication-factor %d",
				s.Purpose, strings.Join(brokers, ","), s.Name, s.Partitions, s.Replication)
			for _, k := range keys {
				fmt.Fprintf(&b, " --config %s=%s", k, s.Configs[k])
			}
			b.WriteString("\n")
		case "strimzi":
			if i > 0 {
				b.WriteString("---\n")
			}
			fmt.Fprintf(&b, "# %s\napiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaTopic\nmetadata:\n  name: %s\n  labels:\n    strimzi.io/cluster: %s\nspec:\n  topicName: %s\n  partitions: %d\n  replicas: %d\n  config:\n",
				s.Purpose, strings.Trim(k8sNameRE.ReplaceAllString(strings.ToLower(s.Name), "-"), "-."), cluster, s.Name, s.Partitions, s.Replication)
			for _, k := range keys {
				fmt.Fprintf(&b, "    %s: %s\n", k, strconv.Quote(s.Configs[k]))
			}
		case "terraform":
			fmt.Fprintf(&b, "# %s\nresource \"kafka_topic\" %q {\n  name               = %q\n  partitions         = %d\n  replication_factor = %d\n  config = {\n",
				s.Purpose, strings.NewReplacer(".", "_", "-", "_").Replace(s.Name), s.Name, s.Partitions, s.Replication)
			for _, k := range keys {
				fmt.Fprintf(&b, "    %q = %q\n", k, s.Configs[k])
			}
			b.WriteString("  }\n}\n\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
