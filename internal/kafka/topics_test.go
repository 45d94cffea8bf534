package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/larkline/larkline/internal/testenv"
)

func TestDefaultTopicSpecs(t *testing.T) {
	names := DefaultTopicNames()
	tests := []struct {
		name        string
		replication int16
		wantMinISR  string
	}{
		{"single replica", 1, "1"},
		{"two replicas", 2, "1"},
		{"three replicas", 3, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs := DefaultTopicSpecs(names, 12, tt.replication)
			policies := map[string]string{}
			for _, s := range specs {
				if err := s.Validate(); err != nil {
					t.Fatalf("default spec %s invalid: %v", s.Name, err)
				}
				if s.Partitions != 12 || s.Replication != tt.replication {
					t.Fatalf("%s: partitions %d, replication %d", s.Name, s.Partitions, s.Replication)
				}
				if got := s.Configs[ConfigMinInsyncReplicas]; got != tt.wantMinISR {
					t.Fatalf("%s: min.insync.replicas %s, want %s", s.Name, got, tt.wantMinISR)
				}
				if s.Purpose == "" {
					t.Fatalf("%s: no purpose", s.Name)
				}
				policies[s.Name] = s.Configs[ConfigCleanupPolicy]
			}
			want := map[string]string{
				names.Evidence:      CleanupCompact,
				names.Checkpoints:   CleanupCompact,
				names.Workspaces:    CleanupCompact,
				names.WindowsClosed: CleanupDelete,
				names.DeadLetter:    CleanupDelete,
			}
			for n, p := range want {
				if policies[n] != p {
					t.Fatalf("%s: cleanup.policy %q, want %q", n, policies[n], p)
				}
			}
		})
	}
	// Issue #29: superseded text leaves the evidence topic within a documented bound.
	ev := DefaultTopicSpecs(names, 1, 1)[0]
	seg, _ := strconv.ParseInt(ev.Configs[ConfigSegmentMs], 10, 64)
	lag, _ := strconv.ParseInt(ev.Configs[ConfigMaxCompactionLagMs], 10, 64)
	if ev.Name != names.Evidence || seg <= 0 || lag <= 0 || time.Duration(max(seg, lag))*time.Millisecond > EvidenceCompactionBound ||
		EvidenceCompactionBound > 24*time.Hour {
		t.Fatalf("evidence topic segment.ms %d, max.compaction.lag.ms %d: want both set, within %s (at most 24h)", seg, lag, EvidenceCompactionBound)
	}
	specs := DefaultTopicSpecs(names, 1, 1)
	specs[0].Configs["x"] = "y"
	if _, ok := DefaultTopicSpecs(names, 1, 1)[0].Configs["x"]; ok {
		t.Fatal("DefaultTopicSpecs shares config maps between calls")
	}
}

func TestTopicSpecValidate(t *testing.T) {
	ok := TopicSpec{Name: "t", Partitions: 1, Replication: 1, Configs: map[string]string{ConfigCleanupPolicy: "compact,delete"}}
	tests := []struct {
		name   string
		modify func(*TopicSpec)
		valid  bool
	}{
		{"valid", func(*TopicSpec) {}, true},
		{"empty name", func(s *TopicSpec) { s.Name = "" }, false},
		{"name with slash", func(s *TopicSpec) { s.Name = "a/b" }, false},
		{"zero partitions", func(s *TopicSpec) { s.Partitions = 0 }, false},
		{"zero replication", func(s *TopicSpec) { s.Replication = 0 }, false},
		{"no cleanup policy", func(s *TopicSpec) { s.Configs = map[string]string{} }, false},
		{"bad cleanup policy", func(s *TopicSpec) { s.Configs = map[string]string{ConfigCleanupPolicy: "forever"} }, false},
		{"empty config key", func(s *TopicSpec) { s.Configs = map[string]string{ConfigCleanupPolicy: "delete", "": "x"} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.modify(&s)
			err := s.Validate()
			if tt.valid != (err == nil) {
				t.Fatalf("Validate() = %v, valid = %v", err, tt.valid)
			}
			if err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("err = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestReportErr(t *testing.T) {
	if err := (Report{Created: []string{"a"}, Matching: []string{"b"}}).Err(); err != nil {
		t.Fatalf("Err() without problems = %v", err)
	}
	err := Report{Problems: []TopicProblem{{Topic: "a", Field: "partitions", Want: "3", Got: "2"}}}.Err()
	if !errors.Is(err, ErrTopicMismatch) {
		t.Fatalf("Err() = %v, want ErrTopicMismatch", err)
	}
}

func TestSameConfigTreatsCleanupPolicyAsASet(t *testing.T) {
	if !sameConfig(ConfigCleanupPolicy, "compact,delete", "delete,compact") {
		t.Fatal("compact,delete != delete,compact")
	}
	if sameConfig(ConfigCleanupPolicy, "compact", "delete") || sameConfig(ConfigRetentionMs, "1", "2") {
		t.Fatal("different values compare equal")
	}
}

// TestEnsureTopicsOnRealBroker creates topics, re-runs (no change), and reports a
// topic that differs from its spec without changing it.
func TestEnsureTopicsOnRealBroker(t *testing.T) {
	ctx := testenv.Context(t, 2*60e9)
	_, adm := adminForTest(t)
	base := uniqueName(t, "larkline-ensure")
	names := TopicNames{
		Evidence:      base + ".evidence",
		Checkpoints:   base + ".checkpoints",
		Workspaces:    base + ".workspaces",
		WindowsClosed: base + ".windows",
		DeadLetter:    base + ".dlq",
	}
	specs := DefaultTopicSpecs(names, 3, 1)
	all := make([]string, len(specs))
	for i, s := range specs {
		all[i] = s.Name
	}
	deleteTopicsAtCleanup(t, adm, all...)
	slices.Sort(all)

	t.Run("creates missing topics", func(t *testing.T) {
		rep, err := EnsureTopics(ctx, adm, specs)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Created, all) || len(rep.Matching) != 0 || len(rep.Problems) != 0 {
			t.Fatalf("report = %+v, want all created", rep)
		}
		details, err := adm.ListTopics(ctx, all...)
		if err != nil {
			t.Fatal(err)
		}
		configs, err := adm.DescribeTopicConfigs(ctx, all...)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			if n := len(details[s.Name].Partitions); n != 3 {
				t.Fatalf("%s has %d partitions, want 3", s.Name, n)
			}
			rc, err := configs.On(s.Name, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range rc.Configs {
				if want, ok := s.Configs[c.Key]; ok && c.MaybeValue() != want {
					t.Fatalf("%s: %s = %q, want %q", s.Name, c.Key, c.MaybeValue(), want)
				}
			}
		}
	})

	t.Run("re-run changes nothing", func(t *testing.T) {
		rep, err := EnsureTopics(ctx, adm, specs)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Created) != 0 || !slices.Equal(rep.Matching, all) || len(rep.Problems) != 0 {
			t.Fatalf("report = %+v, want all matching", rep)
		}
		if err := rep.Err(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("mismatch is reported, never changed", func(t *testing.T) {
		odd := base + ".odd"
		deleteTopicsAtCleanup(t, adm, odd)
		if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{ConfigCleanupPolicy: kadm.StringPtr(CleanupDelete)}, odd); err != nil {
			t.Fatal(err)
		}
		spec := TopicSpec{Name: odd, Partitions: 3, Replication: 2, Configs: map[string]string{
			ConfigCleanupPolicy: CleanupCompact,
		}}
		rep, err := EnsureTopics(ctx, adm, append([]TopicSpec{spec}, specs...))
		if err != nil {
			t.Fatal(err)
		}
		want := []TopicProblem{
			{Topic: odd, Field: ConfigCleanupPolicy, Want: CleanupCompact, Got: CleanupDelete},
			{Topic: odd, Field: "partitions", Want: "3", Got: "2"},
			{Topic: odd, Field: "replication", Want: "2", Got: "1"},
		}
		if !slices.Equal(rep.Problems, want) {
			t.Fatalf("problems = %+v, want %+v", rep.Problems, want)
		}
		if !slices.Equal(rep.Matching, all) || len(rep.Created) != 0 {
			t.Fatalf("report = %+v", rep)
		}
		if !errors.Is(rep.Err(), ErrTopicMismatch) {
			t.Fatalf("Err() = %v", rep.Err())
		}
		details, err := adm.ListTopics(ctx, odd)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(details[odd].Partitions); n != 2 {
			t.Fatalf("%s now has %d partitions: EnsureTopics changed an existing topic", odd, n)
		}
		rc, err := adm.DescribeTopicConfigs(ctx, odd)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := rc.On(odd, nil)
		for _, e := range c.Configs {
			if e.Key == ConfigCleanupPolicy && e.MaybeValue() != CleanupDelete {
				t.Fatalf("%s cleanup.policy now %q: EnsureTopics changed an existing topic", odd, e.MaybeValue())
			}
		}
	})

	t.Run("compaction bounds are set on an existing evidence topic", func(t *testing.T) {
		// An evidence topic made before issue #29: compacted, without the bounds
		// (the broker's defaults: a week's segments, no compaction lag bound).
		old := base + ".old-evidence"
		deleteTopicsAtCleanup(t, adm, old)
		if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{ConfigCleanupPolicy: kadm.StringPtr(CleanupCompact)}, old); err != nil {
			t.Fatal(err)
		}
		n := names
		n.Evidence = old
		spec := DefaultTopicSpecs(n, 3, 1)[0]
		rep, err := EnsureTopics(ctx, adm, []TopicSpec{spec})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Set) != 2 || rep.Err() != nil {
			t.Fatalf("report = %+v, want segment.ms and max.compaction.lag.ms set", rep)
		}
		// The broker applies an altered config a moment later: wait for it.
		testenv.EventuallyNil(t, 30*time.Second, "the altered config of "+old, func() error {
			rc, err := adm.DescribeTopicConfigs(ctx, old)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := rc.On(old, nil)
			got := map[string]string{}
			for _, e := range c.Configs {
				got[e.Key] = e.MaybeValue()
			}
			if got[ConfigSegmentMs] != spec.Configs[ConfigSegmentMs] || got[ConfigMaxCompactionLagMs] != spec.Configs[ConfigMaxCompactionLagMs] {
				return fmt.Errorf("segment.ms %q, max.compaction.lag.ms %q, want %q and %q", got[ConfigSegmentMs], got[ConfigMaxCompactionLagMs],
					spec.Configs[ConfigSegmentMs], spec.Configs[ConfigMaxCompactionLagMs])
			}
			return nil
		})
		if rep, err := EnsureTopics(ctx, adm, []TopicSpec{spec}); err != nil || len(rep.Set) != 0 || len(rep.Matching) != 1 {
			t.Fatalf("second run: %+v %v, want matching", rep, err)
		}
	})

	t.Run("invalid specs are rejected before any request", func(t *testing.T) {
		dup := []TopicSpec{specs[0], specs[0]}
		if _, err := EnsureTopics(ctx, adm, dup); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("duplicate spec: err = %v", err)
		}
		if _, err := EnsureTopics(ctx, nil, specs); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("nil admin: err = %v", err)
		}
	})
}

// TestEnsuredTopicsAnswerOffsetsAtOnce: a topic EnsureTopics created answers a
// ListOffsets on every partition at once, through sarama's GetOffset, which retries
// only once. That is what a Goka processor asks first of a table topic its topic
// manager has just created; metadata names a partition's leader before the broker
// acts as one, and the processor's run then failed with NOT_LEADER_OR_FOLLOWER.
func TestEnsuredTopicsAnswerOffsetsAtOnce(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	_, adm := adminForTest(t)
	o := validGokaOptions()
	o.Brokers = brokersForTest(t)
	cfg, err := SaramaConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sarama.NewClient(o.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Close() })

	const topics, partitions = 4, 24
	for i := range topics {
		spec := TopicSpec{Name: uniqueName(t, "larkline-ensure-offsets"), Partitions: partitions, Replication: 1,
			Configs: map[string]string{ConfigCleanupPolicy: CleanupCompact}}
		deleteTopicsAtCleanup(t, adm, spec.Name)
		if _, err := EnsureTopics(ctx, adm, []TopicSpec{spec}); err != nil {
			t.Fatal(err)
		}
		for p := range int32(partitions) {
			if off, err := sc.GetOffset(spec.Name, p, sarama.OffsetOldest); err != nil || off != 0 {
				t.Fatalf("topic %d, partition %d: oldest offset %d, %v; want 0 at once", i, p, off, err)
			}
		}
	}
}
