package synthesis

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

func withText(s string) func(*synth.Message) { return func(m *synth.Message) { m.Text = s } }

func TestTakePrimary(t *testing.T) {
	small := synth.EstimateMessageTokens(msg(1, 0)) // one short message
	big := synth.EstimateMessageTokens(msg(1, 0, withText(strings.Repeat("码", 500))))
	msgs := func(n int, opts ...func(*synth.Message)) []synth.Message {
		var out []synth.Message
		for i := range n {
			out = append(out, msg(int64(i+1), i, opts...))
		}
		return out
	}
	for _, tc := range []struct {
		name             string
		in               []synth.Message
		limit, budget    int
		reserved         int
		wantN, wantToken int
	}{
		{name: "count limit", in: msgs(100), limit: 40, budget: 1 << 20, wantN: 40, wantToken: 40 * small},
		{name: "fewer than the limit", in: msgs(7), limit: 40, budget: 1 << 20, wantN: 7, wantToken: 7 * small},
		{name: "token budget", in: msgs(10), limit: 40, budget: 3*small + small/2, wantN: 3, wantToken: 3 * small},
		{name: "reserved tokens count", in: msgs(10), limit: 40, budget: 3 * small, reserved: small, wantN: 2, wantToken: 2 * small},
		{name: "one message over budget still forms a chunk", in: msgs(3, withText(strings.Repeat("码", 500))),
			limit: 40, budget: big / 2, wantN: 1, wantToken: big},
		{name: "CJK text costs one token a rune", in: msgs(5, withText(strings.Repeat("码", 500))),
			limit: 40, budget: 2*big + 1, wantN: 2, wantToken: 2 * big},
		{name: "nothing", in: nil, limit: 40, budget: 100, wantN: 0, wantToken: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, tokens := takePrimary(tc.in, tc.limit, tc.budget, tc.reserved)
			if n != tc.wantN || tokens != tc.wantToken {
				t.Fatalf("takePrimary = (%d, %d), want (%d, %d)", n, tokens, tc.wantN, tc.wantToken)
			}
		})
	}
}

func TestPickContext(t *testing.T) {
	one := synth.EstimateMessageTokens(msg(1, 0))
	cands := []synth.Message{msg(1, -10), msg(2, -20), msg(1, -10), msg(3, -30, withText(strings.Repeat("x", 4000))), msg(4, -40), msg(5, -50)}
	for _, tc := range []struct {
		name    string
		exclude []int64
		budget  int
		maxN    int
		want    []int64
	}{
		{name: "priority order, duplicates once", budget: 1 << 20, maxN: 10, want: []int64{1, 2, 3, 4, 5}},
		{name: "primary evidence is never context", exclude: []int64{2, 4}, budget: 1 << 20, maxN: 10, want: []int64{1, 3, 5}},
		{name: "a large one that does not fit is skipped, later ones still fit", budget: 4 * one, maxN: 10, want: []int64{1, 2, 4, 5}},
		{name: "count bound", budget: 1 << 20, maxN: 2, want: []int64{1, 2}},
		{name: "no budget", budget: 0, maxN: 10, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := map[int64]struct{}{}
			for _, id := range tc.exclude {
				ex[id] = struct{}{}
			}
			got, tokens := pickContext(cands, ex, tc.budget, tc.maxN)
			var idsGot []int64
			sum := 0
			for _, m := range got {
				if !m.Context {
					t.Fatalf("evidence %d not marked context", m.EvidenceID)
				}
				idsGot = append(idsGot, m.EvidenceID)
				sum += synth.EstimateMessageTokens(m)
			}
			if !slices.Equal(idsGot, tc.want) {
				t.Fatalf("context = %v, want %v", idsGot, tc.want)
			}
			if sum != tokens || tokens > tc.budget {
				t.Fatalf("tokens = %d (sum %d, budget %d)", tokens, sum, tc.budget)
			}
			if cands[0].Context {
				t.Fatal("the candidates were modified")
			}
		})
	}
}

func TestPickExisting(t *testing.T) {
	var es []synth.ExistingEntry
	for i := range 10 {
		es = append(es, synth.ExistingEntry{Kind: synth.KindFinding, Title: strings.Repeat("t", 40), OccurredAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	per := synth.EstimateEntryTokens(es[0])
	got, tokens := pickExisting(es, 3*per, 5)
	if len(got) != 3 || tokens != 3*per {
		t.Fatalf("got %d entries, %d tokens; want 3, %d", len(got), tokens, 3*per)
	}
	if !got[0].OccurredAt.Equal(es[7].OccurredAt) || !got[2].OccurredAt.Equal(es[9].OccurredAt) {
		t.Fatalf("not the newest in time order: %v .. %v", got[0].OccurredAt, got[2].OccurredAt)
	}
	if got, _ := pickExisting(es, 1<<20, 2); len(got) != 2 {
		t.Fatalf("count bound: got %d", len(got))
	}
}

func TestRecentRelated(t *testing.T) {
	r := &recent{size: 4}
	r.add([]synth.Message{msg(1, 0, thread("omt_a")), msg(2, 1), msg(3, 2, root(2)), msg(4, 3), msg(5, 4, thread("omt_b"))})
	if len(r.msgs) != 4 || r.msgs[0].EvidenceID != 2 {
		t.Fatalf("ring keeps the last 4: %v", r.msgs)
	}
	for _, tc := range []struct {
		name string
		m    synth.Message
		want []int64
	}{
		{name: "same thread", m: msg(9, 9, thread("omt_b")), want: []int64{5}},
		{name: "thread evicted", m: msg(9, 9, thread("omt_a")), want: nil},
		{name: "root and its other replies, newest first", m: msg(9, 9, root(2)), want: []int64{3, 2}},
		{name: "parent", m: msg(9, 9, parentOf(4)), want: []int64{4}},
		{name: "unrelated", m: msg(9, 9), want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int64
			for _, m := range r.relatedTo([]synth.Message{tc.m}) {
				got = append(got, m.EvidenceID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("related = %v, want %v", got, tc.want)
			}
		})
	}
}
