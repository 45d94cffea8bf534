package synthesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/twmb/franz-go/pkg/kadm"
)

// SinkProgress tells how far the evidence sink has stored the evidence topic: a
// closed record names its evidence as an offset range of the chat's
// evidence partition, and the range is in the evidence table once the sink's
// consumer group has committed its end offset (the sink commits only after its
// database commit).
type SinkProgress interface {
	// Committed returns the sink group's committed offset (the next offset it will
	// store) on partition of the evidence topic, -1 when it has committed none.
	Committed(ctx context.Context, partition int32) (int64, error)
}

// KadmSinkProgress reads the sink group's committed offsets with a franz-go admin
// client. One OffsetFetch answers every window for MaxAge, so a backlog of closed
// windows costs one request per MaxAge, not one per window.
type KadmSinkProgress struct {
	Admin  *kadm.Client
	Group  string // the evidence sink's consumer group
	Topic  string // the evidence topic
	MaxAge time.Duration

	mu      sync.Mutex
	at      time.Time
	offsets map[int32]int64
}

// DefaultSinkProgressMaxAge is KadmSinkProgress's cache age when MaxAge is zero.
const DefaultSinkProgressMaxAge = 500 * time.Millisecond

// ErrNoSinkProgress means a KadmSinkProgress is missing its admin client, group or
// topic.
var ErrNoSinkProgress = errors.New("synthesis: sink progress needs an admin client, the sink group and the evidence topic")

// Committed implements SinkProgress.
func (k *KadmSinkProgress) Committed(ctx context.Context, partition int32) (int64, error) {
	if k.Admin == nil || k.Group == "" || k.Topic == "" {
		return 0, ErrNoSinkProgress
	}
	age := k.MaxAge
	if age <= 0 {
		age = DefaultSinkProgressMaxAge
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.offsets == nil || time.Since(k.at) >= age {
		resp, err := k.Admin.FetchOffsets(ctx, k.Group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return 0, fmt.Errorf("fetching the committed offsets of the evidence sink group %s: %w", k.Group, err)
		}
		offsets := map[int32]int64{}
		for p, r := range resp[k.Topic] {
			if r.Err == nil {
				offsets[p] = r.At
			}
		}
		k.offsets, k.at = offsets, time.Now()
	}
	if o, ok := k.offsets[partition]; ok {
		return o, nil
	}
	return -1, nil
}

// waitSink waits until the evidence sink has stored the job's evidence range: its
// group committed at or past the range's end on the evidence partition. Each
// EvidenceWait without it is counted and logged, and the wait goes on: the sink
// being behind or down is not the window's fault, so no attempt is spent and no
// claim is held meanwhile. It returns ctx's error when ctx ends first.
func (w *Worker) waitSink(ctx context.Context, j *job, log *slog.Logger) error {
	if w.o.SinkProgress == nil {
		return nil // a worker without one reads what the table holds (tests)
	}
	started := w.o.Clock()
	defer func() { w.m.evidenceWait.Observe(w.o.Clock().Sub(started).Seconds()) }()
	retry := w.backoff()
	next := started.Add(w.o.EvidenceWait)
	for {
		committed, err := w.o.SinkProgress.Committed(ctx, j.partition)
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			w.m.sinkProgressErrors.Inc()
			log.Warn("reading the evidence sink's progress failed; retrying", "error", err)
		case committed >= j.endOffset:
			return nil
		}
		if now := w.o.Clock(); !now.Before(next) {
			w.m.sinkWaitTimeouts.Inc()
			log.Warn("the evidence sink has not yet stored the closed window's evidence; still waiting (no attempt spent)",
				"evidence_partition", j.partition, "evidence_end_offset", j.endOffset, "sink_committed", committed,
				"waited", now.Sub(started).String())
			next = now.Add(w.o.EvidenceWait)
		}
		if err := backoff.Sleep(ctx, min(retry.next(), w.o.EvidenceWait)); err != nil {
			return err
		}
	}
}
