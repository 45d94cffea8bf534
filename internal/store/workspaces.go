package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/larkline/larkline/schemas/ids"
)

// BindingsChannel is the Postgres NOTIFY channel on which every change of a chat binding
// or of a bound workspace is announced, with the chat id as payload, in the transaction
// that made the change. Caches of bindings invalidate on it (ListenBindings).
const BindingsChannel = "larkline_bindings"

// WorkspaceStatus is an incident's status in the ticket system.
type WorkspaceStatus string

// Workspace statuses. Only firing workspaces ingest automatically (design §6).
const (
	WorkspaceFiring    WorkspaceStatus = "firing"
	WorkspaceRecovered WorkspaceStatus = "recovered"
	WorkspaceArchived  WorkspaceStatus = "archived"
)

func (s WorkspaceStatus) valid() bool {
	return s == WorkspaceFiring || s == WorkspaceRecovered || s == WorkspaceArchived
}

// MaxWorkspaceTypeLen bounds Workspace.Type.
const MaxWorkspaceTypeLen = 64

// Workspace is an incident workspace.
type Workspace struct {
	ID        ids.WorkspaceID
	Type      string
	Status    WorkspaceStatus
	CreatedAt time.Time
	// UpdatedAt is when the store last changed the row; ignored on write.
	UpdatedAt time.Time
	// Version is the feed version of the stored row; ignored on write (see UpsertWorkspace).
	Version int64
}

func (w *Workspace) validate() error {
	if err := validWorkspace(w.ID); err != nil {
		return err
	}
	if err := checkText("workspace type", w.Type, MaxWorkspaceTypeLen, true); err != nil {
		return err
	}
	if !w.Status.valid() {
		return fmt.Errorf("%w: workspace status %q", ErrInvalid, w.Status)
	}
	if w.CreatedAt.IsZero() {
		return fmt.Errorf("%w: workspace created_at is zero", ErrInvalid)
	}
	return nil
}

// WorkspaceOutcome says what UpsertWorkspace did.
type WorkspaceOutcome uint8

// Workspace upsert outcomes.
const (
	WorkspaceInserted WorkspaceOutcome = iota + 1
	WorkspaceUpdated
	// WorkspaceIgnored: the stored version is the same or newer; nothing changed.
	WorkspaceIgnored
)

func (o WorkspaceOutcome) String() string {
	switch o {
	case WorkspaceInserted:
		return "inserted"
	case WorkspaceUpdated:
		return "updated"
	case WorkspaceIgnored:
		return "ignored"
	}
	return fmt.Sprintf("WorkspaceOutcome(%d)", uint8(o))
}

// notifyWorkspaceChats announces every chat bound to ws.
func notifyWorkspaceChats(ctx context.Context, q querier, ws ids.WorkspaceID) error {
	_, err := q.Exec(ctx, `SELECT pg_notify($1, chat_id) FROM workspace_chat_bindings WHERE workspace_id = $2`,
		BindingsChannel, string(ws))
	return err
}

func notifyChats(ctx context.Context, q querier, chats []string) error {
	if len(chats) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `SELECT pg_notify($1, c) FROM unnest($2::text[]) AS c`, BindingsChannel, chats)
	return err
}

// UpsertWorkspace stores w at feed version version. A version not newer than the stored
// one changes nothing (WorkspaceIgnored), so a late, older feed message never overwrites
// a newer state. A change notifies the workspace's chats on BindingsChannel.
func (s *Store) UpsertWorkspace(ctx context.Context, w Workspace, version int64) (WorkspaceOutcome, error) {
	if err := w.validate(); err != nil {
		return 0, err
	}
	if version < 0 {
		return 0, fmt.Errorf("%w: workspace version %d < 0", ErrInvalid, version)
	}
	outcome := WorkspaceIgnored
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var inserted bool
		err := tx.QueryRow(ctx, `INSERT INTO workspaces AS w (id, type, status, created_at, version)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (id) DO UPDATE SET type = excluded.type, status = excluded.status,
				created_at = excluded.created_at, version = excluded.version, updated_at = now()
			WHERE w.version < excluded.version
			RETURNING (xmax = 0)`, string(w.ID), w.Type, string(w.Status), w.CreatedAt, version).Scan(&inserted)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		outcome = WorkspaceUpdated
		if inserted {
			outcome = WorkspaceInserted
			return nil // a new workspace has no bindings yet
		}
		return notifyWorkspaceChats(ctx, tx, w.ID)
	})
	if err != nil {
		return 0, fmt.Errorf("upsert workspace %s at version %d: %w", w.ID, version, err)
	}
	return outcome, nil
}

const workspaceColumns = `w.id, w.type, w.status, w.created_at, w.updated_at, w.version`

func scanWorkspaceInto(row pgx.Row, w *Workspace, extra ...any) error {
	var id, status string
	if err := row.Scan(append([]any{&id, &w.Type, &status, &w.CreatedAt, &w.UpdatedAt, &w.Version}, extra...)...); err != nil {
		return err
	}
	w.ID, w.Status = ids.WorkspaceID(id), WorkspaceStatus(status)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return nil
}

// GetWorkspace returns a workspace, or ErrNotFound.
func (s *Store) GetWorkspace(ctx context.Context, ws ids.WorkspaceID) (Workspace, error) {
	if err := validWorkspace(ws); err != nil {
		return Workspace{}, err
	}
	var w Workspace
	err := scanWorkspaceInto(s.pool.QueryRow(ctx, `SELECT `+workspaceColumns+` FROM workspaces w WHERE w.id = $1`, string(ws)), &w)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Workspace{}, fmt.Errorf("get workspace %s: %w", ws, err)
	}
	return w, nil
}

// SetWorkspaceStatus changes a workspace's status without changing its feed version (a
// newer feed message still wins). It reports whether the status changed; a missing
// workspace gives ErrNotFound.
func (s *Store) SetWorkspaceStatus(ctx context.Context, ws ids.WorkspaceID, status WorkspaceStatus) (bool, error) {
	if err := validWorkspace(ws); err != nil {
		return false, err
	}
	if !status.valid() {
		return false, fmt.Errorf("%w: workspace status %q", ErrInvalid, status)
	}
	var changed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var old string
		if err := tx.QueryRow(ctx, `SELECT status FROM workspaces WHERE id = $1 FOR UPDATE`, string(ws)).Scan(&old); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		if WorkspaceStatus(old) == status {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE workspaces SET status = $2, updated_at = now() WHERE id = $1`, string(ws), string(status)); err != nil {
			return err
		}
		changed = true
		return notifyWorkspaceChats(ctx, tx, ws)
	})
	if err != nil {
		return false, fmt.Errorf("set status of workspace %s to %s: %w", ws, status, err)
	}
	return changed, nil
}

// BindChat binds a chat to a workspace and reports whether the binding is new. A missing
// workspace gives ErrNotFound.
func (s *Store) BindChat(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error) {
	if err := validWorkspace(ws); err != nil {
		return false, err
	}
	if err := validChat(chat); err != nil {
		return false, err
	}
	var added bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO workspace_chat_bindings (workspace_id, chat_id) VALUES ($1, $2)
			ON CONFLICT DO NOTHING`, string(ws), string(chat))
		if err != nil {
			return foreignKeyToNotFound(err)
		}
		if added = tag.RowsAffected() == 1; !added {
			return nil
		}
		return notifyChats(ctx, tx, []string{string(chat)})
	})
	if err != nil {
		return false, fmt.Errorf("bind chat %s to workspace %s: %w", chat, ws, err)
	}
	return added, nil
}

func foreignKeyToNotFound(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return fmt.Errorf("%w: workspace", ErrNotFound)
	}
	return err
}

// UnbindChat removes a binding and reports whether it existed.
func (s *Store) UnbindChat(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error) {
	if err := validWorkspace(ws); err != nil {
		return false, err
	}
	if err := validChat(chat); err != nil {
		return false, err
	}
	var removed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM workspace_chat_bindings WHERE workspace_id = $1 AND chat_id = $2`,
			string(ws), string(chat))
		if err != nil {
			return err
		}
		if removed = tag.RowsAffected() == 1; !removed {
			return nil
		}
		return notifyChats(ctx, tx, []string{string(chat)})
	})
	if err != nil {
		return false, fmt.Errorf("unbind chat %s from workspace %s: %w", chat, ws, err)
	}
	return removed, nil
}

// ReplaceBindings makes chats the exact set of chats bound to the workspace and reports
// how many bindings it added and removed. Every changed chat is notified. A missing
// workspace gives ErrNotFound.
func (s *Store) ReplaceBindings(ctx context.Context, ws ids.WorkspaceID, chats []ids.ChatID) (added, removed int, err error) {
	if err := validWorkspace(ws); err != nil {
		return 0, 0, err
	}
	want := make([]string, 0, len(chats))
	for _, c := range chats {
		if err := validChat(c); err != nil {
			return 0, 0, err
		}
		want = append(want, string(c))
	}
	slices.Sort(want)
	want = slices.Compact(want)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Lock the workspace so concurrent replacements of one workspace serialise.
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE`, string(ws)).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: workspace", ErrNotFound)
			}
			return err
		}
		var changed []string
		rows, err := tx.Query(ctx, `DELETE FROM workspace_chat_bindings
			WHERE workspace_id = $1 AND NOT (chat_id = ANY($2::text[])) RETURNING chat_id`, string(ws), want)
		if err != nil {
			return err
		}
		gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `INSERT INTO workspace_chat_bindings (workspace_id, chat_id)
			SELECT $1, c FROM unnest($2::text[]) AS c ON CONFLICT DO NOTHING RETURNING chat_id`, string(ws), want)
		if err != nil {
			return err
		}
		fresh, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		added, removed = len(fresh), len(gone)
		changed = append(append(changed, gone...), fresh...)
		return notifyChats(ctx, tx, changed)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("replace bindings of workspace %s: %w", ws, err)
	}
	return added, removed, nil
}

// WorkspaceBinding is a chat bound to a workspace, with the workspace's state.
type WorkspaceBinding struct {
	Chat      ids.ChatID
	Workspace Workspace
	BoundAt   time.Time
}

const bindingQuery = `SELECT ` + workspaceColumns + `, b.chat_id, b.created_at
	FROM workspace_chat_bindings b JOIN workspaces w ON w.id = b.workspace_id`

func collectBindings(rows pgx.Rows) ([]WorkspaceBinding, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (WorkspaceBinding, error) {
		var (
			b    WorkspaceBinding
			chat string
		)
		err := scanWorkspaceInto(row, &b.Workspace, &chat, &b.BoundAt)
		b.Chat, b.BoundAt = ids.ChatID(chat), b.BoundAt.UTC()
		return b, err
	})
}

// BindingsForChat returns every workspace the chat is bound to (any status), ordered by
// workspace id. The caller applies eligibility (status, age, design §6).
func (s *Store) BindingsForChat(ctx context.Context, chat ids.ChatID) ([]WorkspaceBinding, error) {
	if err := validChat(chat); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, bindingQuery+` WHERE b.chat_id = $1 ORDER BY w.id`, string(chat))
	if err != nil {
		return nil, fmt.Errorf("bindings of chat %s: %w", chat, err)
	}
	out, err := collectBindings(rows)
	if err != nil {
		return nil, fmt.Errorf("bindings of chat %s: %w", chat, err)
	}
	return out, nil
}

// BindingFilter selects bindings by their workspace.
type BindingFilter struct {
	// Statuses keeps workspaces in one of these statuses; empty keeps all.
	Statuses []WorkspaceStatus
	// CreatedSince keeps workspaces created at or after it; zero keeps all.
	CreatedSince time.Time
}

// MaxBindings bounds ListBindings.
const MaxBindings = 10000

// ListBindings returns the bindings whose workspace passes f (e.g. firing workspaces of
// the last 72 hours, for reconciliation), ordered by workspace and chat. More than
// MaxBindings gives ErrTooMany.
func (s *Store) ListBindings(ctx context.Context, f BindingFilter) ([]WorkspaceBinding, error) {
	statuses := make([]string, 0, len(f.Statuses))
	for _, st := range f.Statuses {
		if !st.valid() {
			return nil, fmt.Errorf("%w: workspace status %q", ErrInvalid, st)
		}
		statuses = append(statuses, string(st))
	}
	rows, err := s.pool.Query(ctx, bindingQuery+`
		WHERE (cardinality($1::text[]) = 0 OR w.status = ANY($1::text[])) AND w.created_at >= $2
		ORDER BY w.id, b.chat_id LIMIT $3`, statuses, f.CreatedSince, MaxBindings+1)
	if err != nil {
		return nil, fmt.Errorf("list bindings: %w", err)
	}
	out, err := collectBindings(rows)
	if err != nil {
		return nil, fmt.Errorf("list bindings: %w", err)
	}
	if len(out) > MaxBindings {
		return nil, fmt.Errorf("list bindings: %w: more than %d", ErrTooMany, MaxBindings)
	}
	return out, nil
}

// ChatsOfWorkspace returns the chats bound to a workspace, sorted.
func (s *Store) ChatsOfWorkspace(ctx context.Context, ws ids.WorkspaceID) ([]ids.ChatID, error) {
	if err := validWorkspace(ws); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT chat_id FROM workspace_chat_bindings WHERE workspace_id = $1 ORDER BY chat_id`, string(ws))
	if err != nil {
		return nil, fmt.Errorf("chats of workspace %s: %w", ws, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[ids.ChatID])
	if err != nil {
		return nil, fmt.Errorf("chats of workspace %s: %w", ws, err)
	}
	return out, nil
}

// BindingEvents receives binding invalidations from ListenBindings.
type BindingEvents interface {
	// BindingsReset is called each time listening (re)starts: changes made while not
	// listening were missed, so everything cached may be stale.
	BindingsReset()
	// BindingChanged is called for a chat whose bindings or bound workspaces changed.
	BindingChanged(chat ids.ChatID)
}

// ListenBindings listens on BindingsChannel on a connection of its own (taken from the
// pool and closed at return) and reports to h until ctx is done (then it returns nil) or
// the connection fails (then it returns the error; IsRetryable tells whether to listen
// again). h is called from this goroutine only.
func (s *Store) ListenBindings(ctx context.Context, h BindingEvents) error {
	if h == nil {
		return fmt.Errorf("%w: nil BindingEvents", ErrInvalid)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listen bindings: acquire connection: %w", err)
	}
	conn := pc.Hijack() // a LISTENing session must not go back to the pool
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+BindingsChannel); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listen bindings: %w", err)
	}
	h.BindingsReset()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen bindings: wait: %w", err)
		}
		h.BindingChanged(ids.ChatID(n.Payload))
	}
}
