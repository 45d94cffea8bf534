package ingest

import (
	"testing"
	"time"
)

func TestSeenEvents(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	type step struct {
		op    string // begin, ack, fail
		id    string
		at    time.Duration
		until time.Duration
		want  seenState
	}
	cases := []struct {
		name    string
		max     int
		steps   []step
		evicted int
	}{
		{"a copy of an acknowledged event within its window is a replay", 10, []step{
			{op: "begin", id: "e1", want: seenNew}, {op: "ack", id: "e1", until: 5 * time.Minute},
			{op: "begin", id: "e1", at: 4 * time.Minute, want: seenReplay},
		}, 0},
		{"after the window the id is forgotten", 10, []step{
			{op: "begin", id: "e1", want: seenNew}, {op: "ack", id: "e1", until: 5 * time.Minute},
			{op: "begin", id: "e1", at: 5 * time.Minute, want: seenNew},
		}, 0},
		{"a failed event is processed again when redelivered", 10, []step{
			{op: "begin", id: "e1", want: seenNew}, {op: "fail", id: "e1"},
			{op: "begin", id: "e1", at: time.Second, want: seenNew},
		}, 0},
		{"a concurrent copy of an event in flight is held back", 10, []step{
			{op: "begin", id: "e1", want: seenNew},
			{op: "begin", id: "e1", want: seenInFlight},
		}, 0},
		{"the bound drops the oldest id and counts it", 2, []step{
			{op: "begin", id: "e1", want: seenNew}, {op: "ack", id: "e1", until: time.Hour},
			{op: "begin", id: "e2", want: seenNew}, {op: "ack", id: "e2", until: time.Hour},
			{op: "begin", id: "e3", want: seenNew}, {op: "ack", id: "e3", until: time.Hour},
			{op: "begin", id: "e2", want: seenReplay},
			{op: "begin", id: "e1", want: seenNew},
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evicted := 0
			s := newSeenEvents(tc.max, func() { evicted++ })
			for i, st := range tc.steps {
				switch st.op {
				case "begin":
					if got := s.begin(st.id, t0.Add(st.at)); got != st.want {
						t.Fatalf("step %d: begin(%s) = %v, want %v", i, st.id, got, st.want)
					}
				case "ack":
					s.end(st.id, true, t0.Add(st.until))
				case "fail":
					s.end(st.id, false, time.Time{})
				}
				if s.len() > tc.max {
					t.Fatalf("step %d: %d ids held, bound %d", i, s.len(), tc.max)
				}
			}
			if evicted != tc.evicted {
				t.Fatalf("evicted %d, want %d", evicted, tc.evicted)
			}
		})
	}
}
