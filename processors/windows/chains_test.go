package windows

import (
	"testing"
)

// TestNoteChains: a note counts only when it extends its run's chain (D28); a note
// that overtook a failed one changes nothing, and the next run sends both again.
func TestNoteChains(t *testing.T) {
	t.Parallel()
	m := machine{length: 600_000, grace: 60_000, retention: 72 * 3600_000}
	at := t0.UnixMilli()
	note := func(run uint64, after, off int64) loopMsg {
		return loopMsg{Op: opNote, Offset: off, Run: run, After: after, Kind: kindEligible, At: at}
	}
	type step struct {
		n        loopMsg
		want     string
		versions int64 // of the window after the step
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{note(1, 0, 3), outOpened, 1}, {note(1, 4, 5), outAdded, 2}}},
		{"redelivered", []step{{note(1, 0, 3), outOpened, 1}, {note(1, 4, 5), outAdded, 2}, {note(1, 0, 3), outDuplicate, 2}, {note(1, 4, 5), outDuplicate, 2}}},
		{"overtook a failed note, the next run sends both", []step{
			{note(1, 0, 3), outOpened, 1},
			{note(1, 6, 7), outOvertaken, 1}, // 5 failed
			{note(1, 8, 9), outOvertaken, 1},
			{note(2, 0, 5), outAdded, 2}, // the restart reads from 5
			{note(2, 6, 7), outAdded, 3},
			{note(2, 8, 9), outAdded, 4},
		}},
		{"a run's first note failed", []step{
			{note(1, 0, 3), outOpened, 1},
			{note(2, 6, 7), outOvertaken, 1}, // run 2's 5 failed
			{note(3, 0, 5), outAdded, 2},
			{note(3, 6, 7), outAdded, 3},
		}},
		{"a restart sends applied notes again", []step{
			{note(1, 0, 3), outOpened, 1},
			{note(1, 4, 5), outAdded, 2},
			{note(2, 0, 3), outDuplicate, 2},
			{note(2, 4, 5), outDuplicate, 2},
			{note(2, 6, 7), outAdded, 3},
		}},
		{"format 4 notes by offset", []step{
			{note(0, 0, 3), outOpened, 1},
			{note(0, 0, 3), outDuplicate, 1},
			{note(1, 0, 5), outAdded, 2},
			{note(0, 0, 4), outDuplicate, 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &chatValue{}
			for i, s := range tc.steps {
				if got, _ := m.note(c, &s.n, at); got != s.want {
					t.Fatalf("step %d %+v: %s, want %s", i, s.n, got, s.want)
				}
				if got := c.Open[0].Versions; got != s.versions {
					t.Fatalf("step %d %+v: %d versions, want %d", i, s.n, got, s.versions)
				}
			}
		})
	}
}

// TestNoteChainLinks: the reader links a chat's notes within a run, and starts a
// new run when a partition's offsets go backwards or on reset.
func TestNoteChainLinks(t *testing.T) {
	t.Parallel()
	var ids uint64
	n := newNoteChains(func() uint64 { ids++; return ids })
	type link struct {
		part  int32
		off   int64
		chat  string
		run   uint64
		after int64
	}
	for i, l := range []link{
		{0, 3, "a", 1, 0},
		{0, 4, "b", 1, 0},
		{0, 5, "a", 1, 4},
		{1, 5, "a", 2, 0}, // another partition, another run
		{0, 9, "a", 1, 6},
		{0, 6, "a", 3, 0}, // read again from 6: a new run
		{0, 7, "b", 3, 0},
		{-1, 0, "", 0, 0}, // reset
		{0, 8, "b", 4, 0},
	} {
		if l.part < 0 {
			n.reset()
			continue
		}
		run, after := n.link(l.part, l.off, l.chat)
		if run != l.run || after != l.after {
			t.Fatalf("link %d %+v: run %d after %d", i, l, run, after)
		}
	}
}

// TestFormat4Values: values of format 4 (before the chains) still decode, with no
// chain, and their notes apply by offset.
func TestFormat4Values(t *testing.T) {
	t.Parallel()
	c, err := decodeChat([]byte{formatV4, tagChat, 84 /* Applied 42 */, 0, 0, 0, 0, 0})
	if err != nil || c.Applied != 42 || c.Run != 0 || c.RunNext != 0 {
		t.Fatalf("format 4 chat value: %+v %v", c, err)
	}
	m, err := decodeLoop([]byte{formatV4, tagLoop, byte(opNote), 14 /* Offset 7 */, byte(kindEligible), 10})
	if err != nil || m.Offset != 7 || m.Run != 0 || m.After != 0 || m.At != 5 {
		t.Fatalf("format 4 note: %+v %v", m, err)
	}
}

// TestNoteChainsAcrossHandover: a partition that goes to another member and comes
// back (two rebalances) loses no note: its chats follow the other member's run
// meanwhile, so the first member's next note there must start a new run (D41). Each
// member resets its chains at every new assignment, as Processor.onRebalance does.
func TestNoteChainsAcrossHandover(t *testing.T) {
	t.Parallel()
	m := machine{length: 600_000, grace: 60_000, retention: 72 * 3600_000}
	at := t0.UnixMilli()
	var ids uint64
	newRun := func() uint64 { ids++; return ids }
	a, b := newNoteChains(newRun), newNoteChains(newRun)
	c := &chatValue{}
	apply := func(member *noteChains, off int64) string {
		run, after := member.link(0, off, "chat")
		n := loopMsg{Op: opNote, Offset: off, Run: run, After: after, Kind: kindEligible, At: at}
		got, _ := m.note(c, &n, at)
		return got
	}
	steps := []struct {
		member    *noteChains
		rebalance bool // a new assignment before this step: every member resets
		off       int64
		want      string
	}{
		{a, false, 3, outOpened},
		{a, false, 4, outAdded},
		{b, true, 5, outAdded}, // partition 0 moves to b, read from a's commit 5
		{b, false, 6, outAdded},
		{a, true, 7, outAdded}, // b is gone: a reads on from b's commit 7
		{a, false, 8, outAdded},
	}
	for i, s := range steps {
		if s.rebalance {
			a.reset()
			b.reset()
		}
		if got := apply(s.member, s.off); got != s.want {
			t.Fatalf("step %d (offset %d): %s, want %s", i, s.off, got, s.want)
		}
	}
	if got := c.Open[0].Versions; got != int64(len(steps)) {
		t.Fatalf("%d versions in the window, want %d", got, len(steps))
	}
}

// TestRebalanceStartsNewRuns: the Goka rebalance callback resets the note chains.
func TestRebalanceStartsNewRuns(t *testing.T) {
	t.Parallel()
	var ids uint64
	p := &Processor{chains: newNoteChains(func() uint64 { ids++; return ids })}
	run1, _ := p.chains.link(0, 3, "chat")
	p.onRebalance(nil)
	run2, after := p.chains.link(0, 4, "chat")
	if run2 == run1 || after != 0 {
		t.Fatalf("after a rebalance: run %d after %d, want a new run (not %d) starting at 0", run2, after, run1)
	}
}
