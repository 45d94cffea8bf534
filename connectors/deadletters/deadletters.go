package deadletters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// ReasonRedriven marks a redrive marker.
const ReasonRedriven = "redriven"

// Re-drive outcomes.
const (
	OutcomeApplied    = "applied"    // written (inserted, updated, redacted, deleted)
	OutcomeUnchanged  = "unchanged"  // already there (unchanged, stale, delete_absent)
	OutcomeSuperseded = "superseded" // the original is gone from its offset: a newer version replaced it
	OutcomeReproduced = "reproduced" // produced again to its source topic
	OutcomeRefused    = "refused"    // the stage refuses it again: the cause is not fixed (no marker)
	OutcomeSkipped    = "skipped"    // already re-driven (a marker exists)
	OutcomeFailed     = "failed"     // a dependency failed (no marker)
	// OutcomeWouldRedrive: a dry run found nothing against re-driving it (nothing
	// was written).
	OutcomeWouldRedrive = "would_redrive"
)

// Details of a refusal by the re-drive's own checks (issue #29).
const (
	RefusedWrongTopic = "wrong_source_topic" // the dead letter names another topic than its stage's input
	RefusedNotBound   = "chat_not_bound"     // the record's chat is not bound to its workspace
	RefusedBadKey     = "invalid_key"        // the record's key does not name a workspace and chat
)

// ErrInvalid marks bad input to this package.
var ErrInvalid = errors.New("deadletters: invalid input")

// Entry is one dead letter of the topic.
type Entry struct {
	Partition int32     `json:"dead_letter_partition"`
	Offset    int64     `json:"dead_letter_offset"`
	Stage     ids.Stage `json:"stage"`
	Reason    string    `json:"reason"`
	// Key is the parked record's key: workspace, chat and message ids, never text.
	Key            string    `json:"key"`
	FailedAt       time.Time `json:"failed_at"`
	SourceTopic    string    `json:"source_topic"`
	SourcePart     int32     `json:"source_partition"`
	SourceOffset   int64     `json:"source_offset"`
	ByReference    bool      `json:"by_reference"`
	OriginalSchema string    `json:"original_schema,omitempty"`
	// Redriven is the outcome of the re-drive that finished it, "" while parked.
	Redriven string `json:"redriven,omitempty"`

	value []byte
}

// Filter selects dead letters; zero fields match everything.
type Filter struct {
	Stage  ids.Stage
	Reason string
	Since  time.Time
}

func (f Filter) match(e Entry) bool {
	return (f.Stage == "" || e.Stage == f.Stage) && (f.Reason == "" || e.Reason == f.Reason) &&
		(f.Since.IsZero() || !e.FailedAt.Before(f.Since))
}

type dlRef struct {
	p int32
	o int64
}

// Scan reads the dead-letter topic from its start to its end at the time of the
// call and returns its dead letters (markers folded into Redriven), oldest first per
// partition. It reads with cl, which must consume nothing else.
func Scan(ctx context.Context, cl *kgo.Client, codec *schemas.Codec[schemas.DeadLetter], topic string) ([]Entry, error) {
	if cl == nil || codec == nil || topic == "" {
		return nil, fmt.Errorf("%w: Scan needs a client, a codec and a topic", ErrInvalid)
	}
	want, assign, err := scanBounds(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	var (
		entries []Entry
		markers = map[dlRef]string{}
	)
	if len(assign) > 0 {
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign})
		defer cl.RemoveConsumePartitions(map[string][]int32{topic: keys(assign)})
	}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("deadletters: reading %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("deadletters: reading %s: %w", topic, ferr)
		}
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset == end-1 {
				delete(want, r.Partition)
			}
			d, err := codec.Decode(ctx, r.Value)
			if err != nil {
				if derr == nil && schemas.IsRetryable(err) {
					derr = err
				}
				return // not a dead letter: skipped (it names nothing to re-drive)
			}
			if d.Reason == ReasonRedriven && d.Topic == topic {
				markers[dlRef{d.Partition, d.Offset}] = d.Error
				return
			}
			stage, err := ids.ParseStage(d.Stage)
			if err != nil {
				stage = ids.Stage(d.Stage) // listed as parked; a re-drive refuses it
			}
			entries = append(entries, Entry{
				Partition: r.Partition, Offset: r.Offset, Stage: stage, Reason: d.Reason, Key: string(d.Key),
				FailedAt: d.FailedAt.UTC(), SourceTopic: d.Topic, SourcePart: d.Partition, SourceOffset: d.Offset,
				ByReference: d.IsByReference(), OriginalSchema: d.OriginalSchema, value: d.Value,
			})
		})
		if derr != nil {
			return nil, fmt.Errorf("deadletters: decoding: %w", derr)
		}
	}
	for i := range entries {
		entries[i].Redriven = markers[dlRef{entries[i].Partition, entries[i].Offset}]
	}
	return entries, nil
}

// scanBounds reads the topic's start and end offsets: want maps each non-empty
// partition to its end offset (the scan stops there), assign to where reading starts.
func scanBounds(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, map[int32]kgo.Offset, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("deadletters: end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, nil, fmt.Errorf("deadletters: end offsets of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("deadletters: start offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	assign := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		start := int64(0)
		if s, ok := starts.Lookup(topic, o.Partition); ok {
			start = s.Offset
		}
		if o.Offset > start {
			want[o.Partition] = o.Offset
			assign[o.Partition] = kgo.NewOffset().At(start)
		}
	})
	return want, assign, nil
}

func keys(m map[int32]kgo.Offset) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	return out
}

// Select returns the entries f matches.
func Select(es []Entry, f Filter) []Entry {
	var out []Entry
	for _, e := range es {
		if f.match(e) {
			out = append(out, e)
		}
	}
	return out
}

// ParseSince reads --since: an RFC 3339 time or a duration back from now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%w: since %q is neither an RFC 3339 time nor a positive duration", ErrInvalid, s)
}
