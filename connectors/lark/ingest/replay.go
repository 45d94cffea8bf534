package ingest

import (
	"container/list"
	"sync"
	"time"
)

// DefaultMaxSeenEvents bounds the webhook's set of recently acknowledged event ids
// (about 100 bytes each).
const DefaultMaxSeenEvents = 100_000

// seenEvents is the webhook's replay guard: the ids of events acknowledged recently,
// each kept until the request that carried it could no longer pass the timestamp
// check (its X-Lark-Request-Timestamp plus the allowed skew). A captured, signed
// request sent again within that time is answered without producing anything; after
// it, the timestamp check refuses it. An event is recorded only once acknowledged, so
// Lark's redelivery of an event larkline failed to take (same event id) is processed.
// An id being processed is held: a concurrent copy is answered "failed" (Lark
// redelivers it later, and then it is a replay or a retry). Bounded: past max ids the
// oldest is dropped early and counted (larkline_lark_webhook_seen_evictions_total).
type seenEvents struct {
	mu      sync.Mutex
	max     int
	byID    map[string]*list.Element
	order   *list.List // of *seenEvent, oldest first
	evicted func()
}

type seenEvent struct {
	id       string
	until    time.Time // zero while in flight
	inFlight bool
}

// seenState is what begin found.
type seenState int

const (
	seenNew seenState = iota
	seenReplay
	seenInFlight
)

func newSeenEvents(max int, evicted func()) *seenEvents {
	return &seenEvents{max: max, byID: map[string]*list.Element{}, order: list.New(), evicted: evicted}
}

// begin looks id up at now; when it is new it is held as in flight until end.
func (s *seenEvents) begin(id string, now time.Time) seenState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if el, ok := s.byID[id]; ok {
		e := el.Value.(*seenEvent)
		switch {
		case e.inFlight:
			return seenInFlight
		case now.Before(e.until):
			return seenReplay
		}
		s.order.Remove(el)
		delete(s.byID, id)
	}
	s.byID[id] = s.order.PushBack(&seenEvent{id: id, inFlight: true})
	for s.order.Len() > s.max {
		front := s.order.Front()
		e := front.Value.(*seenEvent)
		s.order.Remove(front)
		delete(s.byID, e.id)
		if s.evicted != nil {
			s.evicted()
		}
	}
	return seenNew
}

// end releases id: kept until until when the event was acknowledged, forgotten
// otherwise (a redelivery is then processed).
func (s *seenEvents) end(id string, acknowledged bool, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok {
		return
	}
	e := el.Value.(*seenEvent)
	if !e.inFlight {
		return
	}
	if !acknowledged {
		s.order.Remove(el)
		delete(s.byID, id)
		return
	}
	e.inFlight, e.until = false, until
	s.order.MoveToBack(el)
}

// expire drops expired ids from the front (ids are appended roughly in expiry
// order; one that expires later may keep an earlier one a little longer, within the
// bound).
func (s *seenEvents) expire(now time.Time) {
	for el := s.order.Front(); el != nil; {
		e := el.Value.(*seenEvent)
		if e.inFlight || now.Before(e.until) {
			return
		}
		next := el.Next()
		s.order.Remove(el)
		delete(s.byID, e.id)
		el = next
	}
}

// len is the number of ids held.
func (s *seenEvents) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
