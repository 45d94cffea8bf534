package synthesis

import "github.com/twmb/franz-go/pkg/kgo"

// topicPartition names one assigned partition.
type topicPartition struct {
	topic     string
	partition int32
}

// partitionTracker follows the records of one assigned partition from poll to commit.
// Records are processed per chat (a lane per record key, in offset order), chats
// concurrently, and finish in any order; the committable offset only ever advances
// over a contiguous prefix of finished records, so a commit never skips a window that
// is not terminal yet. It is guarded by the worker's mutex.
type partitionTracker struct {
	pending []*pendingRecord // polled, not yet passed by a commit mark, in offset order
	lanes   map[string]*lane
	// gone: the partition was revoked or lost; its records are no longer marked, and
	// queued ones are dropped (the next owner reads them from the committed offset).
	gone bool
}

type pendingRecord struct {
	rec  *kgo.Record
	done bool
}

// lane is the queue of one chat's records inside a partition: one runs at a time,
// oldest first, so the windows of a chat are synthesized in order.
type lane struct {
	queue   []*pendingRecord
	running bool
}

func newPartitionTracker() *partitionTracker {
	return &partitionTracker{lanes: make(map[string]*lane)}
}

// add appends a polled record (records of a partition are polled in offset order).
func (t *partitionTracker) add(r *kgo.Record) *pendingRecord {
	p := &pendingRecord{rec: r}
	t.pending = append(t.pending, p)
	return p
}

// finish marks p finished and returns the last record of the finished prefix, which
// it forgets, or nil when the oldest pending record is still unfinished.
func (t *partitionTracker) finish(p *pendingRecord) *kgo.Record {
	p.done = true
	var last *kgo.Record
	i := 0
	for ; i < len(t.pending) && t.pending[i].done; i++ {
		last = t.pending[i].rec
	}
	if i > 0 {
		clear(t.pending[:i])
		t.pending = t.pending[i:]
	}
	return last
}
