package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/processors/windows"
	"github.com/larkline/larkline/schemas/ids"
)

// accessCheckTimeout bounds the start-up permission check.
const accessCheckTimeout = 30 * time.Second

// access is one needed permission.
func access(op kafka.Operation, res kafka.ResourceType, name, why string) kafka.Access {
	return kafka.Access{Operation: op, Resource: res, Name: name, Why: why}
}

// Shorthands; the permissions of each role and command below are what
// docs/operations.md ("Secured cluster") grants by prefix, and the secured e2e tests
// check that the two agree.
const (
	opRead            = kafka.OpRead
	opWrite           = kafka.OpWrite
	opCreate          = kafka.OpCreate
	opDescribe        = kafka.OpDescribe
	opDescribeConfigs = kafka.OpDescribeConfigs
	opAlterConfigs    = kafka.OpAlterConfigs
	resTopic          = kafka.ResourceTopic
	resGroup          = kafka.ResourceGroup
)

// roleAccess lists what the roles need from Kafka.
func roleAccess(cfg *config.Config, roles []ids.Stage) []kafka.Access {
	t := cfg.Kafka.Topics
	var out []kafka.Access
	add := func(why string, as ...kafka.Access) {
		for _, a := range as {
			a.Why = why + ": " + a.Why
			out = append(out, a)
		}
	}
	for _, r := range roles {
		why := "role " + string(r)
		switch r {
		case ids.StageIngest:
			add(why, access(opWrite, resTopic, t.Evidence, "writes evidence"))
		case ids.StageReconcile:
			add(why, access(opWrite, resTopic, t.Evidence, "writes evidence"),
				access(opRead, resTopic, t.Checkpoints, "reads history checkpoints"),
				access(opWrite, resTopic, t.Checkpoints, "writes history checkpoints"))
		case ids.StageSink:
			add(why, access(opRead, resGroup, groupName(cfg, groupSink), "consumer group"),
				access(opRead, resTopic, t.Evidence, "consumes evidence"),
				access(opWrite, resTopic, t.DeadLetter, "parks dead letters"))
		case ids.StageWorkspaces:
			add(why, access(opRead, resGroup, groupName(cfg, groupWorkspaces), "consumer group"),
				access(opRead, resTopic, t.Workspaces, "consumes the workspace feed"),
				access(opWrite, resTopic, t.DeadLetter, "parks dead letters"))
		case ids.StageWindows:
			g := string(windows.GroupName(cfg.Kafka.GroupPrefix, cfg.Windows.ProcessorVersion))
			pub := windows.PublisherGroup(cfg.Kafka.GroupPrefix, cfg.Windows.ProcessorVersion)
			add(why, access(opRead, resGroup, g, "Goka processor group"),
				access(opRead, resGroup, pub, "closed-window publisher group"),
				access(opRead, resTopic, t.Evidence, "consumes evidence"),
				access(opRead, resTopic, t.Checkpoints, "consumes history checkpoints"),
				access(opWrite, resTopic, t.WindowsClosed, "publishes closed windows"),
				access(opWrite, resTopic, t.DeadLetter, "parks dead letters"))
			for _, topic := range []string{g + "-table", g + "-loop"} {
				add(why, access(opRead, resTopic, topic, "Goka reads it"),
					access(opWrite, resTopic, topic, "Goka writes it"))
				if cfg.Kafka.ManageTopics {
					add(why, access(opCreate, resTopic, topic, "Goka creates it on first start"),
						access(opAlterConfigs, resTopic, topic, "checks its configs and raises max.message.bytes"))
				} else {
					add(why, access(opDescribeConfigs, resTopic, topic, "kafka.manageTopics is false: its configs are checked"))
				}
			}
			geo := windows.GeometryTopic(cfg.Kafka.GroupPrefix, cfg.Windows.ProcessorVersion)
			add(why, access(opRead, resTopic, geo, "reads the version's window length and grace"),
				access(opWrite, resTopic, geo, "writes them on the version's first start"))
			if cfg.Kafka.ManageTopics {
				add(why, access(opCreate, resTopic, geo, "created on the version's first start"))
			} else {
				add(why, access(opDescribeConfigs, resTopic, geo, "kafka.manageTopics is false: its configs are checked"))
			}
		case ids.StageSynthesis:
			add(why, access(opRead, resGroup, groupName(cfg, groupSynthesis), "consumer group"),
				access(opRead, resTopic, t.WindowsClosed, "consumes closed windows"),
				access(opWrite, resTopic, t.DeadLetter, "parks dead letters"),
				access(opDescribe, resGroup, groupName(cfg, groupSink), "waits for the sink's committed offsets"),
				access(opDescribe, resTopic, t.Evidence, "waits for the sink's committed offsets"))
		case ids.StageLag:
			add(why, lagAccess(cfg)...)
			add(why, access(opRead, resTopic, t.DeadLetter, "counts dead letters"))
		case ids.StageRetention:
			add(why, access(opRead, resTopic, t.Evidence, "reads evidence past retention"),
				access(opWrite, resTopic, t.Evidence, "writes redactions and tombstones"))
		}
	}
	return out
}

// lagAccess is what reading the consumer lag of larkline's groups and lag.groups
// needs (the topics of lag.groups are not known in advance: Describe on them).
func lagAccess(cfg *config.Config) []kafka.Access {
	out := groupsAccess(lagGroups(cfg))
	t := cfg.Kafka.Topics
	for _, topic := range []string{t.Evidence, t.Checkpoints, t.Workspaces, t.WindowsClosed} {
		out = append(out, access(opDescribe, resTopic, topic, "reads its end offsets"))
	}
	return out
}

// groupsAccess is what reading the committed offsets of groups needs.
func groupsAccess(groups []string) []kafka.Access {
	var out []kafka.Access
	for _, g := range groups {
		out = append(out, access(opDescribe, resGroup, g, "reads its committed offsets"))
	}
	return out
}

// topicsAccess is what topics ensure needs: Create only when it may create (not
// with --dry-run or kafka.manageTopics false).
func topicsAccess(cfg *config.Config, create bool) []kafka.Access {
	var out []kafka.Access
	t := cfg.Kafka.Topics
	for _, topic := range []string{t.Evidence, t.Checkpoints, t.Workspaces, t.WindowsClosed, t.DeadLetter} {
		if create {
			out = append(out, access(opCreate, resTopic, topic, "topics ensure: creates it"))
		} else {
			out = append(out, access(opDescribe, resTopic, topic, "topics ensure: checks it exists"))
		}
		out = append(out, access(opDescribeConfigs, resTopic, topic, "topics ensure: compares its configs"))
	}
	if !create { // the Goka topics are checked too
		g := string(windows.GroupName(cfg.Kafka.GroupPrefix, cfg.Windows.ProcessorVersion))
		for _, topic := range []string{g + "-table", g + "-loop"} {
			out = append(out, access(opDescribe, resTopic, topic, "topics ensure: checks it exists"),
				access(opDescribeConfigs, resTopic, topic, "topics ensure: compares its configs"))
		}
	}
	return out
}

// checkAccess fails with the missing permissions (kafka.ErrAccessDenied) before a
// command or role starts.
func checkAccess(ctx context.Context, cl *kgo.Client, needs []kafka.Access) error {
	if len(needs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, accessCheckTimeout)
	defer cancel()
	if err := kafka.CheckAccess(ctx, cl, needs); err != nil {
		return fmt.Errorf("checking kafka permissions: %w", err)
	}
	return nil
}
