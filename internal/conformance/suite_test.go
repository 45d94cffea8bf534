package conformance

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func TestHistory(t *testing.T) {
	tests := []struct {
		name           string
		first, n, v    int
		want           string
		lastVersionsOf map[int]int
	}{
		{name: "one version", first: 0, n: 3, v: 1, want: "e0.v1 e1.v1 e2.v1"},
		{name: "three versions, rounds interleave keys", first: 0, n: 4, v: 3,
			want: "e0.v1 e1.v1 e2.v1 e3.v1 e1.v2 e2.v2 e2.v3"},
		{name: "offset entities", first: 12, n: 3, v: 2, want: "e12.v1 e13.v1 e14.v1 e13.v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := history(tt.first, tt.n, tt.v)
			if got := join(h); got != tt.want {
				t.Fatalf("history(%d, %d, %d) = %s, want %s", tt.first, tt.n, tt.v, got, tt.want)
			}
			var back []Record
			for _, r := range rounds(h) {
				back = append(back, r...)
			}
			if !slices.Equal(back, h) {
				t.Errorf("rounds do not put the history back together: %v", rounds(h))
			}
		})
	}
}

func TestSuiteHistoryShape(t *testing.T) {
	// The properties rely on the shape of the full-size history: several versions of
	// some entities, last versions that differ between neighbours.
	h := history(0, entities, maxVersions)
	last := Latest(h)
	if len(last) != entities {
		t.Fatalf("%d entities, want %d", len(last), entities)
	}
	for i := 1; i < len(last); i++ {
		if last[i].Version == last[i-1].Version {
			t.Errorf("entities %d and %d end at the same version %d", i-1, i, last[i].Version)
		}
	}
	if len(h) != 24 {
		t.Errorf("%d records, want 24", len(h))
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		n, parts int
		want     []int
	}{
		{n: 24, parts: 4, want: []int{6, 6, 6, 6}},
		{n: 10, parts: 4, want: []int{2, 3, 2, 3}},
		{n: 3, parts: 4, want: []int{0, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d in %d", tt.n, tt.parts), func(t *testing.T) {
			h := history(0, tt.n, 1)
			parts := split(h, tt.parts)
			var sizes []int
			var back []Record
			for _, p := range parts {
				sizes = append(sizes, len(p))
				back = append(back, p...)
			}
			if !slices.Equal(sizes, tt.want) {
				t.Errorf("sizes %v, want %v", sizes, tt.want)
			}
			if !slices.Equal(back, h) {
				t.Errorf("parts do not put the records back together")
			}
		})
	}
}

func TestLatest(t *testing.T) {
	tests := []struct {
		name string
		in   []Record
		want string
	}{
		{name: "empty", in: nil, want: ""},
		{name: "last occurrence wins", in: []Record{{2, 1}, {1, 1}, {2, 2}, {1, 2}, {2, 3}}, want: "e1.v2 e2.v3"},
		{name: "ordered by entity", in: []Record{{5, 1}, {0, 1}, {3, 1}}, want: "e0.v1 e3.v1 e5.v1"},
		{name: "a redelivered old version is the last record", in: []Record{{0, 1}, {0, 2}, {0, 1}}, want: "e0.v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := join(Latest(tt.in)); got != tt.want {
				t.Errorf("Latest = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestObservationDiff(t *testing.T) {
	tests := []struct {
		name           string
		got, want      Observation
		missing, extra []string
	}{
		{name: "equal in another order", got: Observation{"b", "a"}, want: Observation{"a", "b"}},
		{name: "both empty", got: nil, want: Observation{}},
		{name: "a duplicate is extra", got: Observation{"a", "a", "b"}, want: Observation{"a", "b"}, extra: []string{"a"}},
		{name: "a lost line is missing", got: Observation{"a"}, want: Observation{"a", "b", "b"}, missing: []string{"b", "b"}},
		{name: "a stale version is both", got: Observation{"e1 v1"}, want: Observation{"e1 v2"},
			missing: []string{"e1 v2"}, extra: []string{"e1 v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			missing, extra := tt.got.Diff(tt.want)
			if !slices.Equal(missing, tt.missing) || !slices.Equal(extra, tt.extra) {
				t.Errorf("Diff = missing %q extra %q, want %q and %q", missing, extra, tt.missing, tt.extra)
			}
			if eq := tt.got.Equal(tt.want); eq != (len(tt.missing)+len(tt.extra) == 0) {
				t.Errorf("Equal = %t", eq)
			}
		})
	}
}

func TestTwice(t *testing.T) {
	if got := join(twice([]Record{{0, 1}, {1, 1}})); got != "e0.v1 e0.v1 e1.v1 e1.v1" {
		t.Errorf("twice = %s", got)
	}
}

// TestExpectProblems: an adapter's Expect that could not fail a broken stage is
// rejected, with the reason.
func TestExpectProblems(t *testing.T) {
	latestLines := func(rs []Record) Observation {
		var o Observation
		for _, r := range Latest(rs) {
			o = append(o, r.String())
		}
		return o
	}
	var calls atomic.Int64
	tests := []struct {
		name   string
		expect func([]Record) Observation
		want   []string // substrings, one per expected problem; none for a fit Expect
	}{
		{name: "last version of each entity", expect: latestLines},
		{name: "every record, also fit", expect: func(rs []Record) Observation {
			var o Observation
			for _, r := range rs {
				o = append(o, r.String())
			}
			return o
		}},
		{name: "nothing", expect: func([]Record) Observation { return nil }, want: []string{"shows nothing"}},
		{name: "a count only", expect: func(rs []Record) Observation {
			return Observation{fmt.Sprint(len(Latest(rs)))}
		}, want: []string{"version 2 of entity 1", "version 3 of entity 2"}},
		{name: "entities only", expect: func(rs []Record) Observation {
			var o Observation
			for _, r := range Latest(rs) {
				o = append(o, fmt.Sprintf("e%d", r.Entity))
			}
			return o
		}, want: []string{"version 2 of entity 1", "version 3 of entity 2"}},
		{name: "one entity missing", expect: func(rs []Record) Observation {
			return latestLines(slices.DeleteFunc(slices.Clone(rs), func(r Record) bool { return r.Entity == 0 }))
		}, want: []string{"does not show entity 0"}},
		{name: "not deterministic", expect: func(rs []Record) Observation {
			return append(latestLines(rs), fmt.Sprint(calls.Add(1)))
		}, want: []string{"different answers"}},
	}
	h := history(0, 3, 3)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := expectProblems(tt.expect, h)
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q does not mention %q", got[i], w)
				}
			}
		})
	}
}

func join(rs []Record) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}
