package kafka

import (
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
)

// ErrProducerHalted fails every produce of a Goka processor that finishes after an
// earlier one failed: see haltingProducer.
var ErrProducerHalted = errors.New("kafka: goka producer halted after an earlier produce failed")

// haltingProducer wraps the producer of a Goka processor so that a failed produce
// halts it: Goka marks an input offset once the produces of its callback are
// acknowledged, and sarama moves marks only forward, so a produce that failed
// followed by a later one that was acknowledged (a retried batch, another broker)
// would let the commit skip the failed record (issue #28). Here every produce
// resolves in the order it was emitted, and once one failed every later one fails
// with ErrProducerHalted: no later callback marks its offset, Goka stops the
// processor on the first failure, and a restart reads from the record whose
// produce failed. Nothing is resent; the results are only held until the earlier
// ones are known.
type haltingProducer struct {
	inner goka.Producer

	mu      sync.Mutex
	pending []*pendingProduce // in emit order
	halted  error
}

type pendingProduce struct {
	done   bool
	msg    *sarama.ProducerMessage
	err    error
	finish goka.PromiseFinisher
}

func newHaltingProducer(inner goka.Producer) *haltingProducer { return &haltingProducer{inner: inner} }

func (h *haltingProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return h.EmitWithHeaders(topic, key, value, nil)
}

func (h *haltingProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	p, finish := goka.NewPromiseWithFinisher()
	e := &pendingProduce{finish: finish}
	h.mu.Lock()
	h.pending = append(h.pending, e)
	h.mu.Unlock()
	h.inner.EmitWithHeaders(topic, key, value, headers).ThenWithMessage(func(msg *sarama.ProducerMessage, err error) {
		h.complete(e, msg, err)
	})
	return p
}

// complete records one result and resolves, in emit order, every produce whose
// result and whose predecessors' results are known.
func (h *haltingProducer) complete(e *pendingProduce, msg *sarama.ProducerMessage, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.done, e.msg, e.err = true, msg, err
	for len(h.pending) > 0 && h.pending[0].done {
		head := h.pending[0]
		h.pending[0] = nil
		h.pending = h.pending[1:]
		switch {
		case h.halted != nil:
			head.err = fmt.Errorf("%w (first failure: %w)", ErrProducerHalted, h.halted)
		case head.err != nil:
			h.halted = head.err
		}
		// Resolved under the lock: two completions never resolve out of order.
		// Goka's callbacks on a promise only count and mark; they do not produce.
		head.finish(head.msg, head.err)
	}
}

func (h *haltingProducer) Close() error { return h.inner.Close() }
