package store

import (
	"context"
	"fmt"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// Progress is how far the pipeline has got for a set of workspaces, as the tables
// show it: evidence rows, the non-empty windows their eligible evidence implies, the
// state of each of those windows in one processor version's namespace, and entries.
// The demo and the end-to-end tests wait on it.
type Progress struct {
	Evidence int
	// Windows counts the non-empty windows: window-length buckets holding synthesis-
	// eligible, non-deleted evidence of a chat.
	Windows int
	// Completed, Ignored, Failed and NeedsAttention count those windows' states;
	// Exhausted is the part of Failed whose attempts reached maxAttempts (terminal).
	Completed, Ignored, Failed, Exhausted, NeedsAttention int
	// AIEntries counts entries written by synthesis; VisibleEntries every entry not
	// hidden; both of the version and the workspace's own (decisions D26).
	AIEntries, VisibleEntries int
}

// Progress reads the Progress of workspaces for windows of length window written by
// processorVersion (its source-key namespace, ids.WindowSourceKey) with maxAttempts
// whole-window attempts. One query; it reads the evidence of the workspaces, so it is
// meant for demos, tests and operators' spot checks, not a hot path.
func (s *Store) Progress(ctx context.Context, workspaces []ids.WorkspaceID, window time.Duration, processorVersion string, maxAttempts int) (Progress, error) {
	names := make([]string, len(workspaces))
	for i, w := range workspaces {
		if err := validWorkspace(w); err != nil {
			return Progress{}, err
		}
		names[i] = string(w)
	}
	if window <= 0 {
		return Progress{}, fmt.Errorf("%w: window %s", ErrInvalid, window)
	}
	// chat/<chat><namespace>/window/<start>, as ids.WindowSourceKey builds it
	namespace, version := "", processorVersion
	if version == "" {
		version = ids.DefaultProcessorVersion
	}
	if processorVersion != "" && processorVersion != ids.DefaultProcessorVersion {
		namespace = "/processor/" + processorVersion
	}
	var p Progress
	err := s.pool.QueryRow(ctx, `
		WITH w AS (
			SELECT DISTINCT workspace_id, chat_id,
			       to_timestamp(floor(extract(epoch FROM occurred_at) / $2) * $2) AS start
			FROM workspace_timeline_evidence
			WHERE workspace_id = ANY($1) AND synthesis_eligible AND NOT deleted AND chat_id IS NOT NULL
		)
		SELECT
			(SELECT count(*) FROM workspace_timeline_evidence WHERE workspace_id = ANY($1)),
			count(*),
			count(s.id) FILTER (WHERE s.status = 'completed'),
			count(s.id) FILTER (WHERE s.status = 'ignored'),
			count(s.id) FILTER (WHERE s.status = 'failed'),
			count(s.id) FILTER (WHERE s.status = 'failed' AND s.attempts >= $4),
			count(s.id) FILTER (WHERE s.status = 'needs_attention'),
			(SELECT count(*) FROM workspace_timeline_entries WHERE workspace_id = ANY($1) AND source = 'ai' AND processor_version IN ('', $7)),
			(SELECT count(*) FROM workspace_timeline_entries WHERE workspace_id = ANY($1) AND status <> 'hidden' AND processor_version IN ('', $7))
		FROM w LEFT JOIN workspace_timeline_sync_states s
		  ON s.workspace_id = w.workspace_id AND s.source = $5 AND s.source_type = $6
		 AND s.source_key = 'chat/' || w.chat_id || $3 || '/window/' || to_char(w.start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`,
		names, window.Seconds(), namespace, maxAttempts, ids.SourceSystem, ids.SourceTypeLarkWindow, version).
		Scan(&p.Evidence, &p.Windows, &p.Completed, &p.Ignored, &p.Failed, &p.Exhausted, &p.NeedsAttention, &p.AIEntries, &p.VisibleEntries)
	if err != nil {
		return Progress{}, fmt.Errorf("reading progress of %d workspaces: %w", len(names), err)
	}
	return p, nil
}
