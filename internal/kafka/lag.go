package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LagTimeUnknown is PartitionLag.LagTime when the age of the oldest unconsumed record
// was not measured (an error, the fetch bound, or no record arrived in time).
const LagTimeUnknown time.Duration = -1

// Defaults of LagOptions.
const (
	DefaultMaxTimestampFetches = 256
	DefaultTimestampTimeout    = 10 * time.Second
)

// PartitionLag is the lag of one group on one partition.
type PartitionLag struct {
	Group     string
	Topic     string
	Partition int32
	// Committed is the group's committed offset (the next offset it will read), or -1
	// if it has committed nothing on this partition.
	Committed int64
	// End is the partition's end offset (high watermark).
	End int64
	// Lag is End minus Committed (or minus the log start offset when nothing was
	// committed), never negative; -1 when Err is set.
	Lag int64
	// LagTime is how long the oldest unconsumed record has been waiting: now minus the
	// timestamp of the record at Committed (on a compacted topic, of the first record
	// at or after it). 0 when Lag is 0; LagTimeUnknown when not measured.
	LagTime time.Duration
	// Err is why the lag of this partition is unknown (listing offsets or reading the
	// commit failed).
	Err error
}

// GroupStateNotFound is GroupLag.State of a group the broker does not know (it
// has no members and no committed offsets): no error, no partitions.
const GroupStateNotFound = "NotFound"

// GroupLag is the lag of one consumer group.
type GroupLag struct {
	Group   string
	State   string // the broker's group state: Stable, Empty, PreparingRebalance, Dead, ...
	Members int
	// Partitions are sorted by topic, then partition.
	Partitions []PartitionLag
	// Err is why the group could not be described or its offsets fetched.
	Err error
}

// TotalLag is the sum of the known partition lags.
func (g GroupLag) TotalLag() int64 {
	var n int64
	for _, p := range g.Partitions {
		if p.Lag > 0 {
			n += p.Lag
		}
	}
	return n
}

// LagOptions bounds the timestamp look-ups of Lag. A zero TimestampTimeout and a
// nil MaxTimestampFetches mean the defaults.
type LagOptions struct {
	// MaxTimestampFetches bounds how many lagging partitions get a LagTime (one
	// record fetched each); the rest report LagTimeUnknown. nil means
	// DefaultMaxTimestampFetches, 0 measures no LagTime at all.
	MaxTimestampFetches *int
	// TimestampTimeout bounds the time spent fetching those records. Default 10s.
	TimestampTimeout time.Duration
}

// Check reports a negative MaxTimestampFetches or TimestampTimeout (ErrInvalidOptions).
// Lag runs it on every call; a long-running caller runs it once in its constructor.
func (o LagOptions) Check() error {
	if (o.MaxTimestampFetches != nil && *o.MaxTimestampFetches < 0) || o.TimestampTimeout < 0 {
		return invalid("lag options: max timestamp fetches %d (0: none), timeout %s: must not be negative", o.fetches(), o.TimestampTimeout)
	}
	return nil
}

// fetches is MaxTimestampFetches, its default when nil.
func (o LagOptions) fetches() int {
	if o.MaxTimestampFetches == nil {
		return DefaultMaxTimestampFetches
	}
	return *o.MaxTimestampFetches
}

// Lag describes groups and returns, per group and partition, the committed offset,
// end offset, lag in offsets and the age of the oldest unconsumed record: one
// GroupLag per distinct group, sorted by group name (not in the order asked), so a
// caller matches them by GroupLag.Group.
//
// cl is used for admin requests; to read record timestamps Lag opens a short-lived
// direct (group-less) consumer with cl's connection options (seed brokers, TLS, SASL,
// client id; its producer, consumer and group options are dropped), reads one record
// per lagging partition and closes it. A group-level problem (describe or offset
// fetch failed) is in GroupLag.Err and a partition-level one in PartitionLag.Err; the
// returned error is for failures that leave nothing to report (an auth error, the
// context).
func Lag(ctx context.Context, cl *kgo.Client, groups []string, o LagOptions) ([]GroupLag, error) {
	if cl == nil {
		return nil, invalid("lag: nil client")
	}
	if len(groups) == 0 {
		return nil, invalid("lag: no groups")
	}
	for _, g := range groups {
		if g == "" {
			return nil, invalid("lag: empty group id")
		}
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	fetches := o.fetches()
	o.TimestampTimeout = cmp.Or(o.TimestampTimeout, DefaultTimestampTimeout)

	adm := kadm.NewClient(cl)
	described, err := adm.Lag(ctx, groups...)
	if err != nil {
		return nil, fmt.Errorf("describing lag of groups %v: %w", groups, err)
	}

	out := make([]GroupLag, 0, len(groups))
	for _, name := range sortedUnique(groups) {
		d, ok := described[name]
		if !ok {
			out = append(out, GroupLag{Group: name, Err: fmt.Errorf("group %s missing from the describe response", name)})
			continue
		}
		g := GroupLag{Group: name, State: d.State, Members: len(d.Members), Err: d.Error()}
		if errors.Is(g.Err, kerr.GroupIDNotFound) {
			// Kafka 4 (KIP-1043) answers a describe of a group that never committed
			// with GROUP_ID_NOT_FOUND where older brokers answered Dead: a group whose
			// role has not run yet, not a failure to read it.
			g.State, g.Err = GroupStateNotFound, nil
		}
		for _, m := range d.Lag.Sorted() {
			p := PartitionLag{
				Group:     name,
				Topic:     m.Topic,
				Partition: m.Partition,
				Committed: m.Commit.At,
				End:       m.End.Offset,
				Lag:       m.Lag,
				LagTime:   LagTimeUnknown,
				Err:       m.Err,
			}
			if p.Err != nil {
				p.Lag, p.End = -1, -1
			} else if p.Lag == 0 {
				p.LagTime = 0
			}
			if p.Committed < 0 {
				p.Committed = -1
			}
			g.Partitions = append(g.Partitions, p)
		}
		out = append(out, g)
	}

	if fetches > 0 {
		if err := fillLagTimes(ctx, cl, described, out, fetches, o.TimestampTimeout); err != nil {
			return out, err
		}
	}
	return out, nil
}

func sortedUnique(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

type tp struct {
	topic     string
	partition int32
}

// fillLagTimes reads, for up to fetches lagging partitions, the record
// at the offset each group will read next, and sets LagTime from its timestamp.
// Several groups lagging at the same offset share one fetch: the record read is the
// earliest requested offset of the partition, and each group's LagTime comes from the
// first record at or after its own offset.
func fillLagTimes(ctx context.Context, cl *kgo.Client, described kadm.DescribedGroupLags, out []GroupLag, fetches int, timeout time.Duration) error {
	wants, from := lagWants(described, out, fetches)
	if len(from) == 0 {
		return nil
	}
	stamps, err := readLagStamps(ctx, cl, wants, from, timeout)
	if err != nil {
		return err
	}
	now := time.Now()
	for k, ws := range wants {
		for _, w := range ws {
			p := &out[w.gi].Partitions[w.pi]
			ts, ok := stamps[k][w.off]
			if !ok {
				continue
			}
			d := now.Sub(ts)
			if d < 0 {
				d = 0
			}
			p.LagTime = d
		}
	}
	return nil
}

// lagWant is one group's lagging partition: where it is in out, and the offset
// it reads next.
type lagWant struct {
	gi, pi int
	off    int64
}

// lagWants lists, per lagging partition (at most max of them), the offsets the
// groups read next, and the smallest of them (where reading starts).
func lagWants(described kadm.DescribedGroupLags, out []GroupLag, max int) (map[tp][]lagWant, map[tp]int64) {
	wants := map[tp][]lagWant{}
	from := map[tp]int64{}
	for gi := range out {
		for pi, p := range out[gi].Partitions {
			if p.Err != nil || p.Lag <= 0 {
				continue
			}
			k := tp{p.Topic, p.Partition}
			off := p.Committed
			if off < 0 {
				if m, ok := described[p.Group].Lag.Lookup(p.Topic, p.Partition); ok && m.Start.Err == nil {
					off = m.Start.Offset
				} else {
					off = 0
				}
			}
			if _, ok := from[k]; !ok {
				if len(from) >= max {
					continue
				}
				from[k] = off
			} else if off < from[k] {
				from[k] = off
			}
			wants[k] = append(wants[k], lagWant{gi, pi, off})
		}
	}
	return wants, from
}

// readLagStamps reads records from the smallest wanted offset of each partition
// until every group's offset on it is covered, or timeout passes, and returns per
// wanted offset the timestamp of the first record at or after it.
func readLagStamps(ctx context.Context, cl *kgo.Client, wants map[tp][]lagWant, from map[tp]int64, timeout time.Duration) (map[tp]map[int64]time.Time, error) {
	remaining := map[tp]map[int64]bool{}
	for k, ws := range wants {
		offs := map[int64]bool{}
		for _, w := range ws {
			offs[w.off] = true
		}
		remaining[k] = offs
	}
	assign := map[string]map[int32]kgo.Offset{}
	for k, off := range from {
		if assign[k.topic] == nil {
			assign[k.topic] = map[int32]kgo.Offset{}
		}
		assign[k.topic][k.partition] = kgo.NewOffset().At(off)
	}
	opts := connectionOpts(cl.Opts())
	opts = append(opts,
		kgo.ConsumePartitions(assign),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.FetchMaxPartitionBytes(64<<10),
	)
	rd, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the record-timestamp reader: %w", err)
	}
	defer rd.Close()

	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stamps := map[tp]map[int64]time.Time{} // wanted offset -> timestamp of first record at or after it
	for len(remaining) > 0 {
		fs := rd.PollRecords(fctx, 1000)
		if fctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			for off := range remaining[k] {
				if r.Offset >= off {
					if stamps[k] == nil {
						stamps[k] = map[int64]time.Time{}
					}
					stamps[k][off] = r.Timestamp
					delete(remaining[k], off)
				}
			}
			if len(remaining[k]) == 0 {
				delete(remaining, k)
				rd.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			}
		})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading record timestamps: %w", err)
	}
	return stamps, nil
}

// ConnectionOpts keeps the options of a client that are about connecting (brokers,
// TLS, SASL, client id, dialer, logger) and drops producer, consumer and group
// options: the options of an admin-only client made from a stage's client options.
func ConnectionOpts(opts []kgo.Opt) []kgo.Opt { return connectionOpts(opts) }

func connectionOpts(opts []kgo.Opt) []kgo.Opt {
	out := make([]kgo.Opt, 0, len(opts))
	for _, o := range opts {
		switch o.(type) {
		case kgo.ProducerOpt, kgo.ConsumerOpt, kgo.GroupOpt:
			continue
		}
		out = append(out, o)
	}
	return out
}

// Status is a Burrow-style consumer health verdict.
type Status int

// Statuses, from best to worst. A group's status is its worst partition's.
const (
	StatusOK    Status = iota // caught up, or lag not growing and recent
	StatusWarn                // lag growing across the window, or oldest unconsumed record older than WarnAfter
	StatusStall               // members present, lag > 0, committed offset has not moved for StallAfter
	StatusStop                // no members while records wait
	StatusErr                 // lag could not be determined
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "OK"
	case StatusWarn:
		return "WARN"
	case StatusStall:
		return "STALL"
	case StatusStop:
		return "STOP"
	case StatusErr:
		return "ERR"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Defaults of EvaluatorOptions.
const (
	DefaultStatusWindow = 10
	DefaultWarnAfter    = 2 * time.Minute
	DefaultStallAfter   = 5 * time.Minute
)

// EvaluatorOptions configures an Evaluator. Zero values mean the defaults.
type EvaluatorOptions struct {
	// Window is how many samples per partition are kept. Default 10, minimum 2.
	Window int
	// WarnAfter: a partition whose oldest unconsumed record is at least this old is
	// WARN. Default 2 min.
	WarnAfter time.Duration
	// StallAfter: a partition with members, lag, and the same committed offset for at
	// least this long is STALL. Default 5 min.
	StallAfter time.Duration
}

// GroupStatus is the verdict on one group.
type GroupStatus struct {
	Group  string
	Status Status
	// Partitions holds the status of every partition of the latest sample, in the
	// order of GroupLag.Partitions.
	Partitions []Status
	// TotalLag is the latest sample's total lag in offsets.
	TotalLag int64
	// MaxLagTime is the largest known LagTime of the latest sample.
	MaxLagTime time.Duration
}

// Evaluator turns successive Lag samples into Burrow-style statuses. It keeps a short
// window of samples per group and partition. It is not safe for concurrent use: one
// loop (the exporter's or the CLI's) owns it.
//
// Rules, for each partition of the latest sample, first match wins:
//
//	ERR   the group or the partition has an error.
//	STOP  lag > 0 and the group has no members (Empty or Dead): nothing consumes
//	      while records wait. (Burrow: offsets stopped being committed.)
//	STALL lag > 0, the group has members, and the committed offset has been the
//	      same in every sample over at least StallAfter: members are there but the
//	      partition does not advance. Needs two samples StallAfter apart.
//	WARN  lag > 0 and either the lag grew between every two consecutive samples of
//	      a window of at least 3 (falling behind), or the oldest unconsumed record
//	      is older than WarnAfter (behind by that much time right now).
//	OK    otherwise, including lag > 0 that is shrinking or recent.
//
// With a single sample only ERR, STOP, WARN-by-age and OK can be decided; a fresh
// replay (a new processor version reading from the start) shows WARN by age until it
// catches up, which is accurate: it is behind.
type Evaluator struct {
	o    EvaluatorOptions
	hist map[histKey][]sample
}

type histKey struct {
	group, topic string
	partition    int32
}

type sample struct {
	at        time.Time
	committed int64
	lag       int64
}

// NewEvaluator validates o and returns an Evaluator.
func NewEvaluator(o EvaluatorOptions) (*Evaluator, error) {
	o.Window = cmp.Or(o.Window, DefaultStatusWindow)
	o.WarnAfter = cmp.Or(o.WarnAfter, DefaultWarnAfter)
	o.StallAfter = cmp.Or(o.StallAfter, DefaultStallAfter)
	if o.Window < 2 || o.WarnAfter < 0 || o.StallAfter < 0 {
		return nil, invalid("evaluator: window %d (>= 2), warn after %s, stall after %s (>= 0)", o.Window, o.WarnAfter, o.StallAfter)
	}
	return &Evaluator{o: o, hist: map[histKey][]sample{}}, nil
}

// Retain forgets the history of every group not in groups: one that was deleted, or
// left the set being evaluated.
func (e *Evaluator) Retain(groups []string) {
	for k := range e.hist {
		if !slices.Contains(groups, k.group) {
			delete(e.hist, k)
		}
	}
}

// Observe records the groups' lag sampled at time at and returns their statuses, in
// the order of groups. Partitions absent from a group's sample are forgotten.
func (e *Evaluator) Observe(at time.Time, groups []GroupLag) []GroupStatus {
	out := make([]GroupStatus, 0, len(groups))
	for _, g := range groups {
		gs := GroupStatus{Group: g.Group, TotalLag: g.TotalLag(), Partitions: make([]Status, len(g.Partitions))}
		live := map[histKey]bool{}
		for i, p := range g.Partitions {
			k := histKey{g.Group, p.Topic, p.Partition}
			live[k] = true
			h := e.hist[k]
			if p.Err == nil {
				h = append(h, sample{at: at, committed: p.Committed, lag: p.Lag})
				if len(h) > e.o.Window {
					h = h[len(h)-e.o.Window:]
				}
				e.hist[k] = h
			}
			s := e.partitionStatus(g, p, h)
			gs.Partitions[i] = s
			if s > gs.Status {
				gs.Status = s
			}
			if p.LagTime > gs.MaxLagTime {
				gs.MaxLagTime = p.LagTime
			}
		}
		for k := range e.hist {
			if k.group == g.Group && !live[k] {
				delete(e.hist, k)
			}
		}
		if g.Err != nil {
			gs.Status = StatusErr
		}
		out = append(out, gs)
	}
	return out
}

func (e *Evaluator) partitionStatus(g GroupLag, p PartitionLag, h []sample) Status {
	switch {
	case g.Err != nil || p.Err != nil:
		return StatusErr
	case p.Lag <= 0:
		return StatusOK
	case g.Members == 0:
		return StatusStop
	}
	if len(h) >= 2 {
		first, last := h[0], h[len(h)-1]
		same := true
		for _, s := range h[1:] {
			if s.committed != first.committed {
				same = false
				break
			}
		}
		if same && last.at.Sub(first.at) >= e.o.StallAfter {
			return StatusStall
		}
	}
	if len(h) >= 3 {
		growing := true
		for i := 1; i < len(h); i++ {
			if h[i].lag <= h[i-1].lag {
				growing = false
				break
			}
		}
		if growing {
			return StatusWarn
		}
	}
	if p.LagTime >= e.o.WarnAfter {
		return StatusWarn
	}
	return StatusOK
}
