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
	// ProcessorVersion is the version whose synthesis wrote an AI summary; "" for a
	// human's, which is the workspace's and shown whatever version serves.
	ProcessorVersion string
	Source           EntrySource
	Text             string
	UpdatedAt        time.Time
	// AIMetadata records how an AI summary was made (empty object for human ones).
	AIMetadata json.RawMessage
	// RefreshDueAt is set when a recall withdrew an AI draft of the workspace: the AI
	// summary's text was emptied with it (it may have been derived from the draft), and
	// the next completed window summarizes again whether or not it changed anything
	// (decisions D12). Writing a summary clears it.
	RefreshDueAt *time.Time
}

// GetSummary returns the summary users see: the workspace's human summary if it has
// one, else the serving version's AI summary; ErrNotFound when there is neither.
func (s *Store) GetSummary(ctx context.Context, ws ids.WorkspaceID) (Summary, error) {
	return s.VersionSummary(ctx, ws, "")
}

// VersionSummary is GetSummary in the view of one processor version ("" the serving
// one): a human summary, else the version's own.
func (s *Store) VersionSummary(ctx context.Context, ws ids.WorkspaceID, version string) (Summary, error) {
	if err := validWorkspace(ws); err != nil {
		return Summary{}, err
	}
	if version != "" {
		if _, err := versionName(version); err != nil {
			return Summary{}, err
		}
	}
	sum, err := scanSummary(s.pool.QueryRow(ctx, versionSummarySQL, string(ws), version), ws)
	if err != nil {
		return Summary{}, fmt.Errorf("get summary of workspace %s: %w", ws, err)
	}
	return sum, nil
}

// versionSummarySQL reads the summary of workspace $1 in the view of version $2.
const versionSummarySQL = `SELECT processor_version, source, text, updated_at, ai_metadata, refresh_due_at
	FROM workspace_timeline_summaries
	WHERE workspace_id = $1 AND (processor_version = '' OR processor_version = coalesce(nullif($2::text, ''),
		(SELECT pv.name FROM processor_versions pv WHERE pv.state = 'serving')))
	ORDER BY processor_version = '' DESC LIMIT 1`

// scanSummary scans versionSummarySQL's row; ErrNotFound when there is none.
func scanSummary(row pgx.Row, ws ids.WorkspaceID) (Summary, error) {
	var (
		sum Summary
		src string
	)
	err := row.Scan(&sum.ProcessorVersion, &src, &sum.Text, &sum.UpdatedAt, rawJSON(&sum.AIMetadata), &sum.RefreshDueAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Summary{}, ErrNotFound
	}
	if err != nil {
		return Summary{}, err
	}
	sum.Workspace, sum.Source, sum.UpdatedAt = ws, EntrySource(src), sum.UpdatedAt.UTC()
	if sum.RefreshDueAt != nil {
		t := sum.RefreshDueAt.UTC()
		sum.RefreshDueAt = &t
	}
	return sum, nil
}

// SummaryInput is what a processor version's next summary of a workspace is made
// from (design §13).
type SummaryInput struct {
	// Summary is VersionSummary's answer; Found is false when there is none.
	Summary Summary
	Found   bool
	// Entries is VersionVisibleEntries' answer, when it was asked for.
	Entries []Entry
}

// VersionSummaryInput reads VersionSummary and, when entries is set,
// VersionVisibleEntries of the workspace in one pipelined round trip (issue 35), for
// a summarizer that needs both. The two reads are not one snapshot: each statement
// sees what was committed when it ran, as the two calls would. More than
// MaxVisibleEntries visible entries give ErrTooMany.
func (s *Store) VersionSummaryInput(ctx context.Context, ws ids.WorkspaceID, version string, entries bool) (SummaryInput, error) {
	if err := validWorkspace(ws); err != nil {
		return SummaryInput{}, err
	}
	if version != "" {
		if _, err := versionName(version); err != nil {
			return SummaryInput{}, err
		}
	}
	var in SummaryInput
	b := &pgx.Batch{}
	b.Queue(versionSummarySQL, string(ws), version).QueryRow(func(row pgx.Row) error {
		var err error
		in.Summary, err = scanSummary(row, ws)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		in.Found = err == nil
		return err
	})
	if entries {
		sql, args := entriesQuery(ws, version, nil, false, MaxVisibleEntries+1)
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			var err error
			in.Entries, err = pgx.CollectRows(rows, scanEntry)
			return err
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return SummaryInput{}, fmt.Errorf("read the summary input of workspace %s: %w", ws, err)
	}
	if len(in.Entries) > MaxVisibleEntries {
		return SummaryInput{}, fmt.Errorf("read the summary input of workspace %s: %w: more than %d visible entries", ws, ErrTooMany, MaxVisibleEntries)
	}
	return in, nil
}

// PutHumanSummary stores a human's summary; from then on AI never overwrites it.
func (s *Store) PutHumanSummary(ctx context.Context, ws ids.WorkspaceID, text string) error {
	if err := validWorkspace(ws); err != nil {
		return err
	}
	if err := checkText("summary", text, MaxSummaryBytes, false); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO workspace_timeline_summaries (workspace_id, processor_version, source, text, ai_metadata)
		VALUES ($1, '', 'human', $2, '{}')
		ON CONFLICT (workspace_id, processor_version) DO UPDATE SET source = 'human', text = excluded.text,
			ai_metadata = '{}', updated_at = now(), refresh_due_at = NULL`, string(ws), text); err != nil {
		return fmt.Errorf("put human summary of workspace %s: %w", ws, err)
	}
	return nil
}

// PutAISummaryIfNotHuman is PutAISummary of the default processor version.
func (s *Store) PutAISummaryIfNotHuman(ctx context.Context, ws ids.WorkspaceID, text string, meta json.RawMessage) (written bool, err error) {
	return s.PutAISummary(ctx, ws, ids.DefaultProcessorVersion, text, meta)
}

// PutAISummary stores a processor version's AI summary unless the workspace has a
// human summary, in one statement. written is false when a human summary was kept or
// the version is retired. A candidate's summary is its own row: it never replaces
// what users see (decisions D26).
func (s *Store) PutAISummary(ctx context.Context, ws ids.WorkspaceID, version, text string, meta json.RawMessage) (written bool, err error) {
	if err := validWorkspace(ws); err != nil {
		return false, err
	}
	version, err = versionName(version)
	if err != nil {
		return false, err
	}
	if err := checkText("summary", text, MaxSummaryBytes, false); err != nil {
		return false, err
	}
	if err := checkJSONObject("ai_metadata", meta, MaxAIMetadataBytes); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO workspace_timeline_summaries AS sm (workspace_id, processor_version, source, text, ai_metadata)
		SELECT $1, $4, 'ai', $2, $3::jsonb
		WHERE NOT EXISTS (SELECT 1 FROM workspace_timeline_summaries h WHERE h.workspace_id = $1 AND h.processor_version = '')
		  AND NOT EXISTS (SELECT 1 FROM processor_versions pv WHERE pv.name = $4 AND pv.state = 'retired')
		ON CONFLICT (workspace_id, processor_version) DO UPDATE SET text = excluded.text, ai_metadata = excluded.ai_metadata,
			updated_at = now(), refresh_due_at = NULL`, string(ws), text, jsonObject(meta), version)
	if err != nil {
		return false, fmt.Errorf("put AI summary of workspace %s, version %s: %w", ws, version, err)
	}
	return tag.RowsAffected() == 1, nil
}
