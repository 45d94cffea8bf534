package windows

import (
	"context"
	"fmt"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
)

// DeadLetterWriter parks a record in the dead-letter topic synchronously: it returns
// once Kafka acknowledged the record (or failed to). The window processor parks an
// undecodable input record this way before the callback's own produce, so the
// callback's commit can never pass a parked record that was lost in a crash.
type DeadLetterWriter interface {
	WriteDeadLetter(ctx context.Context, key string, value []byte) error
}

// gokaDeadLetters is the default DeadLetterWriter: a Goka emitter (sarama, the
// processor's producer settings) on the dead-letter topic.
type gokaDeadLetters struct{ em *goka.Emitter }

func newGokaDeadLetters(brokers []string, topic string, opts []goka.EmitterOption) (*gokaDeadLetters, error) {
	em, err := goka.NewEmitter(brokers, goka.Stream(topic), new(codec.Bytes), opts...)
	if err != nil {
		return nil, fmt.Errorf("windows: creating the dead-letter emitter for %s: %w", topic, err)
	}
	return &gokaDeadLetters{em: em}, nil
}

// WriteDeadLetter implements DeadLetterWriter. Parked records are rare; the wait
// for the acknowledgement is bounded by the producer's own timeouts and by ctx.
func (g *gokaDeadLetters) WriteDeadLetter(ctx context.Context, key string, value []byte) error {
	prom, err := g.em.Emit(key, value)
	if err != nil {
		return fmt.Errorf("emitting a dead letter: %w", err)
	}
	done := make(chan error, 1)
	prom.Then(func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("dead letter not acknowledged: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the dead letter's acknowledgement: %w", ctx.Err())
	}
}

// Close flushes and closes the emitter.
func (g *gokaDeadLetters) Close() error {
	if err := g.em.Finish(); err != nil {
		return fmt.Errorf("windows: closing the dead-letter emitter: %w", err)
	}
	return nil
}
