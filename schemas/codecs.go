package schemas

import (
	"context"
	"errors"
	"fmt"
)

// Topics names the topic of every record type; a zero field takes the default topic.
// The topic decides the registry subject (<topic>-value) in the Confluent format.
type Topics struct {
	Evidence, ClosedWindow, Checkpoint, Workspace, DeadLetter string
}

// Codecs bundles one codec per record type, built with the same options, so that a
// process configures its wire format once.
type Codecs struct {
	Evidence     *Codec[EvidenceRecord]
	ClosedWindow *Codec[ClosedWindow]
	Checkpoint   *Codec[CollectionCheckpoint]
	Workspace    *Codec[WorkspaceRecord]
	DeadLetter   *Codec[DeadLetter]
}

// NewCodecs builds every codec with opts plus the topic of its record type.
func NewCodecs(t Topics, opts ...Option) (*Codecs, error) {
	with := func(topic, def string) []Option {
		if topic == "" {
			topic = def
		}
		return append(append([]Option(nil), opts...), WithTopic(topic))
	}
	var (
		c   Codecs
		err error
	)
	if c.Evidence, err = NewEvidenceCodec(with(t.Evidence, DefaultEvidenceTopic)...); err != nil {
		return nil, fmt.Errorf("schemas: evidence codec: %w", err)
	}
	if c.ClosedWindow, err = NewClosedWindowCodec(with(t.ClosedWindow, DefaultClosedWindowTopic)...); err != nil {
		return nil, fmt.Errorf("schemas: closed-window codec: %w", err)
	}
	if c.Checkpoint, err = NewCheckpointCodec(with(t.Checkpoint, DefaultCheckpointTopic)...); err != nil {
		return nil, fmt.Errorf("schemas: checkpoint codec: %w", err)
	}
	if c.Workspace, err = NewWorkspaceCodec(with(t.Workspace, DefaultWorkspaceTopic)...); err != nil {
		return nil, fmt.Errorf("schemas: workspace codec: %w", err)
	}
	if c.DeadLetter, err = NewDeadLetterCodec(with(t.DeadLetter, DefaultDeadLetterTopic)...); err != nil {
		return nil, fmt.Errorf("schemas: dead-letter codec: %w", err)
	}
	return &c, nil
}

// SubjectSchema is one codec's registry subject and the schema it writes.
type SubjectSchema struct {
	// Record is the full Avro name of the record type.
	Record string
	// Subject is <topic>-value.
	Subject string
	// Schema is the schema text as registered.
	Schema string
}

// Subjects returns every codec's subject and schema, in a fixed order.
func (c *Codecs) Subjects() []SubjectSchema {
	return []SubjectSchema{c.Evidence.subjectSchema(), c.ClosedWindow.subjectSchema(),
		c.Checkpoint.subjectSchema(), c.Workspace.subjectSchema(), c.DeadLetter.subjectSchema()}
}

func (c *Codec[T]) subjectSchema() SubjectSchema {
	return SubjectSchema{Record: c.rt.name, Subject: c.subject, Schema: c.registryText()}
}

// Prepare resolves every codec's schema id now, at start: it registers the schemas,
// or with the registry's AutoRegister off only looks them up, so that a missing
// schema (ErrSchemaNotRegistered, naming the subject), a refused one or an
// unreachable registry stops the process before it consumes or produces anything.
// Without a registry it does nothing.
func (c *Codecs) Prepare(ctx context.Context) error {
	if c.Evidence.registry == nil {
		return nil
	}
	return errors.Join(
		prepare(ctx, c.Evidence), prepare(ctx, c.ClosedWindow), prepare(ctx, c.Checkpoint),
		prepare(ctx, c.Workspace), prepare(ctx, c.DeadLetter))
}

func prepare[T any](ctx context.Context, c *Codec[T]) error {
	_, err := c.Register(ctx)
	return err
}
