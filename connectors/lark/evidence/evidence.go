package evidence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Producer writes records and waits for Kafka's acknowledgement of each; *kgo.Client
// satisfies it. The client must be built with kafka.NewClientOptions (acks=all,
// idempotent, the shared partitioner).
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Names is the display-name cache (*ingest.Contacts).
type Names interface {
	// Name returns the cached display name of a user's open_id, queueing a lookup
	// when it is unknown or stale. It never blocks on I/O.
	Name(openID string) (string, bool)
	// Observe offers a name Lark sent along (an @-mention's name).
	Observe(openID, name string)
}

// Eligibility resolves a chat to the workspaces whose evidence a message created at
// occurredAt belongs to (*bindings.Resolver).
type Eligibility interface {
	Resolve(ctx context.Context, chat ids.ChatID, occurredAt time.Time) (bindings.Resolution, error)
}

var (
	// ErrInvalidOptions is returned (wrapped) by New.
	ErrInvalidOptions = errors.New("invalid evidence writer options")
	// ErrAbandoned is returned (wrapped, with ctx's cause) by Produce when ctx ended
	// before Kafka answered every record.
	ErrAbandoned = errors.New("evidence records not acknowledged in time")
)

// Options configure a Writer.
type Options struct {
	// Producer and Codec are required; Topic is the evidence topic (required).
	Producer Producer
	Codec    *schemas.Codec[schemas.EvidenceRecord]
	Topic    string
	// Names, when set, gives user senders their cached display name.
	Names Names
}

// Writer builds and produces evidence records. It is safe for concurrent use.
type Writer struct{ o Options }

// New validates o.
func New(o Options) (*Writer, error) {
	switch {
	case o.Producer == nil:
		return nil, fmt.Errorf("%w: Producer is required", ErrInvalidOptions)
	case o.Codec == nil:
		return nil, fmt.Errorf("%w: Codec is required", ErrInvalidOptions)
	case o.Topic == "":
		return nil, fmt.Errorf("%w: Topic is required", ErrInvalidOptions)
	}
	return &Writer{o: o}, nil
}

// ObserveMentions offers the names Lark sent with mentions to the name cache.
func (w *Writer) ObserveMentions(mentions []normalize.Mention) {
	if w.o.Names == nil {
		return
	}
	for _, mn := range mentions {
		if mn.OpenID != "" && mn.Name != "" {
			w.o.Names.Observe(mn.OpenID, mn.Name)
		}
	}
}

// Records builds and encodes msg's evidence record for each workspace, observed at
// observed and collected by path. An invalid record wraps schemas.ErrInvalidRecord;
// an encoding failure names the message and workspace.
func (w *Writer) Records(ctx context.Context, msg *normalize.Message, workspaces []ids.WorkspaceID, observed time.Time, path schemas.IngestPath) ([]*kgo.Record, error) {
	var name string
	if w.o.Names != nil && msg.SenderType == normalize.SenderUser && msg.SenderOpenID != "" {
		name, _ = w.o.Names.Name(msg.SenderOpenID)
	}
	observed = observed.UTC()
	recs := make([]*kgo.Record, 0, len(workspaces))
	for _, ws := range workspaces {
		rec, err := msg.Evidence(ws, name, observed, path)
		if err != nil {
			return nil, err
		}
		value, err := w.o.Codec.Encode(ctx, rec)
		if err != nil {
			return nil, fmt.Errorf("evidence of message %s for workspace %s: %w", msg.MessageID, ws, err)
		}
		recs = append(recs, &kgo.Record{Topic: w.o.Topic, Key: []byte(rec.Key()), Value: value, Timestamp: observed})
	}
	return recs, nil
}

// Produce writes recs and waits for every acknowledgement, or for ctx: then it returns
// nil results and an error wrapping ErrAbandoned and ctx's cause (the event path:
// Lark delivers the event again). Otherwise it is ProduceAll.
func (w *Writer) Produce(ctx context.Context, recs []*kgo.Record) (kgo.ProduceResults, error) {
	type answer struct {
		res kgo.ProduceResults
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := ProduceAll(ctx, w.o.Producer, "evidence", recs)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.res, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %d evidence records: %w", ErrAbandoned, len(recs), context.Cause(ctx))
	}
}

// ProduceAll writes recs (evidence, or reconciliation's checkpoints; what names them
// in errors) and returns every record's result once Kafka answered each: records not
// sent when ctx ends fail with ctx's error, records already sent are waited for, so
// the results are complete (reconciliation derives its read-your-writes barrier from
// them). The error names how many Kafka did not acknowledge and wraps the first
// failure's cause.
func ProduceAll(ctx context.Context, p Producer, what string, recs []*kgo.Record) (kgo.ProduceResults, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	results := p.ProduceSync(ctx, recs...)
	var (
		first  error
		failed int
	)
	for _, r := range results {
		if r.Err != nil {
			if failed == 0 {
				first = r.Err
			}
			failed++
		}
	}
	if failed == 0 {
		return results, nil
	}
	// One cause is enough (they share it); the count says how many failed.
	return results, fmt.Errorf("%d of %d %s records not acknowledged by Kafka: %w", failed, len(recs), what, first)
}
