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
	o := rt.opts.sink
	o.Store, o.Codecs, o.Logger, o.Registry = st, rt.codecs, rt.log, rt.reg
	s, err := pgsink.New(o)
	if err != nil {
		return nil, err
	}
	return []component{s}, nil
}
