package windows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// The input barrier (D23): a processor behind its input (down, replaying, under a
// burst) closes every window with all the evidence that was in its partition when
// the window's end + grace passed.

// backlog describes the records of one case: n on-time eligible versions of window
// start for each of chats chats, with ahead ineligible records of other chats in
// front of them and among more of them after every round (never opening a window,
// only taking the processor time to read).
type backlog struct {
	chats, n, ahead, among int
	start                  time.Time
	window                 time.Duration
}

// stopped is a case whose processor took in the first round of every window and
// was stopped before the rest was produced.
type stopped struct {
	backlog
	c       *cluster
	version string
	offsets map[ids.ChatID][]int64
}

// downtime runs a processor with clock while the first round of the case is
// produced, until every window holds it, stops it and produces the other rounds.
func downtime(t *testing.T, c *cluster, b backlog, clock func() time.Time, mutate func(*Options)) stopped {
	t.Helper()
	opts := func(o *Options) {
		o.Clock = clock
		if mutate != nil {
			mutate(o)
		}
	}
	version := uniqueVersion(t)
	a := c.start(version, testenv.NewClock(time.Time{}), opts)
	offsets := b.produceRounds(c, 0, 1)
	for ch := range offsets {
		waitFor(t, "the window of "+string(ch), windowHolds(a.p, ids.ChatKey(ws, ch), b.start, 1))
	}
	a.stop()
	for ch, o := range b.produceRounds(c, 1, b.n) {
		offsets[ch] = append(offsets[ch], o...)
	}
	return stopped{backlog: b, c: c, version: version, offsets: offsets}
}

// restart starts the processor again and checks the windows it closes.
func (s stopped) restart(clock func() time.Time, mutate func(*Options)) {
	s.c.t.Helper()
	inst := s.c.start(s.version, testenv.NewClock(time.Time{}), func(o *Options) {
		o.Clock = clock
		if mutate != nil {
			mutate(o)
		}
	})
	s.check(s.c, inst, s.offsets)
}

// produce writes the case's records and returns the offsets of each chat's on-time
// versions.
func (b backlog) produce(c *cluster) map[ids.ChatID][]int64 {
	c.t.Helper()
	return b.produceRounds(c, 0, b.n)
}

// produceRounds writes rounds [from, to) of the case's records (the ahead ones with
// round 0) and returns the offsets of each chat's on-time versions among them.
func (b backlog) produceRounds(c *cluster, from, to int) map[ids.ChatID][]int64 {
	c.t.Helper()
	var krs []*kgo.Record
	noise := from * (b.ahead + b.among)
	add := func(r schemas.EvidenceRecord) {
		v, err := c.codecs.Evidence.Encode(context.Background(), r)
		if err != nil {
			c.t.Fatal(err)
		}
		krs = append(krs, &kgo.Record{Topic: c.evidence, Key: []byte(r.Key()), Value: v})
	}
	addNoise := func(k int) {
		for range k {
			ch := ids.ChatID(fmt.Sprintf("oc_noise%03d", noise%97))
			r := chatRecord(ws, ch, fmt.Sprintf("om_noise%07d", noise), b.start.Add(time.Second), "noise")
			r.SynthesisEligible = false // opens no window
			add(r)
			noise++
		}
	}
	if from == 0 {
		addNoise(b.ahead)
	}
	for i := from; i < to; i++ {
		at := b.start.Add(time.Duration(i+1) * b.window / time.Duration(b.n+2))
		for k := range b.chats {
			ch := ids.ChatID(fmt.Sprintf("oc_target%02d", k))
			add(chatRecord(ws, ch, fmt.Sprintf("om_t%02d_%04d", k, i), at, fmt.Sprintf("t%d-%d", k, i)))
		}
		addNoise(b.among)
	}
	res := testkafka.Produce(c.t, c.producer, krs...)
	offsets := map[ids.ChatID][]int64{}
	for _, r := range res {
		if w, ch, err := ids.ParseChatKey(chatKeyOf(string(r.Record.Key))); err == nil && w == ws &&
			len(ch) > 9 && ch[:9] == "oc_target" {
			offsets[ch] = append(offsets[ch], r.Record.Offset)
		}
	}
	return offsets
}

// check reads the closed records and requires exactly one per chat with all n
// versions and an offset range covering every one of them.
func (b backlog) check(c *cluster, inst *instance, offsets map[ids.ChatID][]int64) {
	c.t.Helper()
	var got []schemas.ClosedWindow
	for _, r := range c.closedRecordsWhile(b.chats, 3*time.Minute, func() float64 { return evidenceTaken(inst.p) }) {
		got = append(got, r.w)
	}
	byChat := map[ids.ChatID][]schemas.ClosedWindow{}
	for _, w := range got {
		byChat[w.ChatID] = append(byChat[w.ChatID], w)
	}
	var bad []string
	for ch, offs := range offsets {
		lo, hi := offs[0], offs[0]
		for _, o := range offs {
			lo, hi = min(lo, o), max(hi, o)
		}
		ws := byChat[ch]
		switch {
		case len(ws) != 1:
			bad = append(bad, fmt.Sprintf("%s: %d closed records", ch, len(ws)))
		case ws[0].EvidenceCount != b.n || ws[0].EvidenceLowOffset > lo || ws[0].EvidenceEndOffset <= hi ||
			!ws[0].WindowStart.Equal(b.start):
			bad = append(bad, fmt.Sprintf("%s: evidence_count %d of %d, range [%d,%d) for offsets [%d,%d]",
				ch, ws[0].EvidenceCount, b.n, ws[0].EvidenceLowOffset, ws[0].EvidenceEndOffset, lo, hi))
		}
	}
	if len(offsets) != b.chats || len(got) != b.chats || len(bad) > 0 {
		c.t.Fatalf("want one complete window per chat (%d chats, %d versions each), got %d records: %v",
			b.chats, b.n, len(got), bad)
	}
	if late := testutil.ToFloat64(inst.p.m.late.WithLabelValues(outLateEdit)); late != 0 {
		c.t.Fatalf("%v on-time versions counted late_edit", late)
	}
	if testutil.CollectAndCount(inst.p.m.closeInputLag) != 1 {
		c.t.Fatalf("close input lag histogram not exported")
	}
}

// evidenceTaken is how many evidence records p has taken in, whatever their outcome.
func evidenceTaken(p *Processor) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { p.m.evidence.Collect(ch); close(ch) }()
	var n float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err == nil {
			n += d.GetCounter().GetValue()
		}
	}
	return n
}

// The cases read 42k records each; their wait for the closed records lasts as long
// as the processor keeps taking records in, and 3 minutes without a record (its
// start included) is a hang (closedRecordsWhile), so they run in parallel with the
// package's other tests without a deadline the load decides: a fixed 90 s failed
// twice at load average 25-30 (twenty -race runs, issue #30).
func TestIntegrationInputBarrier(t *testing.T) {
	t.Parallel()
	// Enough records, read with production fetch sizes, that the processor is still
	// reading them when the clock passes end + grace.
	burst := backlog{chats: 6, n: 20, ahead: 2000, among: 2000, start: t0, window: 10 * time.Minute}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *cluster)
	}{
		{"down past end+grace, then restarted (injected clock)", func(t *testing.T, c *cluster) {
			clock := testenv.NewClock(t0.Add(time.Minute))
			b := downtime(t, c, burst, clock.Now, nil)
			clock.Set(t0.Add(14 * time.Minute)) // end + grace (13m) passed while down
			b.restart(clock.Now, nil)
		}},
		{"down past end+grace, then restarted (wall clock, 1m window)", func(t *testing.T, c *cluster) {
			b := burst
			// a 1-minute window whose end + grace (5s) is 65 to 125 s from now: the
			// processor opens it, is stopped, every record is produced before its end +
			// grace, and the processor starts again after that passed
			b.start, b.window = time.Now().UTC().Add(time.Minute).Truncate(time.Minute), time.Minute
			geometry := func(o *Options) { o.Window, o.Grace = time.Minute, 5*time.Second }
			d := downtime(t, c, b, time.Now, geometry)
			due := b.start.Add(time.Minute + 5*time.Second)
			if time.Now().After(due) {
				t.Fatalf("the records were produced after the window's end + grace (%s)", due)
			}
			waitForWithin(t, 3*time.Minute, "end + grace on the wall clock", func() bool { return time.Now().After(due) })
			d.restart(time.Now, geometry)
		}},
		{"burst still applied when end+grace passes (injected clock)", func(t *testing.T, c *cluster) {
			b := burst
			clock := testenv.NewClock(t0.Add(time.Minute))
			inst := c.start(uniqueVersion(t), clock, nil)
			offsets := b.produce(c)
			clock.Set(t0.Add(14 * time.Minute)) // while the burst is being read
			b.check(c, inst, offsets)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newCluster(t))
		})
	}
}
