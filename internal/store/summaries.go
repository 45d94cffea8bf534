package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/internal/ids"
)

// MaxSummaryBytes bounds a workspace summary.
const MaxSummaryBytes = 64 << 10

// Summary is a workspace's timeline summary (design §13).
type Summary struct {
	Workspace ids.WorkspaceID
	Source    EntrySource
	Text      string
	UpdatedAt time.Time
	// AIMetadata records how an AI summary was made (empty object for human ones).
	AIMetadata json.RawMessage
}

// GetSummary returns the workspace's summary, or ErrNotFound.
func (s *Store) GetSummary(ctx context.Context, ws ids.WorkspaceID) (Summary, error) {
	if err := validWorkspace(ws); err != nil {
		return Summary{}, err
	}
	var (
		sum Summary
		src string
	)
	err := s.pool.QueryRow(ctx, `SELECT source, text, updated_at, ai_metadata
		FROM workspace_timeline_summaries WHERE workspace_id = $1`, string(ws)).
		Scan(&src, &sum.Text, &sum.UpdatedAt, &sum.AIMetadata)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Summary{}, fmt.Errorf("get summary of workspace %s: %w", ws, err)
	}
	sum.Workspace, sum.Source, sum.UpdatedAt = ws, EntrySource(src), sum.UpdatedAt.UTC()
	return sum, nil
}

// PutHumanSummary stores a human's summary; from then on AI never overwrites it.
func (s *Store) PutHumanSummary(ctx context.Context, ws ids.WorkspaceID, text string) error {
	if err := validWorkspace(ws); err != nil {
		return err
	}
	if err := checkText("summary", text, MaxSummaryBytes, false); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO workspace_timeline_summaries (workspace_id, source, text, ai_metadata)
		VALUES ($1, 'human', $2, '{}')
		ON CONFLICT (workspace_id) DO UPDATE SET source = 'human', text = excluded.text,
			ai_metadata = '{}', updated_at = now()`, string(ws), text); err != nil {
		return fmt.Errorf("put human summary of workspace %s: %w", ws, err)
	}
	return nil
}

// PutAISummaryIfNotHuman stores an AI summary unless the workspace's summary is
// source=human, in one statement (no window between check and write). written is false
// when a human summary was kept.
func (s *Store) PutAISummaryIfNotHuman(ctx context.Context, ws ids.WorkspaceID, text string, meta json.RawMessage) (written bool, err error) {
	if err := validWorkspace(ws); err != nil {
		return false, err
	}
	if err := checkText("summary", text, MaxSummaryBytes, false); err != nil {
		return false, err
	}
	if err := checkJSONObject("ai_metadata", meta, MaxAIMetadataBytes); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO workspace_timeline_summaries AS sm (workspace_id, source, text, ai_metadata)
		VALUES ($1, 'ai', $2, $3::jsonb)
		ON CONFLICT (workspace_id) DO UPDATE SET text = excluded.text, ai_metadata = excluded.ai_metadata, updated_at = now()
		WHERE sm.source <> 'human'`, string(ws), text, jsonObject(meta))
	if err != nil {
		return false, fmt.Errorf("put AI summary of workspace %s: %w", ws, err)
	}
	return tag.RowsAffected() == 1, nil
}
