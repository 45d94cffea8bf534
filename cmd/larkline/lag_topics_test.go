package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
)

// writeConfig writes cfg as a YAML file for the commands that read one.
// WriteYAML never writes a secret, so the DSN goes into a postgres.dsnFile.
func writeConfig(t *testing.T, cfg *config.Config) string {
	t.Helper()
	dir := t.TempDir()
	if cfg.Postgres.DSN.IsSet() {
		c := cfg.Clone()
		c.Postgres.DSNFile = filepath.Join(dir, "dsn")
		if err := os.WriteFile(c.Postgres.DSNFile, []byte(cfg.Postgres.DSN.Value()), 0o600); err != nil {
			t.Fatal(err)
		}
		c.Postgres.DSN = ""
		cfg = c
	}
	var b bytes.Buffer
	if err := cfg.WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "larkline.yaml")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = dispatch(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestLagJSONForAnyGroup: `lag --json --groups` reads a group that is not
// larkline's (lag.groups works the same way), prints one JSON object per group,
// and exits 0 when every group was read.
func TestLagJSONForAnyGroup(t *testing.T) {
	cfg := roleConfig(t)
	topic := testenv.NewTopic(t, 2, nil)
	group := "someone-elses-" + strings.ToLower(t.Name())
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		testkafka.Produce(t, cl, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte("x")})
	}
	adm := kadm.NewClient(cl)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteGroups(context.Background(), group) })

	path := writeConfig(t, cfg)
	for _, args := range [][]string{
		{"lag", "--config", path, "--json", "--groups", group},
	} {
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("larkline %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		var got []groupLagJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("lag --json printed no JSON: %v\n%s", err, stdout)
		}
		if len(got) != 1 || got[0].Group != group || got[0].TotalLag != 4 || len(got[0].Partitions) != 2 || got[0].Error != "" {
			t.Fatalf("lag --json = %+v, want group %s with 2 partitions and a total lag of 4", got, group)
		}
	}

	// lag.groups adds the group to larkline's own.
	cfg.Lag.Groups = []string{group}
	stdout, stderr, code := runCLI(t, "lag", "--config", writeConfig(t, cfg), "--json")
	if code != 0 {
		t.Fatalf("lag with lag.groups: exit %d\n%s\n%s", code, stderr, stdout)
	}
	var got []groupLagJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, g.Group)
	}
	if !slices.Contains(names, group) || !slices.Contains(names, groupName(cfg, groupSink)) {
		t.Fatalf("lag with lag.groups reported %v, want larkline's groups and %s", names, group)
	}
}

// TestUnreadGroups: a group, or one partition of it, that could not be read makes
// `lag` exit non-zero.
func TestUnreadGroups(t *testing.T) {
	denied := errors.New("denied")
	for _, tc := range []struct {
		name string
		lags []kafka.GroupLag
		want []string
	}{
		{"all read", []kafka.GroupLag{{Group: "a", Partitions: []kafka.PartitionLag{{Topic: "t"}}}, {Group: "b"}}, nil},
		{"group unread", []kafka.GroupLag{{Group: "a"}, {Group: "b", Err: denied}}, []string{"b"}},
		{"partition unread", []kafka.GroupLag{{Group: "a", Partitions: []kafka.PartitionLag{{Topic: "t"}, {Topic: "t", Partition: 1, Err: denied}}}}, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unreadGroups(tc.lags); !slices.Equal(got, tc.want) {
				t.Fatalf("unreadGroups = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTopicsDryRunAndPrint: `topics ensure --dry-run` creates nothing and names
// every missing topic; `topics print` lists larkline's five topics and Goka's table
// and loop topics of every processor version asked for, in each format;
// kafka.manageTopics false makes `topics ensure` fail on a missing topic instead of
// creating it, and accept a longer retention with a warning.
func TestTopicsDryRunAndPrint(t *testing.T) {
	cfg := roleConfig(t)
	suffix := fmt.Sprintf("%x", time.Now().UnixNano())
	cfg.Kafka.GroupPrefix = "roles-" + suffix
	cfg.Kafka.Topics.Evidence = "t32-evidence-" + suffix
	cfg.Kafka.Topics.Checkpoints = "t32-checkpoints-" + suffix
	cfg.Kafka.Topics.Workspaces = "t32-workspaces-" + suffix
	cfg.Kafka.Topics.WindowsClosed = "t32-closed-" + suffix
	cfg.Kafka.Topics.DeadLetter = "t32-dead-" + suffix
	all := []string{cfg.Kafka.Topics.Evidence, cfg.Kafka.Topics.Checkpoints, cfg.Kafka.Topics.Workspaces, cfg.Kafka.Topics.WindowsClosed, cfg.Kafka.Topics.DeadLetter}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), all...) })
	path := writeConfig(t, cfg)

	stdout, stderr, code := runCLI(t, "topics", "ensure", "--dry-run", "--config", path)
	if code != 0 {
		t.Fatalf("topics ensure --dry-run: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, n := range all {
		if !strings.Contains(stdout, "missing   "+n+" (would be created)") {
			t.Errorf("dry run does not name %s:\n%s", n, stdout)
		}
	}
	details, err := adm.ListTopics(context.Background(), all...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range all {
		if d, ok := details[n]; ok && d.Err == nil {
			t.Fatalf("the dry run created %s", n)
		}
	}

	for _, format := range []string{"kafka-topics", "strimzi", "terraform"} {
		stdout, stderr, code := runCLI(t, "topics", "print", "--format", format, "--processor-versions", "v1,v2", "--config", path)
		if code != 0 {
			t.Fatalf("topics print --format %s: exit %d\n%s", format, code, stderr)
		}
		want := append(slices.Clone(all), "roles-"+suffix+"-windows-v1-table", "roles-"+suffix+"-windows-v1-loop",
			"roles-"+suffix+"-windows-v2-table", "roles-"+suffix+"-windows-v2-loop")
		for _, n := range want {
			if !strings.Contains(stdout, n) {
				t.Errorf("topics print --format %s does not list %s:\n%s", format, n, stdout)
			}
		}
	}

	// manageTopics false: a missing topic is an error, never created.
	cfg.Kafka.ManageTopics = false
	unmanaged := writeConfig(t, cfg)
	stdout, _, code = runCLI(t, "topics", "ensure", "--config", unmanaged)
	if code != 1 || !strings.Contains(stdout, "MISSING   "+cfg.Kafka.Topics.Evidence) {
		t.Fatalf("topics ensure with manageTopics false and no topics: exit %d, want 1 naming the missing topics:\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "MISSING   "+cfg.Kafka.GroupPrefix+"-windows-v1-table") {
		t.Fatalf("topics ensure with manageTopics false does not check Goka's table topic:\n%s", stdout)
	}
	// created by "the platform team", one with a longer retention: a warning only
	specs := allTopicSpecs(cfg, cfg.Windows.ProcessorVersion)
	t.Cleanup(func() {
		_, _ = adm.DeleteTopics(context.Background(), cfg.Kafka.GroupPrefix+"-windows-v1-table", cfg.Kafka.GroupPrefix+"-windows-v1-loop")
	})
	for i := range specs {
		if specs[i].Name == cfg.Kafka.Topics.DeadLetter {
			specs[i].Configs[kafka.ConfigRetentionMs] = "5184000000" // 60 days, not 30
		}
	}
	if _, err := kafka.EnsureTopics(context.Background(), adm, specs); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCLI(t, "topics", "ensure", "--config", unmanaged)
	if code != 0 || !strings.Contains(stdout, "warning   topic "+cfg.Kafka.Topics.DeadLetter+": retention.ms") {
		t.Fatalf("topics ensure with a longer retention: exit %d, want 0 and a warning:\n%s%s", code, stdout, stderr)
	}
}
