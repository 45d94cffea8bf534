package store

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/schemas/ids"
)

// DiffEntry is one side of an entry difference: ids, kind, time and text (the
// operator reading a diff is allowed to see the timeline, as in the API).
type DiffEntry struct {
	ID          int64
	Fingerprint string
	OccurredAt  time.Time
	Kind        string
	Status      EntryStatus
	Title       string
	Body        string
}

// WorkspaceDiff is what two processor versions wrote differently for one workspace.
type WorkspaceDiff struct {
	Workspace ids.WorkspaceID
	// OnlyA and OnlyB are entries whose fingerprint one version has and the other has
	// not; Changed pairs the entries both have with a different kind, time, status,
	// title or body (A first).
	OnlyA, OnlyB []DiffEntry
	Changed      [][2]DiffEntry
	// SummaryChanged: the versions' AI summaries differ (one may have none).
	SummaryChanged bool
	// WindowsOnlyA and WindowsOnlyB are windows (chat/<chat>/window/<start>) one
	// version closed and the other did not.
	WindowsOnlyA, WindowsOnlyB []string
}

// Empty reports whether the versions wrote the same for the workspace.
func (d *WorkspaceDiff) Empty() bool {
	return len(d.OnlyA)+len(d.OnlyB)+len(d.Changed)+len(d.WindowsOnlyA)+len(d.WindowsOnlyB) == 0 && !d.SummaryChanged
}

// DiffVersions compares the outputs of versions a and b, per workspace (ws "" for
// every workspace), and returns the workspaces where they differ, by id. The
// workspace's own entries (human-made or human-edited) are in both views and never
// differ. Entries match by fingerprint.
func (s *Store) DiffVersions(ctx context.Context, a, b string, ws ids.WorkspaceID) ([]WorkspaceDiff, error) {
	a, err := versionName(a)
	if err != nil {
		return nil, err
	}
	if b, err = versionName(b); err != nil {
		return nil, err
	}
	out := map[ids.WorkspaceID]*WorkspaceDiff{}
	get := func(w string) *WorkspaceDiff {
		d := out[ids.WorkspaceID(w)]
		if d == nil {
			d = &WorkspaceDiff{Workspace: ids.WorkspaceID(w)}
			out[d.Workspace] = d
		}
		return d
	}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `WITH a AS (SELECT * FROM workspace_timeline_entries WHERE processor_version = $1 AND ($3 = '' OR workspace_id = $3)),
			b AS (SELECT * FROM workspace_timeline_entries WHERE processor_version = $2 AND ($3 = '' OR workspace_id = $3))
			SELECT coalesce(a.workspace_id, b.workspace_id),
				coalesce(a.id, 0), coalesce(a.fingerprint, ''), coalesce(a.occurred_at, b.occurred_at), coalesce(a.kind, ''), coalesce(a.status, ''), coalesce(a.title, ''), coalesce(a.body, ''),
				coalesce(b.id, 0), coalesce(b.fingerprint, ''), coalesce(b.occurred_at, a.occurred_at), coalesce(b.kind, ''), coalesce(b.status, ''), coalesce(b.title, ''), coalesce(b.body, '')
			FROM a FULL JOIN b ON a.workspace_id = b.workspace_id AND a.fingerprint = b.fingerprint
			WHERE a.id IS NULL OR b.id IS NULL
			   OR (a.occurred_at, a.kind, a.status, a.title, a.body) IS DISTINCT FROM (b.occurred_at, b.kind, b.status, b.title, b.body)
			ORDER BY 1, coalesce(a.occurred_at, b.occurred_at), coalesce(a.id, b.id)`, a, b, string(ws))
		if err != nil {
			return err
		}
		var (
			w      string
			ea, eb DiffEntry
			sa, sb string
		)
		if _, err := pgx.ForEachRow(rows, []any{&w,
			&ea.ID, &ea.Fingerprint, &ea.OccurredAt, &ea.Kind, &sa, &ea.Title, &ea.Body,
			&eb.ID, &eb.Fingerprint, &eb.OccurredAt, &eb.Kind, &sb, &eb.Title, &eb.Body}, func() error {
			ea.Status, eb.Status = EntryStatus(sa), EntryStatus(sb)
			ea.OccurredAt, eb.OccurredAt = ea.OccurredAt.UTC(), eb.OccurredAt.UTC()
			d := get(w)
			switch {
			case eb.ID == 0:
				d.OnlyA = append(d.OnlyA, ea)
			case ea.ID == 0:
				d.OnlyB = append(d.OnlyB, eb)
			default:
				d.Changed = append(d.Changed, [2]DiffEntry{ea, eb})
			}
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `WITH a AS (SELECT workspace_id, text FROM workspace_timeline_summaries WHERE processor_version = $1 AND ($3 = '' OR workspace_id = $3)),
			b AS (SELECT workspace_id, text FROM workspace_timeline_summaries WHERE processor_version = $2 AND ($3 = '' OR workspace_id = $3))
			SELECT coalesce(a.workspace_id, b.workspace_id) FROM a FULL JOIN b USING (workspace_id)
			WHERE a.text IS DISTINCT FROM b.text`, a, b, string(ws))
		if err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&w}, func() error {
			get(w).SummaryChanged = true
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `WITH w AS (SELECT workspace_id, `+windowVersionSQL+` AS v,
				'chat/' || split_part(source_key, '/', 2) || '/window/' || split_part(source_key, '/window/', 2) AS win
				FROM workspace_timeline_sync_states WHERE source_type = $4 AND ($3 = '' OR workspace_id = $3)),
			a AS (SELECT workspace_id, win FROM w WHERE v = $1), b AS (SELECT workspace_id, win FROM w WHERE v = $2)
			SELECT coalesce(a.workspace_id, b.workspace_id), coalesce(a.win, b.win), a.win IS NOT NULL
			FROM a FULL JOIN b USING (workspace_id, win) WHERE a.win IS NULL OR b.win IS NULL ORDER BY 1, 2`,
			a, b, string(ws), ids.SourceTypeLarkWindow)
		if err != nil {
			return err
		}
		var (
			win string
			inA bool
		)
		_, err = pgx.ForEachRow(rows, []any{&w, &win, &inA}, func() error {
			d := get(w)
			if inA {
				d.WindowsOnlyA = append(d.WindowsOnlyA, win)
			} else {
				d.WindowsOnlyB = append(d.WindowsOnlyB, win)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("diff processor versions %s and %s: %w", a, b, err)
	}
	diffs := make([]WorkspaceDiff, 0, len(out))
	for _, d := range out {
		diffs = append(diffs, *d)
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].Workspace < diffs[j].Workspace })
	return diffs, nil
}
