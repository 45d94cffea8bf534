package postgres

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// modelRow is a stored row as the version rule sees it, plus its content and
// observed time (columns the rule does not compare but that a write replaces).
type modelRow struct {
	content, hash string
	rank          schemas.EvidenceRank
	observed      time.Time
}

func (r *modelRow) String() string {
	if r == nil {
		return "absent"
	}
	return fmt.Sprintf("%q@%s deleted=%v observed=%s", r.content, r.rank.SourceUpdatedAt.Format("15:04:05"), r.rank.Deleted, r.observed.Format("15:04:05"))
}

// modelApply applies one version to a stored row the way internal/store's evidence
// version rule does (evidenceVersionRule): a tombstone deletes; a version replaces
// the row when its hash differs and its rank is not lower.
func modelApply(cur *modelRow, v *version) *modelRow {
	if v.tombstone {
		return nil
	}
	next := &modelRow{content: v.row.Content, hash: v.row.ContentHash, rank: storeRank(v), observed: v.row.ObservedAt}
	if cur == nil || next.rank.Replaces(next.hash, cur.rank, cur.hash) {
		return next
	}
	return cur
}

// runPlan plans b and runs its calls against a model table, round by round as
// writeStep does, every call succeeding. It returns the calls of each round.
func runPlan(t *testing.T, b *batch, table map[string]*modelRow, writers int) [][]string {
	t.Helper()
	b.plan(writers)
	var rounds [][]string
	for n := 0; len(b.pending) > 0; n++ {
		if n > 10 {
			t.Fatal("plan does not finish")
		}
		calls := b.pending
		var round []string
		results := make([]callResult, len(calls))
		for i, c := range calls {
			round = append(round, strings.Join(contents(c), ","))
			if c.tombstones {
				for _, v := range c.versions() {
					if table[v.key] != nil {
						results[i].deleted++
					}
					table[v.key] = nil
				}
				continue
			}
			seen := map[string]bool{}
			for _, v := range c.versions() {
				table[v.key] = modelApply(table[v.key], v)
				seen[v.key] = true
				results[i].outcomes = append(results[i].outcomes, store.UpsertOutcome{Result: store.EvidenceUnchanged})
			}
			// Calls of one round run concurrently: a key in two of them would race.
			for _, other := range calls[i+1:] {
				for _, v := range other.versions() {
					if seen[v.key] {
						t.Fatalf("key %s is in two calls of one round", v.key)
					}
				}
			}
		}
		rounds = append(rounds, round)
		if retry, fatal := b.resolve(calls, results); retry != nil || fatal != nil {
			t.Fatal(retry, fatal)
		}
	}
	return rounds
}

// oneByOne applies every version in offset order: the reference.
func oneByOne(table map[string]*modelRow, vs []*version) {
	for _, v := range vs {
		table[v.key] = modelApply(table[v.key], v)
	}
}

// vgen makes versions of message om_p at partition 0, in offset order.
type vgen struct{ off int64 }

func (g *vgen) live(text string, updated time.Time) *version {
	r := evidenceOf(uWS, uChat, "om_p", text, updated)
	return g.of(r)
}

func (g *vgen) recall(updated time.Time) *version {
	return g.of(recalled(evidenceOf(uWS, uChat, "om_p", "", updated), updated))
}

func (g *vgen) tombstone() *version {
	key := ids.EvidenceKey(uWS, uChat, "om_p")
	g.off++
	return &version{rec: &kgo.Record{Offset: g.off}, key: key, ws: uWS, sourceKey: ids.MessageSourceKey(uChat, "om_p"), tombstone: true}
}

func (g *vgen) of(r schemas.EvidenceRecord) *version {
	g.off++
	return &version{rec: &kgo.Record{Offset: g.off}, key: r.Key(), ws: r.WorkspaceID, sourceKey: r.SourceKey, row: evidenceRow(&r)}
}

func rowOf(v *version) *modelRow { return modelApply(nil, v) }

// TestPlanKeepsWhatTheStoreKeepsOneByOne: for every order of versions in a batch
// and every stored row before it, the table ends with exactly the row it would have
// had if every version had been applied alone, in offset order. Ties in rank go to
// the later version (schemas.EvidenceRank.Replaces, the store's >=); tombstones
// act in offset order, not by rank.
func TestPlanKeepsWhatTheStoreKeepsOneByOne(t *testing.T) {
	g := &vgen{}
	orig := g.live("db primary down", t0)
	redelivered := g.live("db primary down", t0) // the webhook's redelivery: same hash and rank
	redeliveredLater := g.live("db primary down", t0)
	redeliveredLater.row.ObservedAt = t0.Add(time.Hour) // same version, another observed_at
	edit := g.live("db primary down; failover", t0.Add(time.Minute))
	sameRank := g.live("db primary down (typo fixed)", t0) // a different version of equal rank
	recall := g.recall(t0.Add(2 * time.Minute))
	tomb := g.tombstone()

	for _, tc := range []struct {
		name       string
		batch      []*version
		calls      [][]string // per round; "" skips the check
		superseded int
		// want is the row after the batch, per stored row before it; nil entries
		// mean the row is absent.
		want map[string]*modelRow
	}{
		{name: "same rank duplicates", batch: []*version{orig, redelivered},
			calls: [][]string{{"db primary down"}}, superseded: 1,
			want: map[string]*modelRow{"none": rowOf(orig), "orig": rowOf(orig), "edit": rowOf(edit)}},
		{name: "duplicate with another observed time keeps the first", batch: []*version{orig, redeliveredLater},
			calls: [][]string{{"db primary down"}}, superseded: 1,
			want: map[string]*modelRow{"none": rowOf(orig), "orig": rowOf(orig)}},
		{name: "edit before original", batch: []*version{edit, orig},
			calls: [][]string{{"db primary down; failover,db primary down"}},
			want:  map[string]*modelRow{"none": rowOf(edit), "orig": rowOf(edit), "edit": rowOf(edit), "recall": rowOf(recall)}},
		{name: "recall before original", batch: []*version{recall, orig},
			calls: [][]string{{",db primary down"}},
			want:  map[string]*modelRow{"none": rowOf(recall), "orig": rowOf(recall), "edit": rowOf(recall), "recall": rowOf(recall)}},
		{name: "recall before edit", batch: []*version{recall, edit},
			want: map[string]*modelRow{"none": rowOf(recall), "orig": rowOf(recall), "recall": rowOf(recall)}},
		{name: "tombstone after versions", batch: []*version{orig, edit, tomb},
			calls: [][]string{{"delete:chat/oc_unit/message/om_p"}}, superseded: 2,
			want: map[string]*modelRow{"none": nil, "orig": nil, "recall": nil}},
		{name: "tombstone before a version", batch: []*version{recall, tomb, orig},
			calls: [][]string{{"delete:chat/oc_unit/message/om_p"}, {"db primary down"}}, superseded: 1,
			want: map[string]*modelRow{"none": rowOf(orig), "edit": rowOf(orig), "recall": rowOf(orig)}},
		{name: "equal rank: the later arrival wins", batch: []*version{orig, sameRank},
			want: map[string]*modelRow{"none": rowOf(sameRank), "orig": rowOf(sameRank), "edit": rowOf(edit)}},
		{name: "equal rank: the later arrival wins, other order", batch: []*version{sameRank, orig},
			want: map[string]*modelRow{"none": rowOf(orig), "orig": rowOf(orig), "edit": rowOf(edit)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := map[string]*modelRow{"none": nil, "orig": rowOf(orig), "edit": rowOf(edit), "recall": rowOf(recall)}
			for name, before := range stored {
				b := newBatch(nil)
				for _, v := range tc.batch {
					c := *v
					b.add(&c)
				}
				table := map[string]*modelRow{orig.key: before}
				rounds := runPlan(t, b, table, 2)
				ref := map[string]*modelRow{orig.key: before}
				oneByOne(ref, tc.batch)
				if got, want := table[orig.key].String(), ref[orig.key].String(); got != want {
					t.Errorf("stored %s: batch left %s, one by one %s", name, got, want)
				}
				if want, ok := tc.want[name]; ok && table[orig.key].String() != want.String() {
					t.Errorf("stored %s: batch left %s, want %s", name, table[orig.key], want)
				}
				if tc.calls != nil && fmt.Sprint(rounds) != fmt.Sprint(tc.calls) {
					t.Errorf("calls per round %q, want %q", rounds, tc.calls)
				}
				if got := b.outcomes[outcomeSuperseded]; got != tc.superseded {
					t.Errorf("superseded %d, want %d", got, tc.superseded)
				}
			}
		})
	}
}

// TestPlanShuffledBatchesMatchOneByOne draws batches of many keys, each key's
// versions in a random order drawn from a small pool (originals, redeliveries,
// edits, equal-rank versions, recalls at two times, tombstones), over a random stored
// row, and checks that the planned calls leave the table exactly as applying every
// version one by one in offset order does.
func TestPlanShuffledBatchesMatchOneByOne(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for iter := range 300 {
		b := newBatch(nil)
		table, ref := map[string]*modelRow{}, map[string]*modelRow{}
		var all []*version
		off := int64(0)
		for k := range 1 + rng.IntN(12) {
			msg := ids.MessageID(fmt.Sprintf("om_%d", k))
			key := ids.EvidenceKey(uWS, uChat, msg)
			pool := func() *version {
				off++
				rec := &kgo.Record{Offset: off}
				at := t0.Add(time.Duration(rng.IntN(3)) * time.Minute)
				switch rng.IntN(7) {
				case 0:
					return &version{rec: rec, key: key, ws: uWS, sourceKey: ids.MessageSourceKey(uChat, msg), tombstone: true}
				case 1:
					r := recalled(evidenceOf(uWS, uChat, msg, "", at), at.Add(time.Minute))
					return &version{rec: rec, key: key, ws: uWS, sourceKey: r.SourceKey, row: evidenceRow(&r)}
				default:
					r := evidenceOf(uWS, uChat, msg, []string{"a", "b", "c"}[rng.IntN(3)], at)
					r.ObservedAt = t0.Add(time.Duration(rng.IntN(1000)) * time.Second)
					return &version{rec: rec, key: key, ws: uWS, sourceKey: r.SourceKey, row: evidenceRow(&r)}
				}
			}
			if v := pool(); !v.tombstone && rng.IntN(3) > 0 {
				table[key], ref[key] = rowOf(v), rowOf(v)
			}
			for range 1 + rng.IntN(6) {
				all = append(all, pool())
			}
		}
		// Keys interleave in the batch; each key's versions keep their offset order.
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		byKey := map[string][]*version{}
		for _, v := range all {
			byKey[v.key] = append(byKey[v.key], v)
		}
		for _, vs := range byKey {
			slices.SortFunc(vs, func(a, b *version) int { return int(a.rec.Offset - b.rec.Offset) })
		}
		var ordered []*version
		next := map[string]int{}
		for _, v := range all {
			ordered = append(ordered, byKey[v.key][next[v.key]])
			next[v.key]++
		}
		for _, v := range ordered {
			b.add(v)
		}
		runPlan(t, b, table, 1+rng.IntN(4))
		oneByOne(ref, ordered)
		for key := range byKey {
			if table[key].String() != ref[key].String() {
				var seq []string
				for _, v := range byKey[key] {
					seq = append(seq, fmt.Sprintf("%v", rowOf(v)))
				}
				t.Fatalf("iteration %d, key %s, versions %v: batch left %s, one by one %s", iter, key, seq, table[key], ref[key])
			}
		}
	}
}
