package ingest

import "container/list"

// lru is a bounded map that evicts the least recently used key. It is not safe for
// concurrent use; its owner locks.
type lru[K comparable, V any] struct {
	max int
	ll  *list.List // of *lruItem, most recent at the front
	m   map[K]*list.Element
}

type lruItem[K comparable, V any] struct {
	k K
	v V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, ll: list.New(), m: make(map[K]*list.Element)}
}

// get returns the value of k and marks it most recently used.
func (c *lru[K, V]) get(k K) (V, bool) {
	e, ok := c.m[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*lruItem[K, V]).v, true
}

// put stores v under k as the most recently used key and reports how many keys it
// evicted to stay within the bound.
func (c *lru[K, V]) put(k K, v V) (evicted int) {
	if e, ok := c.m[k]; ok {
		e.Value.(*lruItem[K, V]).v = v
		c.ll.MoveToFront(e)
		return 0
	}
	c.m[k] = c.ll.PushFront(&lruItem[K, V]{k: k, v: v})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*lruItem[K, V]).k)
		evicted++
	}
	return evicted
}

func (c *lru[K, V]) len() int { return c.ll.Len() }
