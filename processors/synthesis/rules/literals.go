package rules

import "sync"

// The prefilters' literals are looked up in one pass over a sentence instead of one
// strings.Contains per literal per expression (about a thousand per sentence, most
// of the rule synthesizer's CPU once every expression had a prefilter; issue 35).
// Every literal any prefilter names gets an id when its expression is compiled; a
// byte trie of all of them, built on first use, finds the ids of those a text
// contains: from every byte offset it follows the trie as far as the text agrees.

// literalIDs numbers every literal of every prefilter; written only while the
// package's variables are initialised.
var literalIDs = map[string]int32{}

// literalID returns lit's id, numbering it if it is new.
func literalID(lit string) int32 {
	id, ok := literalIDs[lit]
	if !ok {
		id = int32(len(literalIDs))
		literalIDs[lit] = id
	}
	return id
}

// trie is a byte trie of the literals: node 0 is the root.
type trie struct {
	root  [256]int32       // the root's children (0: none)
	next  map[uint64]int32 // node<<8|byte -> child, below the root
	ends  [][]int32        // by node: ids of the literals that end there
	words int              // the bitset words of a lookup
}

var literalTrie = sync.OnceValue(func() *trie {
	t := &trie{next: map[uint64]int32{}, ends: [][]int32{nil}, words: (len(literalIDs) + 63) / 64}
	for lit, id := range literalIDs {
		n := int32(0)
		for i := 0; i < len(lit); i++ {
			b := lit[i]
			var child int32
			if n == 0 {
				child = t.root[b]
			} else {
				child = t.next[uint64(n)<<8|uint64(b)]
			}
			if child == 0 {
				child = int32(len(t.ends))
				t.ends = append(t.ends, nil)
				if n == 0 {
					t.root[b] = child
				} else {
					t.next[uint64(n)<<8|uint64(b)] = child
				}
			}
			n = child
		}
		t.ends[n] = append(t.ends[n], id)
	}
	return t
})

// present is the set of literal ids a text contains.
type present []uint64

func (p present) has(id int32) bool { return p[id>>6]&(1<<(id&63)) != 0 }

// literalsIn returns the ids of the literals s contains.
func literalsIn(s string) present {
	t := literalTrie()
	p := make(present, t.words)
	for i := 0; i < len(s); i++ {
		n := t.root[s[i]]
		for j := i + 1; n != 0; j++ {
			for _, id := range t.ends[n] {
				p[id>>6] |= 1 << (id & 63)
			}
			if j == len(s) {
				break
			}
			n = t.next[uint64(n)<<8|uint64(s[j])]
		}
	}
	return p
}
