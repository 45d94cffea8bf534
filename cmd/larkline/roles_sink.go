package main

import (
	"context"

	pgsink "github.com/larkline/larkline/connectors/postgres"
)

// buildSink runs the evidence sink: evidence topic → workspace_timeline_evidence.
func buildSink(ctx context.Context, rt *runtime) ([]component, error) {
	st, err := rt.store(ctx)
	if err != nil {
		return nil, err
	}
	t := rt.cfg.Kafka.Topics
	s, err := pgsink.New(pgsink.Options{
		Kafka: kafkaOptions(rt.cfg, "sink"), Group: groupName(rt.cfg, groupSink), EvidenceTopic: t.Evidence, DeadLetterTopic: t.DeadLetter,
		Store: st, Codecs: rt.codecs, Logger: rt.log, Registry: rt.reg,
	})
	if err != nil {
		return nil, err
	}
	return []component{s}, nil
}
