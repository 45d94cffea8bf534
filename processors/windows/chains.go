package windows

import (
	"math/rand/v2"
	"sync"
)

// noteChains links the loop notes one run of the evidence reader sends to a chat
// (D28). A run is the reading of one evidence partition from a start offset on; it
// gets a random id, and every note it sends to a chat names the offset of the note
// it sent that chat before (After, one past it; 0 for the run's first). The chat
// applies a note only when it extends the chain it saw, so a note that overtook a
// failed earlier one in the loop topic is refused, and the run after the failure
// (which reads the partition again from a commit that never passes the failed
// record) sends both again, in order.
//
// Every Goka processor run (a restart after a failure, D27) and every new assignment
// of a rebalance starts new runs (reset): the failed run's notes in flight are lost,
// the record after the commit may be compacted away, so offsets need not go
// backwards, and a partition another member read meanwhile has moved its chats'
// chains to that member's run (D41). Within a session, a partition whose offsets go
// backwards starts a new run too; otherwise no note of it was lost and the chain goes
// on.
type noteChains struct {
	mu     sync.Mutex
	newRun func() uint64
	parts  map[int32]*chainRun
}

// chainRun is one run of one evidence partition.
type chainRun struct {
	id   uint64
	next int64            // one past the last offset read
	last map[string]int64 // chat key -> one past the offset of its last note
}

func newNoteChains(newRun func() uint64) *noteChains {
	if newRun == nil {
		newRun = rand.Uint64
	}
	return &noteChains{newRun: newRun, parts: map[int32]*chainRun{}}
}

// link returns the run id and After of the note for the evidence record at offset
// of partition, sent to chat.
func (n *noteChains) link(partition int32, offset int64, chat string) (run uint64, after int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.parts[partition]
	if r == nil || offset < r.next {
		id := n.newRun()
		for id == 0 || (r != nil && id == r.id) {
			id = n.newRun()
		}
		r = &chainRun{id: id, last: map[string]int64{}}
		n.parts[partition] = r
	}
	r.next = offset + 1
	after = r.last[chat]
	r.last[chat] = offset + 1
	return r.id, after
}

// reset starts new runs for every partition (the next Goka processor run).
func (n *noteChains) reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.parts)
}
