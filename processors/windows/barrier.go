package windows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The evidence barrier (read-your-writes between the checkpoint topic and the
// evidence topic). Goka reads the two co-partitioned topics independently, so a
// processor lagging on evidence could see a checkpoint before the evidence the
// reconciler produced ahead of it. A checkpoint therefore names one past the
// highest offset of that evidence on the chat's partition
// (schemas.CollectionCheckpoint.EvidenceEndOffset), and its coverage is held
// (chatState.Held) until this processor has processed the evidence partition up to
// there: in this life (evidenceSeen, kept by the evidence callback without any state
// write) or in an earlier one (the group's committed offset, which the watcher reads
// at most once per scan interval, outside the callbacks). A record whose offset is
// below the committed offset was processed, and the loopback it sent to its window
// acknowledged, before the commit. Held coverage is re-checked on every checkpoint and
// at every scan.

// CommittedOffsets reads a consumer group's committed offsets.
type CommittedOffsets interface {
	// CommittedOffsets returns the committed offset (the next offset to consume) of
	// group per partition of topic; partitions without a commit are absent.
	CommittedOffsets(ctx context.Context, group, topic string) (map[int32]int64, error)
}

// KadmCommittedOffsets reads committed offsets through a franz-go admin client.
type KadmCommittedOffsets struct{ Admin *kadm.Client }

// ErrNoAdmin means a KadmCommittedOffsets has no admin client.
var ErrNoAdmin = errors.New("windows: no kafka admin client")

// CommittedOffsets implements CommittedOffsets with one OffsetFetch request.
func (k KadmCommittedOffsets) CommittedOffsets(ctx context.Context, group, topic string) (map[int32]int64, error) {
	if k.Admin == nil {
		return nil, ErrNoAdmin
	}
	resp, err := k.Admin.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %s: %w", group, err)
	}
	out := map[int32]int64{}
	for p, r := range resp[topic] {
		if r.Err == nil && r.At >= 0 {
			out[p] = r.At
		}
	}
	return out, nil
}

// barrier tracks how far each evidence partition is known to be processed.
type barrier struct {
	// seen: partition → one past the highest evidence offset processed in this life
	// (*atomic.Int64). Written by the partition's goroutine, read by its callbacks.
	seen sync.Map

	mu        sync.Mutex
	committed map[int32]int64
	fetchedAt time.Time

	// wanted: a callback found coverage held by a barrier the known offsets do not
	// meet, so the next scan should read the committed offsets.
	wanted atomic.Bool
}

// evidenceSeen records that the evidence record at offset of partition was processed.
func (b *barrier) evidenceSeen(partition int32, offset int64) {
	v, ok := b.seen.Load(partition)
	if !ok {
		v, _ = b.seen.LoadOrStore(partition, new(atomic.Int64))
	}
	c := v.(*atomic.Int64)
	if offset+1 > c.Load() { // only this partition's goroutine writes
		c.Store(offset + 1)
	}
}

// met reports whether every evidence record of partition below end is processed.
func (b *barrier) met(partition int32, end int64) bool {
	if end <= 0 {
		return true
	}
	if v, ok := b.seen.Load(partition); ok && v.(*atomic.Int64).Load() >= end {
		return true
	}
	b.mu.Lock()
	c, ok := b.committed[partition]
	b.mu.Unlock()
	if ok && c >= end {
		return true
	}
	b.wanted.Store(true)
	return false
}

// committedFetchTimeout bounds one read of the committed offsets.
const committedFetchTimeout = 10 * time.Second

// refreshCommitted reads the group's committed evidence offsets when a barrier
// waits for them and the last read is at least interval old.
func (p *Processor) refreshCommitted(ctx context.Context, now time.Time) {
	b := &p.barrier
	if p.opts.CommittedOffsets == nil || !b.wanted.Load() {
		return
	}
	b.mu.Lock()
	recent := !b.fetchedAt.IsZero() && now.Sub(b.fetchedAt) < p.opts.ScanInterval
	b.mu.Unlock()
	if recent {
		return
	}
	b.wanted.Store(false)
	fctx, cancel := context.WithTimeout(ctx, committedFetchTimeout)
	offsets, err := p.opts.CommittedOffsets.CommittedOffsets(fctx, string(GroupName(p.opts.GroupPrefix, p.opts.ProcessorVersion)), p.opts.EvidenceTopic)
	cancel()
	b.mu.Lock()
	b.fetchedAt = now
	if err == nil {
		b.committed = offsets
	}
	b.mu.Unlock()
	if err != nil {
		b.wanted.Store(true)
		p.m.committedFetches.WithLabelValues("error").Inc()
		p.log.Warn("reading committed evidence offsets failed; held coverage waits for the next scan", "err", err)
		return
	}
	p.m.committedFetches.WithLabelValues("ok").Inc()
}
