package schemas

import "fmt"

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
