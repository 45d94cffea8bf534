package windows

import (
	"context"
	"errors"
	"testing"
)

// fakeOffsets is an offsetSource whose answers the test sets; committed answers are
// taken from a queue (the barrier fetches them twice a round), the last one repeating.
type fakeOffsets struct {
	commits     []map[string]map[int32]int64
	end, start  map[string]map[int32]int64
	err         error
	startsAsked int
}

func (f *fakeOffsets) committed(context.Context) (map[string]map[int32]int64, error) {
	if f.err != nil {
		return nil, f.err
	}
	c := f.commits[0]
	if len(f.commits) > 1 {
		f.commits = f.commits[1:]
	}
	return c, nil
}

func (f *fakeOffsets) ends(context.Context, ...string) (map[string]map[int32]int64, error) {
	return f.end, f.err
}

func (f *fakeOffsets) starts(context.Context, ...string) (map[string]map[int32]int64, error) {
	f.startsAsked++
	return f.start, f.err
}

func offs(ev, loop int64) map[string]map[int32]int64 {
	return map[string]map[int32]int64{"ev": {0: ev}, "loop": {0: loop}}
}

func TestInputBarrier(t *testing.T) {
	t.Parallel()
	type round struct {
		now            int64
		end            map[string]map[int32]int64
		commits        []map[string]map[int32]int64 // c1, c2
		wantSafe       int64
		wantAskedStart bool
	}
	for _, tc := range []struct {
		name   string
		start  map[string]map[int32]int64
		rounds []round
	}{
		{"quiet partition is safe at the round that samples it", nil, []round{
			{now: 100, end: offs(10, 7), commits: []map[string]map[int32]int64{offs(10, 7), offs(10, 7)}, wantSafe: 100},
			{now: 200, end: offs(10, 7), commits: []map[string]map[int32]int64{offs(10, 7), offs(10, 7)}, wantSafe: 200},
		}},
		{"evidence not read: held; read but notes not applied: held; applied: the first sample's time", nil, []round{
			{now: 100, end: offs(50, 7), commits: []map[string]map[int32]int64{offs(10, 7), offs(10, 7)}, wantSafe: 0},
			// evidence read to 50 (its notes end the loop at 40), loop applied to 20
			{now: 200, end: offs(60, 40), commits: []map[string]map[int32]int64{offs(50, 20), offs(50, 20)}, wantSafe: 0},
			// the loop applied to 40: the sample of 100 (evidence end 50) passes, not the
			// one of 200 (evidence end 60, not read when its loop end was taken)
			{now: 300, end: offs(60, 45), commits: []map[string]map[int32]int64{offs(55, 40), offs(55, 40)}, wantSafe: 100},
			{now: 400, end: offs(60, 45), commits: []map[string]map[int32]int64{offs(60, 45), offs(60, 45)}, wantSafe: 400},
		}},
		{"loop end is taken after the evidence commit, not before", nil, []round{
			// c1 shows the evidence read; the loop end listed after it is 30; c2 shows the
			// loop applied only to 29: held
			{now: 100, end: offs(10, 30), commits: []map[string]map[int32]int64{offs(10, 0), offs(10, 29)}, wantSafe: 0},
			{now: 200, end: offs(10, 31), commits: []map[string]map[int32]int64{offs(10, 30), offs(10, 30)}, wantSafe: 100},
		}},
		{"nothing committed counts from the log start",
			map[string]map[int32]int64{"ev": {0: 5}, "loop": {0: 0}}, []round{
				{now: 100, end: offs(5, 0), commits: []map[string]map[int32]int64{{}, {}}, wantSafe: 100, wantAskedStart: true},
			}},
		{"nothing committed behind data: held", map[string]map[int32]int64{"ev": {0: 0}, "loop": {0: 0}}, []round{
			{now: 100, end: offs(5, 0), commits: []map[string]map[int32]int64{{}, {}}, wantSafe: 0, wantAskedStart: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeOffsets{start: tc.start}
			b := newInputBarrier(src, "ev", "loop")
			for i, r := range tc.rounds {
				src.end, src.commits, src.startsAsked = r.end, r.commits, 0
				safe, err := b.advance(context.Background(), r.now)
				if err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				if safe[0] != r.wantSafe || (src.startsAsked > 0) != r.wantAskedStart {
					t.Fatalf("round %d at %d: safe %d (start offsets asked %d times), want %d", i, r.now, safe[0], src.startsAsked, r.wantSafe)
				}
			}
		})
	}
}

func TestInputBarrierKeepsSafeTimesOnErrorsAndBoundsSamples(t *testing.T) {
	t.Parallel()
	src := &fakeOffsets{end: offs(10, 5), commits: []map[string]map[int32]int64{offs(10, 5)}}
	b := newInputBarrier(src, "ev", "loop")
	if safe, err := b.advance(context.Background(), 100); err != nil || safe[0] != 100 {
		t.Fatalf("safe %v, err %v", safe, err)
	}
	src.err = errors.New("broker down")
	if safe, err := b.advance(context.Background(), 200); err == nil || safe[0] != 100 {
		t.Fatalf("on an error: safe %v (want the last, 100), err %v", safe, err)
	}
	// a partition that never catches up keeps at most maxBarrierSamples samples
	src.err = nil
	src.commits = []map[string]map[int32]int64{offs(0, 0)}
	for i := range 3 * maxBarrierSamples {
		src.end = offs(int64(20+i), 5)
		if _, err := b.advance(context.Background(), int64(300+i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.parts[0].pending); n != maxBarrierSamples {
		t.Fatalf("%d samples waiting, want the bound %d", n, maxBarrierSamples)
	}
	// replacing the newest sample only delays: catching up to the last end passes it
	src.commits = []map[string]map[int32]int64{offs(int64(20+3*maxBarrierSamples-1), 5)}
	safe, err := b.advance(context.Background(), 1000)
	if err != nil || safe[0] != 1000 {
		t.Fatalf("after catching up: safe %v, err %v", safe, err)
	}
}

func TestDecideWaitsForTheInputBarrier(t *testing.T) {
	t.Parallel()
	m := machine{length: 600_000, grace: 180_000, retention: 72 * 3600_000, reemitAfter: 60_000}
	c := &chatValue{Open: []window{{Start: 0, Status: statusOpen, Versions: 1}, {Start: 600_000, Status: statusOpen, Versions: 1}}}
	for _, tc := range []struct {
		name      string
		now, safe int64
		closes    int
		held      int
	}{
		{"both due, input read past both", 2_000_000, 2_000_000, 2, 0},
		{"both due, input read past the first only", 2_000_000, 1_000_000, 1, 1},
		{"both due, input read past neither", 2_000_000, 779_999, 0, 2},
		{"not due on the wall clock", 700_000, 2_000_000, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(m.decide(c, tc.now, tc.safe)); got != tc.closes {
				t.Fatalf("%d close decisions, want %d", got, tc.closes)
			}
			if got := m.inputHeld(c, tc.now, tc.safe); got != tc.held {
				t.Fatalf("%d windows held by the input barrier, want %d", got, tc.held)
			}
		})
	}
}
