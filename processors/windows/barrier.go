package windows

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The input barrier is the close rule of docs/decisions.md D23: a window closes only
// once the processor has applied every record that was in its evidence partition when
// the window's end + grace passed. Lag, downtime, restarts and replays change when a
// window closes, never what it takes in.
//
// Per evidence partition it keeps the partition's safe time: a wall-clock instant T
// such that every evidence record that was in the partition at T has had its note
// applied to the group table. A window of a chat on that partition is due only when
// end + grace <= T (and the wall clock and coverage rules of machine.due hold).
//
// The safe time comes from the broker, not from this instance's memory, so it holds
// across restarts, rebalances and instances. Each scan round:
//
//  1. fetches the group's committed offsets (c1), then lists the log-end offsets of
//     the evidence and loop topics;
//  2. records a sample (now, evidence end) per partition: every record in the
//     partition at now is below that end;
//  3. a sample whose evidence end the group has committed (c1) takes the loop
//     topic's end listed after c1: Goka marks an evidence offset only once the
//     record's note is acknowledged on the loop topic, so every note of those
//     records is below that loop end;
//  4. fetches the committed offsets again (c2): a sample whose loop end the group has
//     committed has all its notes applied (Goka marks a loop offset once the
//     callback's table write is acknowledged), and its time becomes the safe time.
//
// A quiet partition passes both stages in the scan that samples it, so its windows
// close on the wall clock (design B6); a lagging one closes its windows once it has
// read what was there when they became due. Notes of an evidence partition go to the
// same loop partition (the chat key hashes like the evidence key: co-partitioned).

// maxBarrierSamples bounds the samples a partition keeps waiting. A sample taken when
// the list is full replaces the newest waiting one (a later time behind a higher
// offset), which only delays a close, never advances it.
const maxBarrierSamples = 16

// offsetSource reads the offsets the barrier needs from the broker.
type offsetSource interface {
	// committed returns the group's committed offsets (the next offset to read) by
	// topic and partition; a partition without a commit is absent.
	committed(ctx context.Context) (map[string]map[int32]int64, error)
	// ends and starts list the log-end and log-start offsets of the topics.
	ends(ctx context.Context, topics ...string) (map[string]map[int32]int64, error)
	starts(ctx context.Context, topics ...string) (map[string]map[int32]int64, error)
}

type barrierSample struct {
	at       int64 // unix ms, the processor's clock when the sample was taken
	evidence int64 // the evidence partition's end listed at or after at
	loop     int64 // the loop partition's end listed after evidence was committed; -1 before
}

type partBarrier struct {
	safe    int64 // unix ms; 0: no sample passed yet
	pending []barrierSample
}

// inputBarrier tracks the safe time of every evidence partition.
type inputBarrier struct {
	src            offsetSource
	evidence, loop string

	mu    sync.Mutex
	parts map[int32]*partBarrier
}

func newInputBarrier(src offsetSource, evidence, loop string) *inputBarrier {
	return &inputBarrier{src: src, evidence: evidence, loop: loop, parts: map[int32]*partBarrier{}}
}

// advance runs one round at now (unix ms) and returns the safe time of every known
// partition. On an error the safe times of the rounds before are returned with it:
// they stay true, they only stop moving.
func (b *inputBarrier) advance(ctx context.Context, now int64) (map[int32]int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.round(ctx, now)
	out := make(map[int32]int64, len(b.parts))
	for p, pb := range b.parts {
		out[p] = pb.safe
	}
	return out, err
}

func (b *inputBarrier) round(ctx context.Context, now int64) error {
	c1, err := b.src.committed(ctx)
	if err != nil {
		return fmt.Errorf("input barrier: fetching committed offsets: %w", err)
	}
	ends, err := b.src.ends(ctx, b.evidence, b.loop)
	if err != nil {
		return fmt.Errorf("input barrier: listing end offsets: %w", err)
	}
	var starts map[string]map[int32]int64
	pos := func(c map[string]map[int32]int64, topic string, p int32) (int64, error) {
		if at, ok := c[topic][p]; ok && at >= 0 {
			return at, nil
		}
		// nothing committed: the group will start at the log start
		if starts == nil {
			s, err := b.src.starts(ctx, b.evidence, b.loop)
			if err != nil {
				return 0, fmt.Errorf("input barrier: listing start offsets: %w", err)
			}
			starts = s
		}
		return starts[topic][p], nil
	}
	for p, end := range ends[b.evidence] {
		pb := b.parts[p]
		if pb == nil {
			pb = &partBarrier{}
			b.parts[p] = pb
		}
		s := barrierSample{at: now, evidence: end, loop: -1}
		if n := len(pb.pending); n >= maxBarrierSamples {
			pb.pending[n-1] = s
		} else {
			pb.pending = append(pb.pending, s)
		}
		read, err := pos(c1, b.evidence, p)
		if err != nil {
			return err
		}
		loopEnd, ok := ends[b.loop][p]
		if !ok {
			continue // no loop partition listed: stage 1 waits
		}
		for i := range pb.pending {
			if pb.pending[i].loop < 0 && read >= pb.pending[i].evidence {
				pb.pending[i].loop = loopEnd
			}
		}
	}
	c2, err := b.src.committed(ctx)
	if err != nil {
		return fmt.Errorf("input barrier: fetching committed offsets: %w", err)
	}
	for p, pb := range b.parts {
		applied, err := pos(c2, b.loop, p)
		if err != nil {
			return err
		}
		k := -1
		for i, s := range pb.pending {
			if s.loop >= 0 && applied >= s.loop {
				k = i
			}
		}
		if k >= 0 {
			pb.safe = max(pb.safe, pb.pending[k].at)
			pb.pending = append(pb.pending[:0], pb.pending[k+1:]...)
		}
	}
	return nil
}

// kadmOffsets is the offsetSource of a running processor.
type kadmOffsets struct {
	adm   *kadm.Client
	group string
}

func (k kadmOffsets) committed(ctx context.Context) (map[string]map[int32]int64, error) {
	resp, err := k.adm.FetchOffsets(ctx, k.group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", k.group, err)
	}
	out := map[string]map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out, nil
}

func (k kadmOffsets) ends(ctx context.Context, topics ...string) (map[string]map[int32]int64, error) {
	l, err := k.adm.ListEndOffsets(ctx, topics...)
	return listed(l, err)
}

func (k kadmOffsets) starts(ctx context.Context, topics ...string) (map[string]map[int32]int64, error) {
	l, err := k.adm.ListStartOffsets(ctx, topics...)
	return listed(l, err)
}

func listed(l kadm.ListedOffsets, err error) (map[string]map[int32]int64, error) {
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, nil
}
