package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// deadLetter builds the dead letter of p. It never carries the record's value (chat
// text): it names the evidence record by topic, partition and offset, from where
// `larkline deadletters redrive` reads it again (issue #19).
func (s *Sink) deadLetter(p *parked) schemas.DeadLetter {
	r := p.rec
	d := schemas.NewDeadLetter(ids.StageSink, p.cause, r.Topic, r.Partition, r.Offset, r.Key, r.Value, s.o.Clock())
	d.ByReference()
	if p.reason != "" {
		d.Reason = p.reason
	}
	if d.OriginalSchema == "" {
		if ref, ok := schemas.WireSchemaRef(r.Value); ok {
			d.OriginalSchema = ref
		}
	}
	return d
}

// deadLetterStep produces the batch's parked records that are not acknowledged yet
// and waits for the broker's acknowledgement (acks=all, idempotent producer). A dead
// letter the topic refuses as too large is sent again without the original value.
func (s *Sink) deadLetterStep(ctx context.Context, b *batch) (bool, error) {
	var (
		todo []*parked
		recs []*kgo.Record
	)
	for _, p := range b.parked {
		if p.acked {
			continue
		}
		v, err := s.dlqCodec.Encode(ctx, s.deadLetter(p))
		switch {
		case err != nil && (schemas.IsRetryable(err) || ctx.Err() != nil):
			return false, &retryError{fmt.Errorf("encoding dead letter: %w", err)}
		case err != nil:
			return false, fmt.Errorf("%w: encoding dead letter of %s/%d@%d: %w", ErrFatal, p.rec.Topic, p.rec.Partition, p.rec.Offset, err)
		}
		todo = append(todo, p)
		recs = append(recs, &kgo.Record{Topic: s.o.DeadLetterTopic, Key: p.rec.Key, Value: v})
	}
	if len(todo) == 0 {
		return true, nil
	}
	var retry, fatal error
	left := 0
	for i, res := range s.cl.ProduceSync(ctx, recs...) {
		p := todo[i]
		switch err := res.Err; {
		case err == nil:
			p.acked = true
			reason := p.reasonCode()
			s.m.deadLettered.WithLabelValues(reason).Inc()
			s.log.Warn("record parked in the dead-letter topic", "topic", p.rec.Topic, "partition", p.rec.Partition,
				"offset", p.rec.Offset, "key_hash", logging.HashID(string(p.rec.Key)), "reason", reason,
				"dead_letter_partition", res.Record.Partition, "dead_letter_offset", res.Record.Offset, "error", p.cause)
		case !p.omitValue && (errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)):
			p.omitValue = true // sent again at once, without the value
			left++
		case retryableKafka(err) || ctx.Err() != nil:
			if retry == nil {
				retry = err
			}
		default:
			if fatal == nil {
				fatal = err
			}
		}
	}
	switch {
	case fatal != nil:
		return false, fmt.Errorf("%w: producing dead letters to %s: %w", ErrFatal, s.o.DeadLetterTopic, fatal)
	case retry != nil:
		return false, &retryError{fmt.Errorf("producing dead letters to %s: %w", s.o.DeadLetterTopic, retry)}
	}
	return left == 0, nil
}
