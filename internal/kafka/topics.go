package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Topic configuration keys larkline sets.
const (
	ConfigCleanupPolicy     = "cleanup.policy"
	ConfigRetentionMs       = "retention.ms"
	ConfigDeleteRetentionMs = "delete.retention.ms"
	ConfigMinInsyncReplicas = "min.insync.replicas"
	// ConfigSegmentMs and ConfigMaxCompactionLagMs bound how long a superseded record
	// of a compacted topic stays readable (the active segment is never compacted).
	ConfigSegmentMs          = "segment.ms"
	ConfigMaxCompactionLagMs = "max.compaction.lag.ms"

	CleanupCompact = "compact"
	CleanupDelete  = "delete"
)

// Retention of the topics DefaultTopicSpecs defines.
const (
	// WindowsClosedRetention keeps closed-window notices a week: long enough to survive
	// a synthesis outage over a weekend; after that the watcher re-emits from state.
	WindowsClosedRetention = 7 * 24 * time.Hour
	// DeadLetterRetention keeps parked records a month, for an operator to look at.
	DeadLetterRetention = 30 * 24 * time.Hour
	// TombstoneRetention is delete.retention.ms of compacted topics: how long a
	// tombstone (a deleted message, checkpoint or binding) stays readable so that a
	// consumer that was down sees the deletion.
	TombstoneRetention = 24 * time.Hour
	// EvidenceSegment (segment.ms of the evidence topic) rolls its active segment at
	// least this often, so that the cleaner may reach every record (issue #29).
	EvidenceSegment = 6 * time.Hour
	// EvidenceMaxCompactionLag (max.compaction.lag.ms of the evidence topic): a
	// record superseded by a newer version of its key (an edit's old text, a recalled
	// message's live version, a version retention redacted) becomes due for
	// compaction at most this long after it was written, and the broker rolls the
	// segment for it. With a cleaner that keeps up, superseded text leaves the
	// topic within EvidenceCompactionBound.
	EvidenceMaxCompactionLag = 18 * time.Hour
	// EvidenceCompactionBound is the documented bound (docs/operations.md): the
	// compaction lag plus the cleaner's own scheduling.
	EvidenceCompactionBound = 24 * time.Hour
)

// settableConfigs are the configs EnsureTopics sets on an existing topic whose value
// is missing or larger than its spec's: they only decide how soon the cleaner runs,
// never what is kept, so changing them in place is safe.
var settableConfigs = map[string]bool{ConfigSegmentMs: true, ConfigMaxCompactionLagMs: true}

// TopicSpec is what a topic must look like.
type TopicSpec struct {
	// Name of the topic.
	Name string
	// Partitions of the topic, >= 1.
	Partitions int32
	// Replication factor, >= 1.
	Replication int16
	// Configs are set on creation and compared on existing topics. cleanup.policy is
	// required.
	Configs map[string]string
	// Purpose says why the topic exists and is configured so; documentation only.
	Purpose string
}

// TopicNames names larkline's topics. DefaultTopicNames gives the standard names.
type TopicNames struct {
	Evidence      string // compacted evidence, key <workspace>/<chat>/<message>
	Checkpoints   string // compacted collection checkpoints, key <workspace>/<chat>
	Workspaces    string // compacted workspaces with their bound chats, key <workspace>
	WindowsClosed string // closed-window notices, key <workspace>/<chat>
	DeadLetter    string // records that could not be decoded or processed
}

// DefaultTopicNames returns the standard topic names (version suffix .v1: a change of
// key or partitioning is a new topic, never an in-place change).
func DefaultTopicNames() TopicNames {
	return TopicNames{
		Evidence:      "larkline.evidence.v1",
		Checkpoints:   "larkline.checkpoints.v1",
		Workspaces:    "larkline.workspaces.v1",
		WindowsClosed: "larkline.windows.closed.v1",
		DeadLetter:    "larkline.deadletter.v1",
	}
}

// DefaultTopicSpecs returns the specifications of larkline's topics with the given
// names, partition count and replication factor. Every topic gets the same partition
// count: evidence, checkpoints and closed windows are keyed by (a key that starts
// with) <workspace>/<chat> and are read together by the window processor, so they must
// be co-partitioned; the workspaces topic (key <workspace>) and the dead-letter topic
// take the same count for simplicity. min.insync.replicas is 2 when replication is at
// least 3 (acks=all then survives one broker loss without losing a write) and 1
// otherwise. The closed-window and dead-letter topics take max.message.bytes =
// MaxBatchBytes: a dead letter parks whatever record failed (limits.go). See
// deploy/kafka/topics.yaml for the same table, in prose.
func DefaultTopicSpecs(names TopicNames, partitions int32, replication int16) []TopicSpec {
	minISR := "1"
	if replication >= 3 {
		minISR = "2"
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	compacted := func() map[string]string {
		return map[string]string{
			ConfigCleanupPolicy:     CleanupCompact,
			ConfigDeleteRetentionMs: ms(TombstoneRetention),
			ConfigMinInsyncReplicas: minISR,
		}
	}
	deleted := func(retention time.Duration) map[string]string {
		return map[string]string{
			ConfigCleanupPolicy:     CleanupDelete,
			ConfigRetentionMs:       ms(retention),
			ConfigMinInsyncReplicas: minISR,
		}
	}
	large := func(c map[string]string) map[string]string {
		c[ConfigMaxMessageBytes] = maxBatchBytesConfig
		return c
	}
	evidence := compacted()
	evidence[ConfigSegmentMs] = ms(EvidenceSegment)
	evidence[ConfigMaxCompactionLagMs] = ms(EvidenceMaxCompactionLag)
	return []TopicSpec{
		{Name: names.Evidence, Partitions: partitions, Replication: replication, Configs: evidence,
			Purpose: "one record per message version per workspace; compaction keeps the newest version of every message, a tombstone deletes it; superseded text is compacted away within 24 h (segment.ms, max.compaction.lag.ms)"},
		{Name: names.Checkpoints, Partitions: partitions, Replication: replication, Configs: compacted(),
			Purpose: "history collection checkpoint per workspace/chat; only the newest matters"},
		{Name: names.Workspaces, Partitions: partitions, Replication: replication, Configs: compacted(),
			Purpose: "each workspace with its bound chats; only the newest version of a workspace matters"},
		{Name: names.WindowsClosed, Partitions: partitions, Replication: replication, Configs: large(deleted(WindowsClosedRetention)),
			Purpose: "notices that a window is ready for synthesis (version 3: the evidence offset range it covers); consumed once, idempotent downstream"},
		{Name: names.DeadLetter, Partitions: partitions, Replication: replication, Configs: large(deleted(DeadLetterRetention)),
			Purpose: "records of unknown schema or that failed permanently (a closed window among them), parked for an operator"},
	}
}

// Validate checks a spec without talking to Kafka.
func (s TopicSpec) Validate() error {
	if err := validateTopicName(s.Name); err != nil {
		return err
	}
	if s.Partitions < 1 {
		return invalid("topic %s: partitions %d, want >= 1", s.Name, s.Partitions)
	}
	if s.Replication < 1 {
		return invalid("topic %s: replication %d, want >= 1", s.Name, s.Replication)
	}
	policy, ok := s.Configs[ConfigCleanupPolicy]
	if !ok {
		return invalid("topic %s: %s is required", s.Name, ConfigCleanupPolicy)
	}
	for _, p := range strings.Split(policy, ",") {
		if p != CleanupCompact && p != CleanupDelete {
			return invalid("topic %s: %s %q, want compact, delete or compact,delete", s.Name, ConfigCleanupPolicy, policy)
		}
	}
	for k := range s.Configs {
		if k == "" {
			return invalid("topic %s: empty config key", s.Name)
		}
	}
	return nil
}

// TopicProblem is one difference between an existing topic and its spec.
type TopicProblem struct {
	Topic string
	Field string // "partitions", "replication" or a config key
	Want  string
	Got   string // "" for a config the broker did not report
}

func (p TopicProblem) String() string {
	return fmt.Sprintf("topic %s: %s is %q, want %q", p.Topic, p.Field, p.Got, p.Want)
}

// Report says what EnsureTopics or CheckTopics did and found. Topic names are
// sorted.
type Report struct {
	Created  []string       // created by this call
	Missing  []string       // do not exist and were not created (CheckTopics)
	Matching []string       // existed and match their spec (warnings aside)
	Set      []TopicProblem // settable configs (segment.ms, max.compaction.lag.ms) set on existing topics: Got is the old value
	Problems []TopicProblem // differences on existing topics, left as they are
	// Warnings are differences that do not affect correctness (see Harmless): a
	// longer retention, more replicas, a larger record limit. Never an error.
	Warnings []TopicProblem
}

// Err returns nil when there are no problems, or an error wrapping ErrTopicMismatch
// that lists them.
func (r Report) Err() error {
	if len(r.Problems) == 0 && len(r.Missing) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(r.Missing)+len(r.Problems))
	for _, m := range r.Missing {
		msgs = append(msgs, "topic "+m+" does not exist")
	}
	for _, p := range r.Problems {
		msgs = append(msgs, p.String())
	}
	return fmt.Errorf("%w: %s", ErrTopicMismatch, strings.Join(msgs, "; "))
}

// EnsureTopics creates the topics in specs that do not exist and checks the ones that
// do. An existing topic whose partition count, replication factor (the smallest
// replica set of its partitions) or a config in its spec differs is reported in
// Report.Problems and left unchanged: changing partitions remaps keys, and changing
// cleanup.policy can delete data, so those are operator decisions. The exception is
// segment.ms and max.compaction.lag.ms (they bound how long superseded text stays in
// a compacted topic and change nothing else): a missing or larger value is set to the
// spec's and listed in Report.Set. It returns when every partition's leader answers,
// so a caller can read offsets and produce at once. The returned error
// is about failing to ask or to create (wrapped with what was being done), never
// about a mismatch; use Report.Err to treat mismatches as an error.
func EnsureTopics(ctx context.Context, adm *kadm.Client, specs []TopicSpec) (Report, error) {
	return ensureTopics(ctx, adm, specs, true)
}

// CheckTopics is EnsureTopics without creating anything: a topic that does not
// exist is listed in Report.Missing (and makes Report.Err an error). It needs only
// Describe and DescribeConfigs on the topics: `topics ensure --dry-run`, and every
// role when kafka.manageTopics is false.
func CheckTopics(ctx context.Context, adm *kadm.Client, specs []TopicSpec) (Report, error) {
	return ensureTopics(ctx, adm, specs, false)
}

func ensureTopics(ctx context.Context, adm *kadm.Client, specs []TopicSpec, create bool) (Report, error) {
	var rep Report
	if adm == nil {
		return rep, invalid("ensure topics: nil admin client")
	}
	seen := make(map[string]bool, len(specs))
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			return rep, err
		}
		if seen[s.Name] {
			return rep, invalid("topic %s: specified twice", s.Name)
		}
		seen[s.Name] = true
		names = append(names, s.Name)
	}
	if len(specs) == 0 {
		return rep, nil
	}

	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return rep, fmt.Errorf("listing topics %v: %w", names, err)
	}
	var existing []TopicSpec
	for _, s := range specs {
		d, ok := details[s.Name]
		switch {
		case ok && d.Err == nil:
			existing = append(existing, s)
			continue
		case ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return rep, fmt.Errorf("describing topic %s: %w", s.Name, d.Err)
		}
		if !create {
			rep.Missing = append(rep.Missing, s.Name)
			continue
		}
		resp, err := adm.CreateTopic(ctx, s.Partitions, s.Replication, configPtrs(s.Configs), s.Name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil:
			rep.Created = append(rep.Created, s.Name)
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Created concurrently (another instance, or metadata not yet propagated
			// when we listed): check it like any existing topic.
			existing = append(existing, s)
		default:
			return rep, fmt.Errorf("creating topic %s (partitions %d, replication %d): %w", s.Name, s.Partitions, s.Replication, err)
		}
	}
	// A created topic (or one another instance just created) reaches every broker's
	// metadata a little later; wait for it so the caller can produce right away and
	// the check below sees it.
	pending := slices.Clone(rep.Created)
	for _, s := range existing {
		pending = append(pending, s.Name)
	}
	if err := waitForTopics(ctx, adm, pending); err != nil {
		return rep, err
	}
	if len(existing) > 0 {
		if err := checkExisting(ctx, adm, existing, &rep, create); err != nil {
			return rep, err
		}
	}
	sort.Strings(rep.Created)
	sort.Strings(rep.Missing)
	sort.Strings(rep.Matching)
	for _, ps := range [][]TopicProblem{rep.Problems, rep.Warnings} {
		sort.SliceStable(ps, func(i, j int) bool {
			if ps[i].Topic != ps[j].Topic {
				return ps[i].Topic < ps[j].Topic
			}
			return ps[i].Field < ps[j].Field
		})
	}
	return rep, nil
}

// Harmless reports whether an existing topic's value got, where the spec wants
// want, cannot affect larkline's correctness: a longer (or infinite, -1) retention.ms
// or delete.retention.ms keeps records longer, and more replicas only make writes
// safer (a higher min.insync.replicas is not: it can refuse acks=all writes). Such drift is a warning; any other
// difference (partitions, cleanup.policy, a shorter retention, fewer replicas) is a
// problem.
func Harmless(field, want, got string) bool {
	w, werr := strconv.ParseInt(want, 10, 64)
	g, gerr := strconv.ParseInt(got, 10, 64)
	if werr != nil || gerr != nil {
		return false
	}
	switch field {
	case ConfigRetentionMs, ConfigDeleteRetentionMs:
		return g == -1 || g > w
	case "replication":
		return g > w
	}
	return false
}

// TopicVisibleTimeout bounds how long EnsureTopics waits for topics to appear in the
// cluster's metadata with a leader for every partition that answers ListOffsets.
const TopicVisibleTimeout = 30 * time.Second

// awaitConfigs waits until the broker describes topic with every value of want
// (sameConfig): an altered config reaches the broker's metadata a little after the
// controller acknowledged the change, and a caller that produces right after raising
// max.message.bytes, or a reader of the config, must see the new value.
func awaitConfigs(ctx context.Context, adm *kadm.Client, topic string, want map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, TopicVisibleTimeout)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		var stale string
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err == nil {
			var c kadm.ResourceConfig
			if c, err = rc.On(topic, nil); err == nil && c.Err == nil {
				have := make(map[string]string, len(c.Configs))
				for _, e := range c.Configs {
					have[e.Key] = e.MaybeValue()
				}
				for k, v := range want {
					if !sameConfig(k, v, have[k]) {
						stale = k
					}
				}
				if stale == "" {
					return nil
				}
			} else if err == nil {
				err = c.Err
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%s is not yet the value set", stale)
			}
			return fmt.Errorf("waiting for the configs of topic %s to show: %w (%w)", topic, err, ctx.Err())
		case <-time.After(wait):
			wait = min(2*wait, time.Second)
		}
	}
}

func waitForTopics(ctx context.Context, adm *kadm.Client, names []string) error {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, TopicVisibleTimeout)
	defer cancel()
	// kadm answers from the client's metadata cache, which keeps a topic it saw as
	// missing for MetadataMinAge (5 s): asking for authorized operations is kadm's
	// documented way to bypass the cache, so a topic is seen as soon as it has leaders.
	fresh := kadm.WithAuthorizedOps(ctx)
	wait := 50 * time.Millisecond
	for {
		details, err := adm.ListTopics(fresh, names...)
		missing := ""
		if err == nil {
			for _, n := range names {
				if !visible(details[n]) {
					missing = n
					break
				}
			}
			if missing == "" {
				// Metadata names a leader before that broker acts as one: until it
				// does, it answers NOT_LEADER_OR_FOLLOWER, and sarama's GetOffset (a
				// Goka table's first offset) retries only once. A topic is usable when
				// every partition's leader answers a ListOffsets.
				if err = leadersAnswer(ctx, adm, names); err == nil {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("topic %s has no leader for every partition yet", missing)
			}
			return fmt.Errorf("waiting for topics %v to be visible: %w (%w)", names, err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// leadersAnswer lists the start offset of every partition of names from its leader.
func leadersAnswer(ctx context.Context, adm *kadm.Client, names []string) error {
	listed, err := adm.ListStartOffsets(ctx, names...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the start offsets: %w", err)
	}
	return nil
}

func visible(d kadm.TopicDetail) bool {
	if d.Err != nil || len(d.Partitions) == 0 {
		return false
	}
	for _, p := range d.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// checkExisting compares existing topics with their specs; with manage it sets the
// settable configs a topic lacks, otherwise it reports them as problems.
func checkExisting(ctx context.Context, adm *kadm.Client, specs []TopicSpec, rep *Report, manage bool) error {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	details, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), names...) // uncached, as in waitForTopics
	if err != nil {
		return fmt.Errorf("listing existing topics %v: %w", names, err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return fmt.Errorf("describing configs of topics %v: %w", names, err)
	}
	for _, s := range specs {
		d, ok := details[s.Name]
		if !ok || d.Err != nil {
			return fmt.Errorf("describing topic %s: %w", s.Name, topicErr(ok, d.Err))
		}
		rc, err := configs.On(s.Name, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return fmt.Errorf("describing configs of topic %s: %w", s.Name, err)
		}
		var problems []TopicProblem
		if got := int32(len(d.Partitions)); got != s.Partitions {
			problems = append(problems, TopicProblem{s.Name, "partitions", itoa(int64(s.Partitions)), itoa(int64(got))})
		}
		if got := minReplicas(d); got != int(s.Replication) {
			problems = append(problems, TopicProblem{s.Name, "replication", itoa(int64(s.Replication)), itoa(int64(got))})
		}
		have := make(map[string]string, len(rc.Configs))
		for _, c := range rc.Configs {
			have[c.Key] = c.MaybeValue()
		}
		keys := make([]string, 0, len(s.Configs))
		for k := range s.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var set []kadm.AlterConfig
		var setting []TopicProblem
		for _, k := range keys {
			want := s.Configs[k]
			got, ok := have[k]
			if !ok || !sameConfig(k, want, got) {
				if settableConfigs[k] {
					set = append(set, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &want})
					setting = append(setting, TopicProblem{s.Name, k, want, got})
					continue
				}
				problems = append(problems, TopicProblem{s.Name, k, want, got})
			}
		}
		if len(set) > 0 && !manage { // only checking: a bound the topic lacks is a problem
			problems = append(problems, setting...)
		} else if len(set) > 0 {
			res, err := adm.AlterTopicConfigs(ctx, set, s.Name)
			if err == nil {
				for _, r := range res {
					if r.Err != nil {
						err = r.Err
					}
				}
			}
			if err == nil {
				want := make(map[string]string, len(set))
				for _, c := range set {
					want[c.Name] = *c.Value
				}
				err = awaitConfigs(ctx, adm, s.Name, want)
			}
			if err != nil {
				return fmt.Errorf("setting %d configs of topic %s: %w", len(set), s.Name, err)
			}
			rep.Set = append(rep.Set, setting...)
		}
		hard := 0
		for _, p := range problems {
			if Harmless(p.Field, p.Want, p.Got) {
				rep.Warnings = append(rep.Warnings, p)
				continue
			}
			rep.Problems = append(rep.Problems, p)
			hard++
		}
		if hard == 0 {
			rep.Matching = append(rep.Matching, s.Name)
		}
	}
	return nil
}

func topicErr(listed bool, err error) error {
	if !listed {
		return kerr.UnknownTopicOrPartition
	}
	return err
}

func minReplicas(d kadm.TopicDetail) int {
	m := -1
	for _, p := range d.Partitions {
		if m < 0 || len(p.Replicas) < m {
			m = len(p.Replicas)
		}
	}
	if m < 0 {
		return 0
	}
	return m
}

// sameConfig compares config values; cleanup.policy is a set ("compact,delete" equals
// "delete,compact"), max.message.bytes is a lower bound (a topic that accepts
// larger batches than the spec asks for is fine), and segment.ms and
// max.compaction.lag.ms are upper bounds (text may leave sooner).
func sameConfig(key, want, got string) bool {
	switch key {
	case ConfigSegmentMs, ConfigMaxCompactionLagMs:
		w, werr := strconv.ParseInt(want, 10, 64)
		g, gerr := strconv.ParseInt(got, 10, 64)
		if werr != nil || gerr != nil {
			return want == got
		}
		return g <= w
	case ConfigCleanupPolicy:
	case ConfigMaxMessageBytes:
		w, werr := strconv.ParseInt(want, 10, 64)
		g, gerr := strconv.ParseInt(got, 10, 64)
		if werr != nil || gerr != nil {
			return want == got
		}
		return g >= w
	default:
		return want == got
	}
	w := strings.Split(want, ",")
	g := strings.Split(got, ",")
	slices.Sort(w)
	slices.Sort(g)
	return slices.Equal(w, g)
}

func configPtrs(m map[string]string) map[string]*string {
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
