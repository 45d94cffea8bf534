package retention

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/schemas/ids"
)

// agedOutWorkspacesSQL lists, after $2, up to $3 workspaces that have chat collection
// checkpoints (lark/lark_messages) and are aged out at cutoff $1: no checkpoint of
// theirs was written or moved since the cutoff (updated_at, and the collected
// position last_seen_updated_at), and they hold no Lark message evidence at or after
// the cutoff (one probe of the evidence time index per workspace). Checkpoint rows
// are few (one per workspace and chat); the unique key (workspace_id, source,
// source_type, source_key) serves the grouping in workspace order.
const agedOutWorkspacesSQL = `
SELECT s.workspace_id
FROM workspace_timeline_sync_states s
WHERE s.source = 'lark' AND s.source_type = 'lark_messages' AND s.workspace_id > $2
GROUP BY s.workspace_id
HAVING bool_and(s.updated_at < $1 AND coalesce(s.last_seen_updated_at, '-infinity') < $1)
   AND NOT EXISTS (SELECT 1 FROM workspace_timeline_evidence e
                   WHERE e.workspace_id = s.workspace_id AND e.source = 'lark'
                     AND e.source_type = 'lark_message' AND e.occurred_at >= $1)
ORDER BY s.workspace_id
LIMIT $3`

// workspaceCheckpointsSQL pages through one workspace's checkpoints by id.
const workspaceCheckpointsSQL = `
SELECT id, source_key FROM workspace_timeline_sync_states
WHERE workspace_id = $1 AND source = 'lark' AND source_type = 'lark_messages' AND id > $2
ORDER BY id LIMIT $3`

// deleteCheckpointsSQL removes checkpoints, repeating every aged-out condition so that
// a checkpoint reconciliation moved, or a workspace that got evidence, since the
// listing is left alone.
const deleteCheckpointsSQL = `
DELETE FROM workspace_timeline_sync_states s
WHERE s.id = ANY($1::bigint[]) AND s.source = 'lark' AND s.source_type = 'lark_messages'
  AND s.updated_at < $2 AND coalesce(s.last_seen_updated_at, '-infinity') < $2
  AND NOT EXISTS (SELECT 1 FROM workspace_timeline_evidence e
                  WHERE e.workspace_id = s.workspace_id AND e.source = 'lark'
                    AND e.source_type = 'lark_message' AND e.occurred_at >= $2)`

// staleWindowsSQL pages by id through synthesis window states (every processor
// namespace) that have not changed since the cutoff. Window rows are bounded (at most
// one per chat and window that held evidence), so a pass over them by primary key is
// cheap.
const staleWindowsSQL = `
SELECT id, workspace_id, source_key FROM workspace_timeline_sync_states
WHERE source = 'system' AND source_type = 'lark_timeline_window' AND updated_at < $1 AND id > $2
ORDER BY id LIMIT $3`

// deleteWindowsSQL removes window states that are still unchanged since the cutoff.
const deleteWindowsSQL = `
DELETE FROM workspace_timeline_sync_states
WHERE id = ANY($1::bigint[]) AND source = 'system' AND source_type = 'lark_timeline_window' AND updated_at < $2`

// checkpoints removes the checkpoints of aged-out workspaces, each after a tombstone
// for its checkpoint-topic key.
func (r *run) checkpoints(ctx context.Context) (bool, error) {
	after := ""
	for {
		if ok, err := r.more(ctx); !ok {
			return false, err
		}
		qctx, cancel := r.queryCtx(ctx)
		rows, err := r.j.db.Query(qctx, agedOutWorkspacesSQL, r.cutoff, after, workspacesPage)
		var wss []string
		if err == nil {
			wss, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		cancel()
		if err != nil {
			return false, failed(reasonPostgres, fmt.Errorf("retention: listing aged-out workspaces: %w", err))
		}
		for _, ws := range wss {
			done, err := r.workspaceCheckpoints(ctx, ids.WorkspaceID(ws))
			if err != nil || !done {
				return false, err
			}
			r.rep.AgedOutWorkspaces++
		}
		if len(wss) < workspacesPage {
			return true, nil
		}
		after = wss[len(wss)-1]
	}
}

type stateRow struct {
	id        int64
	workspace string
	sourceKey string
}

func (r *run) workspaceCheckpoints(ctx context.Context, ws ids.WorkspaceID) (bool, error) {
	var after int64
	for {
		if ok, err := r.more(ctx); !ok {
			return false, err
		}
		qctx, cancel := r.queryCtx(ctx)
		rows, err := r.j.db.Query(qctx, workspaceCheckpointsSQL, string(ws), after, r.j.o.BatchSize)
		var batch []stateRow
		if err == nil {
			batch, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (stateRow, error) {
				s := stateRow{workspace: string(ws)}
				return s, row.Scan(&s.id, &s.sourceKey)
			})
		}
		cancel()
		if err != nil {
			return false, failed(reasonPostgres, fmt.Errorf("retention: reading checkpoints of workspace %s: %w", ws, err))
		}
		if len(batch) == 0 {
			return true, nil
		}
		rowIDs := make([]int64, 0, len(batch))
		recs := make([]*kgo.Record, 0, len(batch))
		now := time.Now()
		for _, s := range batch {
			rowIDs = append(rowIDs, s.id)
			chat, err := ids.ParseChatID(strings.TrimPrefix(s.sourceKey, "chat/"))
			if err != nil || s.sourceKey != ids.CheckpointSourceKey(chat) {
				r.j.log.Warn("checkpoint row has no valid chat key; removing it in Postgres only",
					"workspace", string(ws), "sync_state_id", s.id)
				continue
			}
			recs = append(recs, &kgo.Record{Topic: r.j.o.CheckpointTopic, Key: []byte(ids.ChatKey(ws, chat)), Timestamp: now})
		}
		if err := r.produce(ctx, recs); err != nil {
			return false, err
		}
		if r.dry {
			r.rep.CheckpointsRemoved += int64(len(rowIDs))
		} else {
			dctx, cancel := r.dbCtx(ctx)
			tag, err := r.j.db.Exec(dctx, deleteCheckpointsSQL, rowIDs, r.cutoff)
			cancel()
			if err != nil {
				return false, failed(reasonPostgres, fmt.Errorf("retention: removing %d checkpoints of workspace %s: %w", len(rowIDs), ws, err))
			}
			r.rep.CheckpointsRemoved += tag.RowsAffected()
			r.j.m.rows.WithLabelValues(actionCheckpointsRemoved).Add(float64(tag.RowsAffected()))
			r.j.log.Info("checkpoints of an aged-out workspace removed", "workspace", string(ws), "rows", tag.RowsAffected())
		}
		after = batch[len(batch)-1].id
		if len(batch) < r.j.o.BatchSize {
			return true, nil
		}
	}
}

// windows removes synthesis window states unchanged since the cutoff. They live in
// Postgres only: nothing is published.
func (r *run) windows(ctx context.Context) (bool, error) {
	var after int64
	for {
		if ok, err := r.more(ctx); !ok {
			return false, err
		}
		qctx, cancel := r.queryCtx(ctx)
		rows, err := r.j.db.Query(qctx, staleWindowsSQL, r.cutoff, after, r.j.o.BatchSize)
		var batch []stateRow
		if err == nil {
			batch, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (stateRow, error) {
				var s stateRow
				return s, row.Scan(&s.id, &s.workspace, &s.sourceKey)
			})
		}
		cancel()
		if err != nil {
			return false, failed(reasonPostgres, fmt.Errorf("retention: reading stale window states: %w", err))
		}
		if len(batch) == 0 {
			return true, nil
		}
		rowIDs := make([]int64, len(batch))
		for i, s := range batch {
			rowIDs[i] = s.id
		}
		if r.dry {
			r.rep.WindowsRemoved += int64(len(rowIDs))
		} else {
			dctx, cancel := r.dbCtx(ctx)
			tag, err := r.j.db.Exec(dctx, deleteWindowsSQL, rowIDs, r.cutoff)
			cancel()
			if err != nil {
				return false, failed(reasonPostgres, fmt.Errorf("retention: removing %d window states: %w", len(rowIDs), err))
			}
			r.rep.WindowsRemoved += tag.RowsAffected()
			r.j.m.rows.WithLabelValues(actionWindowsRemoved).Add(float64(tag.RowsAffected()))
		}
		after = batch[len(batch)-1].id
		if len(batch) < r.j.o.BatchSize {
			return true, nil
		}
	}
}
