package workspaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// PublisherOptions configure a Publisher. Zero values take the documented defaults.
type PublisherOptions struct {
	// Kafka configures the producer. Producer.Acks must be all (the default), and
	// idempotence stays on: a published workspace is acknowledged by every in-sync
	// replica.
	Kafka kafka.Options
	// Topic is the workspace topic. Default schemas.DefaultWorkspaceTopic.
	Topic string
	// Codec encodes records. Required (schemas.Codecs.Workspace).
	Codec *schemas.Codec[schemas.WorkspaceRecord]
	// ClockSkew is how far in the future created_at may be. Default DefaultClockSkew.
	ClockSkew time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives ids and versions only. Nil discards.
	Logger *slog.Logger
	// Registry receives larkline_workspaces_published_total. Nil registers nothing.
	Registry *prometheus.Registry
}

// Publisher writes workspace records to the feed, for `larkline workspaces publish`
// and for ticket systems' scripts. It is safe for concurrent use.
type Publisher struct {
	opts PublisherOptions
	cl   *kgo.Client
	log  *slog.Logger
	m    *publishMetrics

	mu     sync.RWMutex
	closed bool
}

// Published locates an acknowledged record.
type Published struct {
	Topic     string
	Partition int32
	Offset    int64
}

// NewPublisher validates opts and creates the Kafka client.
func NewPublisher(opts PublisherOptions) (*Publisher, error) {
	var problems []error
	opts.Topic = cmp.Or(opts.Topic, schemas.DefaultWorkspaceTopic)
	if opts.Codec == nil {
		problems = append(problems, errors.New("codec is required"))
	}
	opts.ClockSkew = cmp.Or(opts.ClockSkew, DefaultClockSkew)
	if opts.ClockSkew < 0 {
		problems = append(problems, fmt.Errorf("clock skew %s is negative", opts.ClockSkew))
	}
	k := opts.Kafka.WithDefaults()
	if k.Producer.Acks != kafka.AcksAll || k.Producer.DisableIdempotence {
		problems = append(problems, fmt.Errorf("kafka producer acks %q, idempotence disabled %t: the workspace feed is written with acks=all by an idempotent producer",
			k.Producer.Acks, k.Producer.DisableIdempotence))
	}
	kopts, err := kafka.NewClientOptions(opts.Kafka)
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: workspace publisher: %w", ErrInvalidOptions, errors.Join(problems...))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newPublishMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(kopts, kgo.DefaultProduceTopic(opts.Topic))...)
	if err != nil {
		return nil, fmt.Errorf("workspace publisher: create kafka client: %w", err)
	}
	return &Publisher{opts: opts, cl: cl, log: opts.Logger.With("component", "workspace_publisher", "topic", opts.Topic), m: m}, nil
}

// Publish validates rec (ValidateRecord) and produces it keyed by its workspace id,
// returning once every in-sync replica acknowledged it. A zero UpdatedAt is set to
// the current time. Invalid input returns an error wrapping ErrInvalid and produces
// nothing; IsRetryable tells whether a Kafka failure is worth another attempt (the
// feed is idempotent, so publishing the same version twice is harmless).
func (p *Publisher) Publish(ctx context.Context, rec schemas.WorkspaceRecord) (Published, error) {
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = p.opts.Now().UTC()
	}
	if err := ValidateRecord(&rec, p.opts.Now(), p.opts.ClockSkew); err != nil {
		p.m.published.WithLabelValues(resultInvalid).Inc()
		return Published{}, fmt.Errorf("publish workspace %.140q: %w", rec.ID, err)
	}
	b, err := p.opts.Codec.Encode(ctx, rec)
	if err != nil {
		result := resultError
		if errors.Is(err, schemas.ErrInvalidRecord) {
			result, err = resultInvalid, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		p.m.published.WithLabelValues(result).Inc()
		return Published{}, fmt.Errorf("publish workspace %s version %d: encode: %w", rec.ID, rec.Version, err)
	}
	out, err := p.produce(ctx, rec.Key(), b)
	if err != nil {
		return Published{}, fmt.Errorf("publish workspace %s version %d: %w", rec.ID, rec.Version, err)
	}
	p.log.Info("workspace published", "workspace_id", string(rec.ID), "version", rec.Version, "status", rec.Status,
		"chats", len(rec.Chats), "partition", out.Partition, "offset", out.Offset)
	return out, nil
}

// PublishTombstone produces a tombstone (a null value) for the workspace: a ticket
// system deleted it. The feed consumer removes its bindings and archives it, and
// compaction eventually removes its records from the topic.
func (p *Publisher) PublishTombstone(ctx context.Context, ws ids.WorkspaceID) (Published, error) {
	if _, err := ParseWorkspaceID(string(ws)); err != nil {
		p.m.published.WithLabelValues(resultInvalid).Inc()
		return Published{}, fmt.Errorf("publish tombstone: %w", err)
	}
	out, err := p.produce(ctx, string(ws), nil)
	if err != nil {
		return Published{}, fmt.Errorf("publish tombstone of workspace %s: %w", ws, err)
	}
	p.log.Info("workspace tombstone published", "workspace_id", string(ws), "partition", out.Partition, "offset", out.Offset)
	return out, nil
}

func (p *Publisher) produce(ctx context.Context, key string, value []byte) (Published, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return Published{}, ErrClosed
	}
	r := &kgo.Record{Topic: p.opts.Topic, Key: []byte(key), Value: value}
	if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		p.m.published.WithLabelValues(resultError).Inc()
		return Published{}, fmt.Errorf("produce to %s: %w", p.opts.Topic, err)
	}
	p.m.published.WithLabelValues(resultOK).Inc()
	return Published{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, nil
}

// Close waits for Publish calls in flight and closes the client. Later calls return
// ErrClosed.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.cl.Close()
	}
	return nil
}
