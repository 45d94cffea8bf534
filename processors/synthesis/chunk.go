package synthesis

import (
	"slices"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// takePrimary decides how many of the next evidence messages (in evidence order) form
// a chunk: at most limit, and no more than fit budget estimated tokens together with
// reserved (the existing entries given with the chunk). The first message is always
// taken, even alone over budget: a message cannot be split, and skipping it would
// leave the window uncovered. It returns the count and the tokens of the taken
// messages.
func takePrimary(msgs []synth.Message, limit, budget, reserved int) (n, tokens int) {
	for _, m := range msgs {
		if n == limit {
			break
		}
		t := synth.EstimateMessageTokens(m)
		if n > 0 && reserved+tokens+t > budget {
			break
		}
		n++
		tokens += t
	}
	return n, tokens
}

// pickContext chooses read-only context from candidates, given in priority order:
// it skips candidates already chosen or among exclude (the chunk's primary evidence),
// and adds each remaining one that still fits budget tokens, up to maxN messages. Each
// chosen message is marked Context. It returns them with their tokens.
func pickContext(candidates []synth.Message, exclude map[int64]struct{}, budget, maxN int) ([]synth.Message, int) {
	var (
		out    []synth.Message
		tokens int
		seen   = make(map[int64]struct{}, len(candidates))
	)
	for _, m := range candidates {
		if len(out) == maxN {
			break
		}
		if _, ok := exclude[m.EvidenceID]; ok {
			continue
		}
		if _, ok := seen[m.EvidenceID]; ok {
			continue
		}
		t := synth.EstimateMessageTokens(m)
		if tokens+t > budget {
			continue
		}
		seen[m.EvidenceID] = struct{}{}
		m.Context = true
		out = append(out, m)
		tokens += t
	}
	return out, tokens
}

// pickExisting keeps the existing entries nearest the window (the last of entries,
// which are in time order) within budget tokens and maxN entries, returned in time
// order.
func pickExisting(entries []synth.ExistingEntry, budget, maxN int) ([]synth.ExistingEntry, int) {
	var (
		out    []synth.ExistingEntry
		tokens int
	)
	for i := len(entries) - 1; i >= 0 && len(out) < maxN; i-- {
		t := synth.EstimateEntryTokens(entries[i])
		if tokens+t > budget {
			break
		}
		out = append(out, entries[i])
		tokens += t
	}
	slices.Reverse(out)
	return out, tokens
}

// related reports whether earlier message r belongs to m's conversation: the same
// thread, the same root, or r is m's root or parent.
func related(r, m synth.Message) bool {
	switch {
	case m.ThreadID != "" && r.ThreadID == m.ThreadID:
		return true
	case m.RootID != "" && (r.RootID == m.RootID || string(r.MessageID) == m.RootID):
		return true
	case m.ParentID != "" && string(r.MessageID) == m.ParentID:
		return true
	}
	return false
}

// recent remembers the last primary messages of the chunks already processed in an
// attempt, so that a later chunk can be given the earlier part of its threads as
// read-only context. It holds at most size messages.
type recent struct {
	size int
	msgs []synth.Message
}

func (r *recent) add(ms []synth.Message) {
	r.msgs = append(r.msgs, ms...)
	if over := len(r.msgs) - r.size; over > 0 {
		r.msgs = slices.Delete(r.msgs, 0, over)
	}
}

// relatedTo returns the remembered messages related to any of ms, newest first.
func (r *recent) relatedTo(ms []synth.Message) []synth.Message {
	var out []synth.Message
	for i := len(r.msgs) - 1; i >= 0; i-- {
		for _, m := range ms {
			if related(r.msgs[i], m) {
				out = append(out, r.msgs[i])
				break
			}
		}
	}
	return out
}
