package workspaces

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// Applier writes feed records to the workspace and binding tables. Each call is one
// transaction: it happens completely or not at all, so a crash between the database
// commit and the Kafka offset commit only makes the record apply again, which changes
// nothing the second time.
type Applier interface {
	// ApplyRecord stores w at feed version version and makes chats the exact set of
	// chats bound to it, unless the stored version is the same or newer (then it
	// changes nothing and reports store.WorkspaceIgnored).
	ApplyRecord(ctx context.Context, w store.Workspace, version int64, chats []ids.ChatID) (ApplyResult, error)
	// ApplyTombstone removes every binding of the workspace and marks it archived.
	ApplyTombstone(ctx context.Context, ws ids.WorkspaceID) (TombstoneResult, error)
}

// ApplyResult says what ApplyRecord did.
type ApplyResult struct {
	Outcome store.WorkspaceOutcome
	// Added and Removed count the bindings the record changed.
	Added, Removed int
}

// TombstoneResult says what ApplyTombstone did.
type TombstoneResult struct {
	// Found: the workspace existed. A tombstone of an unknown workspace changes nothing.
	Found bool
	// Archived: the status changed to archived (false when it already was).
	Archived bool
	// Removed counts the bindings removed.
	Removed int
}

// PGApplier is the Postgres Applier. The store has no operation that updates a
// workspace and replaces its bindings in one transaction, so PGApplier runs the two
// statements itself, on the store's pool and tables, under the store's invariants:
// the version rule of store.UpsertWorkspace (only a strictly newer version writes)
// and a NOTIFY on store.BindingsChannel for every chat whose bindings or bound
// workspace changed, sent in the same transaction.
type PGApplier struct {
	pool *pgxpool.Pool
}

// NewApplier returns the Postgres Applier over st's pool. The schema must be migrated.
func NewApplier(st *store.Store) (*PGApplier, error) {
	if st == nil || st.Pool() == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOptions)
	}
	return &PGApplier{pool: st.Pool()}, nil
}

var _ Applier = (*PGApplier)(nil)

// ApplyRecord implements Applier. It checks the workspace's id, type, status and
// creation time, the version and the chats (errors wrap ErrInvalid) but not whether
// the creation time lies in the future: that depends on a clock, and ValidateRecord,
// which the Consumer calls first, checks it.
func (a *PGApplier) ApplyRecord(ctx context.Context, w store.Workspace, version int64, chats []ids.ChatID) (ApplyResult, error) {
	if err := ValidateWorkspace(w, w.CreatedAt, 0); err != nil {
		return ApplyResult{}, err
	}
	if version < 1 {
		return ApplyResult{}, fieldErr("version", fmt.Sprintf("%d is not positive", version), nil)
	}
	if err := checkChats(chats); err != nil {
		return ApplyResult{}, err
	}
	want := make([]string, len(chats))
	for i, c := range chats {
		want[i] = string(c)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	res := ApplyResult{Outcome: store.WorkspaceIgnored}
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		var inserted bool
		err := tx.QueryRow(ctx, `INSERT INTO workspaces AS w (id, type, status, created_at, version)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (id) DO UPDATE SET type = excluded.type, status = excluded.status,
				created_at = excluded.created_at, version = excluded.version, updated_at = now()
			WHERE w.version < excluded.version
			RETURNING (xmax = 0)`, string(w.ID), w.Type, string(w.Status), w.CreatedAt, version).Scan(&inserted)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // the stored version is the same or newer
		}
		if err != nil {
			return err
		}
		res.Outcome = store.WorkspaceUpdated
		if inserted {
			res.Outcome = store.WorkspaceInserted
		}
		rows, err := tx.Query(ctx, `DELETE FROM workspace_chat_bindings
			WHERE workspace_id = $1 AND NOT (chat_id = ANY($2::text[])) RETURNING chat_id`, string(w.ID), want)
		if err != nil {
			return err
		}
		gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO workspace_chat_bindings (workspace_id, chat_id)
			SELECT $1, c FROM unnest($2::text[]) AS c ON CONFLICT DO NOTHING`, string(w.ID), want)
		if err != nil {
			return err
		}
		res.Added, res.Removed = int(tag.RowsAffected()), len(gone)
		// The workspace row changed (status, type, creation time): every chat bound to it
		// now, and every chat it lost, must re-resolve. Postgres delivers one notification
		// per distinct payload and channel per transaction.
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, c) FROM unnest($2::text[] || $3::text[]) AS c`,
			store.BindingsChannel, want, gone)
		return err
	})
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply workspace %s at version %d: %w", w.ID, version, err)
	}
	return res, nil
}

// ApplyTombstone implements Applier. The workspace row stays (archived, its version
// kept) so that its timeline remains readable and a late, older record of it is still
// recognised as older and ignored.
func (a *PGApplier) ApplyTombstone(ctx context.Context, ws ids.WorkspaceID) (TombstoneResult, error) {
	if _, err := ParseWorkspaceID(string(ws)); err != nil {
		return TombstoneResult{}, err
	}
	var res TombstoneResult
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM workspaces WHERE id = $1 FOR UPDATE`, string(ws)).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		res.Found = true
		rows, err := tx.Query(ctx, `DELETE FROM workspace_chat_bindings WHERE workspace_id = $1 RETURNING chat_id`, string(ws))
		if err != nil {
			return err
		}
		gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		res.Removed = len(gone)
		if store.WorkspaceStatus(status) != store.WorkspaceArchived {
			if _, err := tx.Exec(ctx, `UPDATE workspaces SET status = $2, updated_at = now() WHERE id = $1`,
				string(ws), string(store.WorkspaceArchived)); err != nil {
				return err
			}
			res.Archived = true
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, c) FROM unnest($2::text[]) AS c`, store.BindingsChannel, gone)
		return err
	})
	if err != nil {
		return TombstoneResult{}, fmt.Errorf("apply tombstone of workspace %s: %w", ws, err)
	}
	return res, nil
}
