package deadletters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/postgres"
	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// RedriverOptions configure a Redriver.
type RedriverOptions struct {
	// Client produces markers and re-produced records and reads sources. Required;
	// it must consume nothing else. Its producer must use larkline's partitioner.
	Client *kgo.Client
	// Codecs decode dead letters and evidence. Required.
	Codecs *schemas.Codecs
	// DeadLetterTopic is the dead-letter topic. Required.
	DeadLetterTopic string
	// Store writes evidence (stage evidence_sink). Required for that stage.
	Store store.EvidenceWriter
	// Clock stamps markers. Default time.Now.
	Clock func() time.Time
	// Logger receives one line per re-drive (ids and outcomes). Nil discards.
	Logger *slog.Logger
}

// Redriver re-drives dead letters.
type Redriver struct {
	o   RedriverOptions
	log *slog.Logger
}

// NewRedriver validates o.
func NewRedriver(o RedriverOptions) (*Redriver, error) {
	switch {
	case o.Client == nil:
		return nil, fmt.Errorf("%w: Client is required", ErrInvalid)
	case o.Codecs == nil:
		return nil, fmt.Errorf("%w: Codecs is required", ErrInvalid)
	case o.DeadLetterTopic == "":
		return nil, fmt.Errorf("%w: DeadLetterTopic is required", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Redriver{o: o, log: logging.OrDiscard(o.Logger)}, nil
}

// Result is what became of one dead letter.
type Result struct {
	Entry
	Outcome string `json:"outcome"`
	// Detail is the stage's answer (e.g. the store's inserted/unchanged/stale, or the
	// reason of a refusal); ids and codes only.
	Detail string `json:"detail,omitempty"`
}

// Report is one re-drive run.
type Report struct {
	Stage    string         `json:"stage"`
	Selected int            `json:"selected"`
	Outcomes map[string]int `json:"outcomes"`
	Results  []Result       `json:"results"`
}

// Redrive re-drives the dead letters of f.Stage (required) that f matches. A
// dependency failure stops the run with an error after the report of what was done.
func (r *Redriver) Redrive(ctx context.Context, f Filter) (Report, error) {
	switch f.Stage {
	case StageEvidenceSink:
		if r.o.Store == nil {
			return Report{}, fmt.Errorf("%w: the evidence_sink stage needs a store", ErrInvalid)
		}
	case StageSynthesis, StageWorkspaceFeed:
	case StageWindows:
		return Report{}, fmt.Errorf("%w: the window processor keeps its state in Kafka; re-run its records by replaying a processor version (larkline replay)", ErrInvalid)
	default:
		return Report{}, fmt.Errorf("%w: unknown stage %q (evidence_sink, synthesis, workspace_feed)", ErrInvalid, f.Stage)
	}
	all, err := Scan(ctx, r.o.Client, r.o.Codecs.DeadLetter, r.o.DeadLetterTopic)
	if err != nil {
		return Report{}, err
	}
	sel := Select(all, f)
	rep := Report{Stage: f.Stage, Selected: len(sel), Outcomes: map[string]int{}}
	for _, e := range sel {
		res := Result{Entry: e}
		if e.Redriven != "" {
			res.Outcome, res.Detail = OutcomeSkipped, e.Redriven
		} else {
			res.Outcome, res.Detail, err = r.one(ctx, e)
			if err == nil && res.Outcome != OutcomeRefused {
				err = r.mark(ctx, e, res.Outcome)
			}
			if err != nil {
				res.Outcome, res.Detail = OutcomeFailed, ""
			}
		}
		rep.Outcomes[res.Outcome]++
		rep.Results = append(rep.Results, res)
		r.log.Info("dead letter re-driven", "stage", e.Stage, "reason", e.Reason, "key_hash", logging.HashID(e.Key),
			"dead_letter_partition", e.Partition, "dead_letter_offset", e.Offset, "outcome", res.Outcome, "detail", res.Detail)
		if err != nil {
			return rep, fmt.Errorf("deadletters: re-driving %d@%d: %w", e.Partition, e.Offset, err)
		}
	}
	return rep, nil
}

func (r *Redriver) one(ctx context.Context, e Entry) (outcome, detail string, err error) {
	var src *kgo.Record
	if e.value == nil {
		if e.SourceOffset < 0 {
			return OutcomeSuperseded, "no_source_offset", nil
		}
		if src, err = r.fetch(ctx, e.SourceTopic, e.SourcePart, e.SourceOffset); err != nil {
			return "", "", err
		}
		if src == nil {
			return OutcomeSuperseded, "", nil
		}
	} else {
		src = &kgo.Record{Topic: e.SourceTopic, Partition: e.SourcePart, Offset: e.SourceOffset, Key: []byte(e.Key), Value: e.value}
	}
	switch e.Stage {
	case StageEvidenceSink:
		out, err := postgres.Redrive(ctx, r.o.Codecs.Evidence, r.o.Store, src)
		switch {
		case errors.Is(err, postgres.ErrStillRefused):
			return OutcomeRefused, out, nil
		case err != nil:
			return "", "", err
		case out == "unchanged" || out == "stale" || out == "delete_absent":
			return OutcomeUnchanged, out, nil
		}
		return OutcomeApplied, out, nil
	default: // synthesis, workspace_feed: once more into the source topic
		rec := &kgo.Record{Topic: e.SourceTopic, Key: src.Key, Value: src.Value}
		if err := r.o.Client.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return "", "", fmt.Errorf("producing to %s: %w", e.SourceTopic, err)
		}
		return OutcomeReproduced, fmt.Sprintf("%d@%d", rec.Partition, rec.Offset), nil
	}
}

// fetch reads topic/partition@offset; nil when that offset holds no record any more.
func (r *Redriver) fetch(ctx context.Context, topic string, partition int32, offset int64) (*kgo.Record, error) {
	cl := r.o.Client
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(offset)}})
	defer cl.RemoveConsumePartitions(map[string][]int32{topic: {partition}})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s/%d@%d: %w", topic, partition, offset, err)
		}
		var (
			got  *kgo.Record
			past bool
			ferr error
		)
		fs.EachError(func(t string, p int32, err error) {
			if t == topic && p == partition && ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			// An offset out of range is reset to the partition's start by the client
			// and then seen below as a later record.
			return nil, fmt.Errorf("reading %s/%d@%d: %w", topic, partition, offset, ferr)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Topic != topic || rec.Partition != partition || got != nil || past {
				return
			}
			if rec.Offset == offset {
				got = rec
			} else if rec.Offset > offset {
				past = true // compacted away: a newer version of the key replaced it
			}
		})
		if got != nil || past {
			return got, nil
		}
	}
}

// mark appends the marker that finishes e.
func (r *Redriver) mark(ctx context.Context, e Entry, outcome string) error {
	m := schemas.DeadLetter{Stage: e.Stage, Reason: ReasonRedriven, Error: outcome, Topic: r.o.DeadLetterTopic,
		Partition: e.Partition, Offset: e.Offset, Key: []byte(e.Key), FailedAt: r.o.Clock().UTC()}
	v, err := r.o.Codecs.DeadLetter.Encode(ctx, m)
	if err != nil {
		return fmt.Errorf("encoding the marker: %w", err)
	}
	if err := r.o.Client.ProduceSync(ctx, &kgo.Record{Topic: r.o.DeadLetterTopic, Key: []byte(e.Key), Value: v}).FirstErr(); err != nil {
		return fmt.Errorf("producing the marker: %w", err)
	}
	return nil
}
