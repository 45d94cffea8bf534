package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/schemas/ids"
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
	// RefreshDueAt is set when a recall withdrew an AI draft of the workspace: the AI
	// summary's text was emptied with it (it may have been derived from the draft), and
	// the next completed window summarizes again whether or not it changed anything
	// (decisions D12). Writing a summary clears it.
	RefreshDueAt *time.Time
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
	err := s.pool.QueryRow(ctx, `SELECT source, text, updated_at, ai_metadata, refresh_due_at
		FROM workspace_timeline_summaries WHERE workspace_id = $1`, string(ws)).
		Scan(&src, &sum.Text, &sum.UpdatedAt, &sum.AIMetadata, &sum.RefreshDueAt)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Summary{}, fmt.Errorf("get summary of workspace %s: %w", ws, err)
	}
	sum.Workspace, sum.Source, sum.UpdatedAt = ws, EntrySource(src), sum.UpdatedAt.UTC()
	if sum.RefreshDueAt != nil {
		t := sum.RefreshDueAt.UTC()
		sum.RefreshDueAt = &t
	}
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
			ai_metadata = '{}', updated_at = now(), refresh_due_at = NULL`, string(ws), text); err != nil {
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
		ON CONFLICT (workspace_id) DO UPDATE SET text = excluded.text, ai_metadata = excluded.ai_metadata, updated_at = now(),
			refresh_due_at = NULL
		WHERE sm.source <> 'human'`, string(ws), text, jsonObject(meta))
	if err != nil {
		return false, fmt.Errorf("put AI summary of workspace %s: %w", ws, err)
	}
	return tag.RowsAffected() == 1, nil
}
