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

	parent := make([]int, len(sorted))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		if rb < ra { // the earlier message is the representative
			ra, rb = rb, ra
		}
		parent[rb] = ra
	}
	first := make(map[string]int, 2*len(sorted))
	link := func(i int, node string) {
		if j, ok := first[node]; ok {
			union(i, j)
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

	members := make(map[int][]int, len(sorted))
	var roots []int // in order of first member
	for i := range sorted {
		r := find(i)
		if _, seen := members[r]; !seen {
			roots = append(roots, r)
		}
		members[r] = append(members[r], i)
	}

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
		g := synth.Group{Key: groupConv + string(m0.MessageID)}
		for _, i := range idx {
			if m := sorted[i]; m.ThreadID != "" {
				g.Key = groupThread + m.ThreadID
				break
			}
		}
		for _, i := range idx {
			g.Messages = append(g.Messages, sorted[i])
		}
		groups = append(groups, g)
	}
	slices.SortStableFunc(groups, func(a, b synth.Group) int { return compareMessages(a.Messages[0], b.Messages[0]) })
	return groups
}
