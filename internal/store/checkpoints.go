package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/schemas/ids"
)

// CheckpointPosition is how far a chat's history has been collected and committed
// (design §8.2): the highest message creation time, with the message id breaking ties
// between messages of the same millisecond. MessageID may be empty ("covered through
// Time, no message at Time").
type CheckpointPosition struct {
	Time      time.Time
	MessageID ids.MessageID
}

// Compare orders positions by time, then message id; it returns -1, 0 or +1.
func (p CheckpointPosition) Compare(o CheckpointPosition) int {
	if c := p.Time.Compare(o.Time); c != 0 {
		return c
	}
	return strings.Compare(string(p.MessageID), string(o.MessageID))
}

// CheckpointMeta is the checkpoint's metadata_json.
type CheckpointMeta struct {
	// ReconcileVersion names the reconciler's algorithm that wrote the checkpoint.
	ReconcileVersion string `json:"reconcile_version,omitempty"`
	// LastFullScanAt is when the last larger edit/delete refresh scan finished.
	LastFullScanAt *time.Time `json:"last_full_scan_at,omitempty"`
	// Error holds bounded diagnostics (MaxDiagnosticBytes) of the last failure.
	Error string `json:"error,omitempty"`
	// RefusedThreads are threads whose replies Lark refused to list (a thread deleted,
	// or not visible to the bot) while the checkpoint moved past them; reconciliation
	// reads them again on later runs, a bounded number of times (issue #19). At most
	// MaxRefusedThreads.
	RefusedThreads []RefusedThread `json:"refused_threads,omitempty"`
}

// MaxRefusedThreads bounds CheckpointMeta.RefusedThreads.
const MaxRefusedThreads = 100

// RefusedThread is a thread a reconciliation run could not read.
type RefusedThread struct {
	ID string `json:"id"`
	// From is the earliest message time the refusals left unread: a retry reads the
	// thread's replies from there.
	From time.Time `json:"from"`
	// Attempts counts the refusals so far; NextAt is when a run may try again.
	Attempts int       `json:"attempts"`
	NextAt   time.Time `json:"next_at"`
}

// Checkpoint is a chat collection checkpoint: one sync-state row per workspace and chat
// (source lark, source_type lark_messages, source_key chat/<chat>).
type Checkpoint struct {
	ID        int64
	Workspace ids.WorkspaceID
	Chat      ids.ChatID
	Position  CheckpointPosition
	Meta      CheckpointMeta
	CreatedAt time.Time
	UpdatedAt time.Time
}

// The cursor column holds "<create_time_ms>:<message_id>", the durable high-water mark
// of design §8.2; last_seen_updated_at holds the same time at full precision.
func checkpointCursor(p CheckpointPosition) string {
	return strconv.FormatInt(p.Time.UnixMilli(), 10) + ":" + string(p.MessageID)
}

const checkpointColumns = `id, workspace_id, source_key, last_seen_updated_at, last_seen_cursor, metadata_json, created_at, updated_at`

func scanCheckpoint(row pgx.CollectableRow) (Checkpoint, error) {
	var (
		c       Checkpoint
		ws, key string
		at      *time.Time
		cursor  string
		meta    []byte
	)
	if err := row.Scan(&c.ID, &ws, &key, &at, &cursor, &meta, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return c, err
	}
	c.Workspace, c.Chat = ids.WorkspaceID(ws), ids.ChatID(strings.TrimPrefix(key, "chat/"))
	if at != nil {
		c.Position.Time = at.UTC()
	}
	if _, msg, ok := strings.Cut(cursor, ":"); ok {
		c.Position.MessageID = ids.MessageID(msg)
	}
	if err := json.Unmarshal(meta, &c.Meta); err != nil {
		return c, fmt.Errorf("checkpoint %d: metadata_json: %w", c.ID, err)
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c, nil
}

func getCheckpoint(ctx context.Context, q querier, ws ids.WorkspaceID, chat ids.ChatID, lock bool) (Checkpoint, error) {
	sql := `SELECT ` + checkpointColumns + ` FROM workspace_timeline_sync_states
		WHERE workspace_id = $1 AND source = $2 AND source_type = $3 AND source_key = $4`
	if lock {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, string(ws), ids.SourceLark, ids.SourceTypeLarkMessages, ids.CheckpointSourceKey(chat))
	if err != nil {
		return Checkpoint{}, err
	}
	c, err := pgx.CollectExactlyOneRow(rows, scanCheckpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return Checkpoint{}, ErrNotFound
	}
	return c, err
}

// GetCheckpoint returns a chat's collection checkpoint, or ErrNotFound before the first
// AdvanceCheckpoint.
func (s *Store) GetCheckpoint(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (Checkpoint, error) {
	if err := validWorkspace(ws); err != nil {
		return Checkpoint{}, err
	}
	if err := validChat(chat); err != nil {
		return Checkpoint{}, err
	}
	c, err := getCheckpoint(ctx, s.pool, ws, chat, false)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("get checkpoint of workspace %s chat %s: %w", ws, chat, err)
	}
	return c, nil
}

// AdvanceCheckpoint records that a chat's history is committed through pos. The
// checkpoint never moves backwards: a position behind the stored one changes nothing
// (advanced false, the stored checkpoint returned); the same position only replaces the
// metadata; a later one replaces both. Call it only after every page up to pos was
// committed (design §8.2, §16).
func (s *Store) AdvanceCheckpoint(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID, pos CheckpointPosition, meta CheckpointMeta) (cp Checkpoint, advanced bool, err error) {
	if err := validWorkspace(ws); err != nil {
		return Checkpoint{}, false, err
	}
	if err := validChat(chat); err != nil {
		return Checkpoint{}, false, err
	}
	if pos.Time.IsZero() {
		return Checkpoint{}, false, fmt.Errorf("%w: checkpoint time is zero", ErrInvalid)
	}
	if pos.MessageID != "" {
		if _, err := ids.ParseMessageID(string(pos.MessageID)); err != nil {
			return Checkpoint{}, false, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if err := checkText("reconcile version", meta.ReconcileVersion, 64, false); err != nil {
		return Checkpoint{}, false, err
	}
	meta.Error = truncateUTF8(meta.Error, MaxDiagnosticBytes)
	if err := checkText("checkpoint error", meta.Error, MaxDiagnosticBytes, false); err != nil {
		return Checkpoint{}, false, err
	}
	if len(meta.RefusedThreads) > MaxRefusedThreads {
		return Checkpoint{}, false, fmt.Errorf("%w: %d refused threads > %d", ErrInvalid, len(meta.RefusedThreads), MaxRefusedThreads)
	}
	for _, th := range meta.RefusedThreads {
		if err := checkText("refused thread id", th.ID, 128, true); err != nil {
			return Checkpoint{}, false, err
		}
	}
	pos.Time = pos.Time.UTC().Truncate(time.Microsecond) // what the column keeps
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("encode checkpoint metadata: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO workspace_timeline_sync_states
				(workspace_id, source, source_type, source_key, last_seen_updated_at, last_seen_cursor, metadata_json)
			VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)
			ON CONFLICT (workspace_id, source, source_type, source_key) DO NOTHING
			RETURNING `+checkpointColumns,
			string(ws), ids.SourceLark, ids.SourceTypeLarkMessages, ids.CheckpointSourceKey(chat),
			pos.Time, checkpointCursor(pos), string(metaJSON))
		if err != nil {
			return err
		}
		cp, err = pgx.CollectExactlyOneRow(rows, scanCheckpoint)
		if err == nil {
			advanced = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if cp, err = getCheckpoint(ctx, tx, ws, chat, true); err != nil {
			return err
		}
		cmp := pos.Compare(cp.Position)
		if cmp < 0 {
			return nil
		}
		rows, err = tx.Query(ctx, `UPDATE workspace_timeline_sync_states
			SET last_seen_updated_at = $2, last_seen_cursor = $3, metadata_json = $4::jsonb, updated_at = now()
			WHERE id = $1 RETURNING `+checkpointColumns, cp.ID, pos.Time, checkpointCursor(pos), string(metaJSON))
		if err != nil {
			return err
		}
		cp, err = pgx.CollectExactlyOneRow(rows, scanCheckpoint)
		advanced = cmp > 0
		return err
	})
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("advance checkpoint of workspace %s chat %s: %w", ws, chat, err)
	}
	return cp, advanced, nil
}
