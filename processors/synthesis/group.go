package synthesis

import (
	"cmp"
	"slices"
	"time"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// Group key prefixes. Keys stay inside the process: a model client replaces them.
const (
	groupThread    = "thread:"
	groupConv      = "conv:"
	groupProximity = "prox:"
)

// compareMessages orders messages by (occurred_at, evidence id), the evidence order.
func compareMessages(a, b synth.Message) int {
	if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
		return c
	}
	return cmp.Compare(a.EvidenceID, b.EvidenceID)
}

// groupConversations splits a chunk's messages (primary and read-only context
// together) into conversations using the strongest boundary each message has (design
// §12.2):
//
//  1. the same thread_id;
//  2. the same root_id, or a message and the root that names it;
//  3. a message and its parent (top-level message plus replies);
//  4. otherwise proximity: consecutive messages without any of those links, each
//     within gap of the one before, form one conversation.
//
// Links are transitive (a reply in a thread joins the thread's conversation and its
// parent's). Messages keep their (occurred_at, evidence id) order inside a group, and
// groups are ordered by their first message. Keys are unique: thread:<thread_id>,
// conv:<first message id> or prox:<first message id>. The input is not modified.
func groupConversations(msgs []synth.Message, gap time.Duration) []synth.Group {
	if len(msgs) == 0 {
		return nil
	}
	sorted := slices.Clone(msgs)
	slices.SortStableFunc(sorted, compareMessages)
	roots, members := conversations(sorted, linkMessages(sorted))
	groups := buildGroups(sorted, roots, members, gap)
	slices.SortStableFunc(groups, func(a, b synth.Group) int { return compareMessages(a.Messages[0], b.Messages[0]) })
	return groups
}

// disjointSets is a union-find over message indexes: a set's representative is its
// earliest message.
type disjointSets []int

func newDisjointSets(n int) disjointSets {
	parent := make(disjointSets, n)
	for i := range parent {
		parent[i] = i
	}
	return parent
}

func (parent disjointSets) find(i int) int {
	for parent[i] != i {
		parent[i] = parent[parent[i]]
		i = parent[i]
	}
	return i
}

func (parent disjointSets) union(a, b int) {
	ra, rb := parent.find(a), parent.find(b)
	if ra == rb {
		return
	}
	if rb < ra { // the earlier message is the representative
		ra, rb = rb, ra
	}
	parent[rb] = ra
}

// linkMessages joins the sorted messages linked by the same thread_id, the same
// root_id, a root or a parent (boundaries 1 to 3).
func linkMessages(sorted []synth.Message) disjointSets {
	sets := newDisjointSets(len(sorted))
	first := make(map[string]int, 2*len(sorted))
	link := func(i int, node string) {
		if j, ok := first[node]; ok {
			sets.union(i, j)
			return
		}
		first[node] = i
	}
	for i, m := range sorted {
		link(i, "m:"+string(m.MessageID))
		if m.ThreadID != "" {
			link(i, "t:"+m.ThreadID)
		}
		if m.RootID != "" {
			link(i, "m:"+m.RootID)
		}
		if m.ParentID != "" {
			link(i, "m:"+m.ParentID)
		}
	}
	return sets
}

// conversations lists the sets of the sorted messages: their representatives in order
// of first member, and the members of each, in order.
func conversations(sorted []synth.Message, sets disjointSets) (roots []int, members map[int][]int) {
	members = make(map[int][]int, len(sorted))
	for i := range sorted {
		r := sets.find(i)
		if _, seen := members[r]; !seen {
			roots = append(roots, r)
		}
		members[r] = append(members[r], i)
	}
	return roots, members
}

// buildGroups makes a group of each linked conversation, and joins the messages
// without links by proximity (boundary 4).
func buildGroups(sorted []synth.Message, roots []int, members map[int][]int, gap time.Duration) []synth.Group {
	var (
		groups  []synth.Group
		proxIdx = -1 // the open proximity group
		lastAt  time.Time
	)
	for _, r := range roots {
		idx := members[r]
		m0 := sorted[idx[0]]
		linked := len(idx) > 1 || m0.ThreadID != "" || m0.RootID != "" || m0.ParentID != ""
		if !linked {
			if proxIdx < 0 || m0.OccurredAt.Sub(lastAt) > gap {
				groups = append(groups, synth.Group{Key: groupProximity + string(m0.MessageID)})
				proxIdx = len(groups) - 1
			}
			groups[proxIdx].Messages = append(groups[proxIdx].Messages, m0)
			lastAt = m0.OccurredAt
			continue
		}
		groups = append(groups, linkedGroup(sorted, idx))
	}
	return groups
}

// linkedGroup is the group of the linked conversation of sorted[idx...]: keyed by the
// first thread_id among its messages, else by its first message.
func linkedGroup(sorted []synth.Message, idx []int) synth.Group {
	g := synth.Group{Key: groupConv + string(sorted[idx[0]].MessageID)}
	for _, i := range idx {
		if m := sorted[i]; m.ThreadID != "" {
			g.Key = groupThread + m.ThreadID
			break
		}
	}
	for _, i := range idx {
		g.Messages = append(g.Messages, sorted[i])
	}
	return g
}
