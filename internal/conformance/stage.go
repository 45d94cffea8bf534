package conformance

import (
	"fmt"
	"slices"
	"testing"
)

// Stage is one Kafka-facing stage adapted to the suite.
type Stage interface {
	// Versions is how many successive versions of one entity the stage takes, each
	// superseding the one before; the suite uses min(Versions, 3). A stage whose
	// input holds one version per entity (a closed window) returns 1; its adapter
	// should then give several entities the same Kafka key, so that ordering per key
	// still has something to order.
	Versions() int
	// Deploy creates a fresh, isolated deployment of the stage: its own topics,
	// consumer group and database, removed when t ends. Nothing runs yet.
	Deploy(t *testing.T) Deployment
}

// Deployment is one isolated installation of a stage. The suite calls its methods
// from the test goroutine, one at a time.
type Deployment interface {
	// Wiring names the input topic, the consumer group and what the group consumes.
	Wiring() Wiring
	// Start starts a new instance of the stage in the deployment's consumer group
	// and returns; it may wait until the instance is ready. stop stops the instance
	// as a deployment would (cancel, drain, leave the group) and returns once it has
	// stopped, failing t if the instance reported an error. The suite calls stop at
	// most once; the adapter also stops every instance at t's cleanup.
	Start(t *testing.T) (stop func())
	// Message is the Kafka record that carries r: the domain record encoded with
	// the schemas codecs and its key, as the pipeline's producers write it. The
	// mapping must be deterministic: the suite calls Message again for duplicates.
	// The adapter may prepare what the record needs (the synthesis adapter stores
	// the evidence a window names).
	Message(t *testing.T, r Record) Message
	// Observe returns the stage's externally visible effect. The suite calls it while
	// an instance runs, after the group committed every record produced so far and
	// after the last record of the step was produced: an adapter may have to make
	// the effect happen (the window processor's adapter moves its clock past every
	// window and waits for the closed windows).
	Observe(t *testing.T) Observation
	// Expect is what Observe shows once a correct stage received each of records
	// once, in the order given (a key's records are in order).
	Expect(records []Record) Observation
}

// Wiring is how a deployment is connected to Kafka.
type Wiring struct {
	// Input is the topic the suite produces to; redelivery rewinds the group's
	// offsets on it.
	Input string
	// Group is the consumer group every instance of the deployment joins.
	Group string
	// Consumed lists the other topics the group consumes (a Goka processor's loop
	// topic); the suite waits until the group committed them too.
	Consumed []string
}

// topics is every topic the group must have committed before the stage is idle.
func (w Wiring) topics() []string { return append([]string{w.Input}, w.Consumed...) }

// Record is one input record as the suite sees it: version Version of entity
// Entity. An entity is one thing the stage keeps an effect for (an evidence
// message, a workspace, a window).
type Record struct {
	Entity  int // 0, 1, 2, …
	Version int // 1, 2, …; version v+1 supersedes version v
}

// String is a label adapters may embed in ids and content: "e<entity>.v<version>",
// which is valid in every larkline id (letters, digits, '.').
func (r Record) String() string { return fmt.Sprintf("e%d.v%d", r.Entity, r.Version) }

// Message is a Kafka record's key and value.
type Message struct {
	Key   string
	Value []byte
}

// Latest returns the last record of every entity in records (the newest version,
// in the suite's histories), ordered by entity.
func Latest(records []Record) []Record {
	last := map[int]Record{}
	for _, r := range records {
		last[r.Entity] = r
	}
	out := make([]Record, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return a.Entity - b.Entity })
	return out
}

// Observation is a stage's externally visible effect as canonical lines, one per
// row or output record, without the parts that legitimately differ between
// correct runs (surrogate ids, wall-clock stamps, the processor version of a
// deployment). It is a multiset: order does not matter, multiplicity does.
type Observation []string

// Equal reports whether o and p hold the same lines the same number of times.
func (o Observation) Equal(p Observation) bool {
	missing, extra := o.Diff(p)
	return len(missing) == 0 && len(extra) == 0
}

// Diff compares o (what was observed) with want: missing are the lines want holds
// more often than o, extra those o holds more often than want, each sorted.
func (o Observation) Diff(want Observation) (missing, extra []string) {
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range o {
		count[l]--
	}
	for l, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, l)
		}
		for ; n < 0; n++ {
			extra = append(extra, l)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}
