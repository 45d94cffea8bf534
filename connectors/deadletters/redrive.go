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
	"github.com/larkline/larkline/schemas/ids"
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
	// Store writes evidence (stage sink). Required for that stage.
	Store postgres.Writer
	// SourceTopics names, per stage, the topic its dead letters must come from (the
	// stage's input): a dead letter naming another topic is refused, never produced
	// there. Required for the stage re-driven.
	SourceTopics map[ids.Stage]string
	// Bindings tells which workspaces a chat is bound to (*store.Store): a record of
	// a workspace its chat is not bound to is refused (stages sink and synthesis). Required for those stages.
	Bindings Bindings
	// Clock stamps markers. Default time.Now.
	Clock func() time.Time
	// Logger receives one line per re-drive (ids and outcomes). Nil discards.
	Logger *slog.Logger
}

// Bindings is the binding lookup of the re-drive checks; *store.Store satisfies it.
type Bindings interface {
	BindingsForChat(ctx context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error)
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
	Stage ids.Stage `json:"stage"`
	// DryRun: nothing was written; outcomes say what a re-drive would do
	// (would_redrive, or refused by the checks, or skipped).
	DryRun   bool           `json:"dry_run"`
	Selected int            `json:"selected"`
	Outcomes map[string]int `json:"outcomes"`
	Results  []Result       `json:"results"`
}

// Redrive re-drives the dead letters of f.Stage (required) that f matches, after
// checking each (issue #29): it must come from its stage's input topic, and a record
// of a workspace and chat must be of a chat bound to that workspace (a redacted
// evidence version or a tombstone passes: it carries no text). With apply false it is
// a dry run: the same checks, nothing written, the report says what would happen. A
// dependency failure stops the run with an error after the report of what was done.
func (r *Redriver) Redrive(ctx context.Context, f Filter, apply bool) (Report, error) {
	switch f.Stage {
	case ids.StageSink:
		if r.o.Store == nil || r.o.Bindings == nil {
			return Report{}, fmt.Errorf("%w: the sink stage needs a store", ErrInvalid)
		}
	case ids.StageSynthesis:
		if r.o.Bindings == nil {
			return Report{}, fmt.Errorf("%w: the synthesis stage needs the bindings (a store)", ErrInvalid)
		}
	case ids.StageWorkspaces:
	case ids.StageWindows:
		return Report{}, fmt.Errorf("%w: the window processor keeps its state in Kafka; re-run its records under a new processor version (larkline versions start)", ErrInvalid)
	default:
		return Report{}, fmt.Errorf("%w: stage %q has no re-drive (sink, synthesis, workspaces)", ErrInvalid, f.Stage)
	}
	if r.o.SourceTopics[f.Stage] == "" {
		return Report{}, fmt.Errorf("%w: no source topic for stage %q (RedriverOptions.SourceTopics)", ErrInvalid, f.Stage)
	}
	all, err := Scan(ctx, r.o.Client, r.o.Codecs.DeadLetter, r.o.DeadLetterTopic)
	if err != nil {
		return Report{}, err
	}
	sel := Select(all, f)
	rep := Report{Stage: f.Stage, DryRun: !apply, Selected: len(sel), Outcomes: map[string]int{}}
	for _, e := range sel {
		res := Result{Entry: e}
		if e.Redriven != "" {
			res.Outcome, res.Detail = OutcomeSkipped, e.Redriven
		} else if !apply {
			res.Outcome, res.Detail, err = r.check(ctx, e)
			if err != nil {
				res.Outcome, res.Detail = OutcomeFailed, ""
			}
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

// source returns the parked record (kept in the dead letter, or read again at its
// offset); nil with an outcome when there is nothing to re-drive.
func (r *Redriver) source(ctx context.Context, e Entry) (src *kgo.Record, outcome, detail string, err error) {
	if e.value != nil {
		return &kgo.Record{Topic: e.SourceTopic, Partition: e.SourcePart, Offset: e.SourceOffset, Key: []byte(e.Key), Value: e.value}, "", "", nil
	}
	if e.SourceOffset < 0 {
		return nil, OutcomeSuperseded, "no_source_offset", nil
	}
	if src, err = r.fetch(ctx, e.SourceTopic, e.SourcePart, e.SourceOffset); err != nil {
		return nil, "", "", err
	}
	if src == nil {
		return nil, OutcomeSuperseded, "", nil
	}
	return src, "", "", nil
}

// check is a dry run of one dead letter: the checks, nothing written.
func (r *Redriver) check(ctx context.Context, e Entry) (outcome, detail string, err error) {
	_, outcome, detail, err = r.checked(ctx, e)
	return outcome, detail, err
}

// checked runs the checks of one dead letter and returns the record to re-drive, or
// nil with the outcome (OutcomeWouldRedrive when the checks pass).
func (r *Redriver) checked(ctx context.Context, e Entry) (src *kgo.Record, outcome, detail string, err error) {
	if d := r.checkTopic(e); d != "" {
		return nil, OutcomeRefused, d, nil
	}
	src, outcome, detail, err = r.source(ctx, e)
	if err != nil || src == nil {
		return nil, outcome, detail, err
	}
	if d, err := r.checkBinding(ctx, e.Stage, src); err != nil || d != "" {
		return nil, OutcomeRefused, d, err
	}
	return src, OutcomeWouldRedrive, "", nil
}

// checkTopic refuses a dead letter that names another topic than its stage's input:
// a forged or corrupted dead letter must not choose where larkline produces.
func (r *Redriver) checkTopic(e Entry) string {
	if e.SourceTopic != r.o.SourceTopics[e.Stage] {
		return RefusedWrongTopic
	}
	return ""
}

// checkBinding refuses a record of a workspace its chat is not bound to (stages
// sink and synthesis). A redacted evidence version or a tombstone passes: it
// carries no text, and a recall must reach every workspace that held the message,
// bound or not (D18).
func (r *Redriver) checkBinding(ctx context.Context, stage ids.Stage, src *kgo.Record) (string, error) {
	var (
		ws   ids.WorkspaceID
		chat ids.ChatID
		err  error
	)
	switch stage {
	case ids.StageSink:
		if ws, chat, _, err = ids.ParseEvidenceKey(string(src.Key)); err != nil {
			return RefusedBadKey, nil
		}
		if len(src.Value) == 0 {
			return "", nil
		}
		if rec, err := r.o.Codecs.Evidence.Decode(ctx, src.Value); err == nil && rec.Deleted && rec.Content == "" {
			return "", nil
		}
	case ids.StageSynthesis:
		if ws, chat, err = ids.ParseChatKey(string(src.Key)); err != nil {
			return RefusedBadKey, nil
		}
	default:
		return "", nil
	}
	bs, err := r.o.Bindings.BindingsForChat(ctx, chat)
	if err != nil {
		return "", fmt.Errorf("reading the bindings of chat %s: %w", chat, err)
	}
	for _, b := range bs {
		if b.Workspace.ID == ws {
			return "", nil
		}
	}
	return RefusedNotBound, nil
}

func (r *Redriver) one(ctx context.Context, e Entry) (outcome, detail string, err error) {
	src, outcome, detail, err := r.checked(ctx, e)
	if err != nil || src == nil {
		return outcome, detail, err
	}
	switch e.Stage {
	case ids.StageSink:
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
	default: // synthesis, workspaces: once more into the source topic
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
	m := schemas.DeadLetter{Stage: string(e.Stage), Reason: ReasonRedriven, Error: outcome, Topic: r.o.DeadLetterTopic,
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
