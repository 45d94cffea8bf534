package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Sizes of the histories the suite produces.
const (
	// entities is how many entities one history holds.
	entities = 12
	// maxVersions caps Stage.Versions.
	maxVersions = 3
	// maxDiffLines bounds the lines of a diff printed in a failure.
	maxDiffLines = 20
)

// Run runs the three properties as subtests redelivery, ordering_per_key and
// restart. Each uses deployments of its own.
func Run(t *testing.T, stage Stage) {
	t.Helper()
	if stage == nil {
		t.Fatal("conformance: Run needs a stage")
	}
	t.Run("redelivery", func(t *testing.T) { redelivery(t, stage) })
	t.Run("ordering_per_key", func(t *testing.T) { orderingPerKey(t, stage) })
	t.Run("restart", func(t *testing.T) { restart(t, stage) })
}

// versions is the number of versions the suite gives an entity of stage.
func versions(t *testing.T, stage Stage) int {
	t.Helper()
	v := stage.Versions()
	if v < 1 {
		t.Fatalf("conformance: the stage declares %d versions per entity; want at least 1", v)
	}
	return min(v, maxVersions)
}

// history is the records of entities first … first+n-1, where entity e has
// 1 + e mod v versions, produced version round by version round: version 1 of
// every entity, then version 2 of those that have one, and so on. Keys interleave,
// each entity's versions stay in order, and the last versions differ across
// neighbouring entities.
func history(first, n, v int) []Record {
	var h []Record
	for version := 1; version <= v; version++ {
		for e := first; e < first+n; e++ {
			if 1+e%v >= version {
				h = append(h, Record{Entity: e, Version: version})
			}
		}
	}
	return h
}

// rounds splits a history made by history into its version rounds.
func rounds(h []Record) [][]Record {
	var out [][]Record
	for _, r := range h {
		if len(out) < r.Version {
			out = append(out, nil)
		}
		out[r.Version-1] = append(out[r.Version-1], r)
	}
	return out
}

// split cuts records into n contiguous parts of nearly equal length.
func split(records []Record, n int) [][]Record {
	out := make([][]Record, n)
	for i := range n {
		out[i] = records[i*len(records)/n : (i+1)*len(records)/n]
	}
	return out
}

// run is one deployment of a stage under test, with the suite's client.
type run struct {
	t      *testing.T
	d      Deployment
	w      Wiring
	c      *client
	stop   func()
	parts  map[int32]bool   // partitions written
	perKey map[string]int   // records written per key
	keyOf  map[int][]string // keys an entity was written under
}

// deploy creates a deployment and checks its adapter against history h.
func deploy(t *testing.T, stage Stage, h []Record) *run {
	t.Helper()
	began := time.Now()
	d := stage.Deploy(t)
	t.Logf("deploy: %s", time.Since(began).Round(time.Millisecond))
	if d == nil {
		t.Fatal("conformance: Deploy returned no deployment")
	}
	w := d.Wiring()
	if w.Input == "" || w.Group == "" {
		t.Fatalf("conformance: wiring %+v needs an input topic and a group", w)
	}
	if problems := expectProblems(d.Expect, h); len(problems) > 0 {
		t.Fatalf("conformance: the adapter's Expect could not fail a broken stage:\n  %s", strings.Join(problems, "\n  "))
	}
	return &run{t: t, d: d, w: w, c: newClient(t), parts: map[int32]bool{}, perKey: map[string]int{}, keyOf: map[int][]string{}}
}

func (r *run) start() {
	r.t.Helper()
	defer r.step("start")()
	if r.stop != nil {
		r.t.Fatal("conformance: an instance is already running")
	}
	r.stop = r.d.Start(r.t)
	if r.stop == nil {
		r.t.Fatal("conformance: Start returned no stop function")
	}
}

func (r *run) halt() {
	r.t.Helper()
	defer r.step("stop")()
	stop := r.stop
	r.stop = nil
	stop()
}

// produce writes records to the input topic, in order.
func (r *run) produce(records ...Record) {
	r.t.Helper()
	msgs := make([]Message, len(records))
	for i, rec := range records {
		msgs[i] = r.d.Message(r.t, rec)
		if msgs[i].Key == "" {
			r.t.Fatalf("conformance: Message(%v) has no key; every larkline record is keyed", rec)
		}
		if !slices.Contains(r.keyOf[rec.Entity], msgs[i].Key) {
			r.keyOf[rec.Entity] = append(r.keyOf[rec.Entity], msgs[i].Key)
		}
	}
	for _, kr := range r.c.produce(r.t, r.w.Input, msgs) {
		r.parts[kr.Partition] = true
		r.perKey[string(kr.Key)]++
	}
}

// committed is the sum of the group's committed offsets on the input topic.
func (r *run) committed() int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	n, err := r.c.committed(ctx, r.w.Group, r.w.Input)
	if err != nil {
		r.t.Fatalf("conformance: %v", err)
	}
	return n
}

// caughtUp waits until the group committed everything produced so far.
func (r *run) caughtUp() {
	r.t.Helper()
	r.c.caughtUp(r.t, r.w.Group, r.w.topics())
}

// observe waits until the group caught up and returns the effect.
func (r *run) observe() Observation {
	r.t.Helper()
	done := r.step("caught up")
	r.caughtUp()
	done()
	defer r.step("observe")()
	return r.d.Observe(r.t)
}

// step logs how long a step of the property took, for -v runs.
func (r *run) step(name string) func() {
	began := time.Now()
	return func() { r.t.Logf("%s: %s", name, time.Since(began).Round(time.Millisecond)) }
}

// Names of what an observation is compared with.
const (
	vsExpect = "Expect (each record once, in order)"
	vsOnce   = "the effect of a single delivery"
)

// compare fails the test when got differs from want, listing the difference.
func compare(t *testing.T, step string, got, want Observation, wantName string) {
	t.Helper()
	missing, extra := got.Diff(want)
	if len(missing) == 0 && len(extra) == 0 {
		return
	}
	t.Errorf("%s: the effect differs from %s\nmissing (%d):%s\nextra (%d):%s",
		step, wantName, len(missing), lines(missing), len(extra), lines(extra))
}

func lines(ls []string) string {
	var b strings.Builder
	for i, l := range ls {
		if i == maxDiffLines {
			fmt.Fprintf(&b, "\n  … and %d more", len(ls)-i)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(l)
	}
	return b.String()
}

// twice returns records with every record repeated right after itself.
func twice(records []Record) []Record {
	out := make([]Record, 0, 2*len(records))
	for _, r := range records {
		out = append(out, r, r)
	}
	return out
}

// redelivery: the effect of records delivered twice, and replayed from the start
// by a new instance after the group's offsets were rewound, is the effect of
// records delivered once.
func redelivery(t *testing.T, stage Stage) {
	h := history(0, entities, versions(t, stage))

	once := deploy(t, stage, h)
	once.start()
	once.produce(h...)
	reference := once.observe()
	once.halt()
	compare(t, "delivered once", reference, once.d.Expect(h), vsExpect)

	dup := deploy(t, stage, h)
	dup.start()
	dup.produce(twice(h)...)
	dup.produce(h...)
	compare(t, "every record delivered twice in a row, then the whole history again", dup.observe(), reference, vsOnce)
	dup.halt()

	dup.c.rewind(t, dup.w.Group, dup.w.Input)
	dup.start()
	compare(t, "the group rewound to the start and everything replayed by a new instance", dup.observe(), reference, vsOnce)
	dup.halt()
}

// orderingPerKey: several versions of a key, produced in order, leave the last
// version's effect, within one poll and across polls, over several partitions,
// without cross-talk between keys.
func orderingPerKey(t *testing.T, stage Stage) {
	v := versions(t, stage)
	backlog := history(0, entities, v)
	live := history(entities, entities, v)
	all := append(slices.Clone(backlog), live...)

	r := deploy(t, stage, all)
	if n := r.c.partitions(t, r.w.Input); n < 2 {
		t.Fatalf("conformance: input topic %s has %d partition; ordering per key needs several", r.w.Input, n)
	}
	r.produce(backlog...) // before the stage runs: a key's versions arrive in one poll
	r.start()
	for _, round := range rounds(live) { // while it runs: versions across polls
		r.produce(round...)
	}
	compare(t, "versions of each key produced in order", r.observe(), r.d.Expect(all), vsExpect)
	r.halt()

	if len(r.parts) < 2 {
		t.Errorf("conformance: every record went to one partition (%v); the adapter's keys must spread over partitions", r.parts)
	}
	shared := false
	for _, n := range r.perKey {
		shared = shared || n > 1
	}
	if !shared {
		t.Errorf("conformance: no key carried more than one record, so nothing was ordered; " +
			"give an entity's versions (or, with one version, several entities) one key")
	}
	for e, keys := range r.keyOf {
		if len(keys) > 1 {
			t.Errorf("conformance: entity %d was written under keys %v; a key must not change between versions", e, keys)
		}
	}
}

// restart: instances stopped between records and in the middle of consuming them
// (once they made progress, without waiting for the rest), with records produced
// while none runs, lose nothing and duplicate nothing.
func restart(t *testing.T, stage Stage) {
	h := history(0, entities, versions(t, stage))
	parts := split(h, 4)

	r := deploy(t, stage, h)
	r.start()
	r.produce(parts[0]...)
	r.caughtUp()
	r.halt() // stopped after the first part was consumed

	r.produce(parts[1]...) // produced while no instance runs

	r.start()
	from := r.committed()
	r.produce(parts[2]...)
	r.c.progressed(t, r.w.Group, r.w.Input, from)
	r.halt() // stopped once it made progress, without waiting for the rest: mid-stream

	r.start()
	r.produce(parts[3]...)
	compare(t, "after two restarts", r.observe(), r.d.Expect(h), vsExpect)
	r.halt()
}

// expectProblems says why expect, an adapter's Expect, could not tell a correct
// stage from a broken one on history h: it must be deterministic and non-empty,
// show every entity (a lost record shows) and show each entity's last version
// (a stale version shows). It returns nothing when expect is fit.
func expectProblems(expect func([]Record) Observation, h []Record) []string {
	full := expect(slices.Clone(h))
	if len(full) == 0 {
		return []string{fmt.Sprintf("Expect shows nothing for %d records", len(h))}
	}
	var problems []string
	if !expect(slices.Clone(h)).Equal(full) {
		problems = append(problems, "Expect gives different answers for the same records")
	}
	for _, last := range Latest(h) {
		without := slices.DeleteFunc(slices.Clone(h), func(r Record) bool { return r.Entity == last.Entity })
		if expect(without).Equal(full) {
			problems = append(problems, fmt.Sprintf("Expect does not show entity %d: a stage that lost it would pass", last.Entity))
			continue
		}
		if last.Version < 2 {
			continue
		}
		older := withoutLast(h, last)
		if expect(older).Equal(full) {
			problems = append(problems, fmt.Sprintf("Expect does not show version %d of entity %d: a stage that kept version %d would pass",
				last.Version, last.Entity, last.Version-1))
		}
	}
	return problems
}

// withoutLast returns h without the last occurrence of r.
func withoutLast(h []Record, r Record) []Record {
	out := slices.Clone(h)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] == r {
			return slices.Delete(out, i, i+1)
		}
	}
	return out
}
