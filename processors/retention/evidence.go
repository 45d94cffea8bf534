package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/schemas/ids"
)

// workspacesPage is how many workspace ids one listing returns.
const workspacesPage = 500

// evidenceWorkspacesSQL lists, after $1, up to $2 distinct workspace ids that hold
// evidence, by a loose index scan: each step is one probe of an index that leads with
// workspace_id (the unique key or the time index), so the listing costs one probe per
// workspace instead of a pass over every evidence row. The LIMIT stops the recursion.
const evidenceWorkspacesSQL = `
WITH RECURSIVE w(id) AS (
    (SELECT workspace_id FROM workspace_timeline_evidence
      WHERE workspace_id > $1 ORDER BY workspace_id LIMIT 1)
    UNION ALL
    SELECT (SELECT e.workspace_id FROM workspace_timeline_evidence e
             WHERE e.workspace_id > w.id ORDER BY e.workspace_id LIMIT 1)
      FROM w WHERE w.id IS NOT NULL
)
SELECT id FROM w WHERE id IS NOT NULL LIMIT $2`

// dueEvidenceSQL selects one batch of a workspace's Lark message evidence strictly
// before the cutoff ($4), after the keyset position ($5, $6), in (occurred_at, id)
// order on the index workspace_timeline_evidence_time_idx (workspace_id, source,
// source_type, occurred_at, id): the row comparison is an index condition, so each
// batch starts where the last one ended. The first batch starts after
// ('-infinity', 0). %s is the mode's filter.
const dueEvidenceSQL = `
SELECT id, source_key, occurred_at, source_updated_at, actor_id, actor_display_name,
       content, content_hash, metadata_json::text, deleted, synthesis_eligible
FROM workspace_timeline_evidence
WHERE workspace_id = $1 AND source = $2 AND source_type = $3 AND occurred_at < $4
  AND (occurred_at, id) > ($5, $6) %s
ORDER BY occurred_at, id
LIMIT $7`

// notRedactedFilter skips rows retention itself already redacted (its marker, and
// nothing but the kept keys, see keptMetadataKeys, $8): in redact mode old rows stay,
// and a later run must not read them again and again. A row that merely looks
// redacted (deleted, no text) without retention's marker is read: its hash or its
// topic version may not be the redaction, and its AI drafts are withdrawn with it.
// Rows it lets through that are retention's redaction already are skipped in Go
// (alreadyRedacted).
const notRedactedFilter = `AND NOT (deleted AND NOT synthesis_eligible AND content = '' AND actor_display_name = ''
       AND metadata_json ? 'retention' AND (metadata_json - $8::text[]) = '{}'::jsonb)`

// withdrawDerivedSQL is the head of the redaction's and the deletion's statement: in
// the same statement, hence transaction, the AI drafts no person touched (source ai,
// status draft, never human-edited) that cite the rows ($1, all of one workspace) are
// withdrawn (hidden, title and body emptied, withdrawn_at) and, when one was, the
// workspace's AI summary loses its text and is due for a refresh. Human entries, and
// AI entries a person confirmed, edited or hid, are the people's: untouched (issue
// #29). The bindings are read before a deletion's cascade removes them (one snapshot).
const withdrawDerivedSQL = `
WITH drafts AS (
    UPDATE workspace_timeline_entries e
       SET status = 'hidden', title = '', body = '', withdrawn_at = now(), updated_at = now()
     WHERE e.workspace_id = $%[1]d AND e.source = 'ai' AND e.status = 'draft' AND e.human_edited_at IS NULL
       AND e.id IN (SELECT b.entry_id FROM workspace_timeline_entry_evidence b WHERE b.evidence_id = ANY ($1::bigint[]))
    RETURNING e.id
), summary AS (
    UPDATE workspace_timeline_summaries
       SET text = '', refresh_due_at = coalesce(refresh_due_at, now()), updated_at = now()
     WHERE workspace_id = $%[1]d AND source = 'ai' AND EXISTS (SELECT 1 FROM drafts)
    RETURNING 1
)
`

// redactEvidenceSQL writes the redacted versions of one batch in one statement. The
// occurred_at guard repeats the cutoff so that nothing else can be touched.
var redactEvidenceSQL = fmt.Sprintf(withdrawDerivedSQL, 6) + `
UPDATE workspace_timeline_evidence AS e SET
    content = '', deleted = true, synthesis_eligible = false, actor_display_name = '',
    content_hash = u.content_hash, metadata_json = u.metadata_json::jsonb, observed_at = $4
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(id, content_hash, metadata_json)
WHERE e.id = u.id AND e.occurred_at < $5`

// deleteEvidenceSQL deletes one batch; workspace_timeline_entry_evidence bindings go
// with it (ON DELETE CASCADE).
var deleteEvidenceSQL = fmt.Sprintf(withdrawDerivedSQL, 3) + `
DELETE FROM workspace_timeline_evidence
WHERE id = ANY($1::bigint[]) AND occurred_at < $2`

// evidence redacts or deletes the due evidence of every workspace. It reports
// whether it finished (false: the deadline came first).
func (r *run) evidence(ctx context.Context) (bool, error) {
	after := ""
	for {
		qctx, cancel := r.queryCtx(ctx)
		rows, err := r.j.db.Query(qctx, evidenceWorkspacesSQL, after, workspacesPage)
		var wss []string
		if err == nil {
			wss, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		cancel()
		if err != nil {
			return false, failed(reasonPostgres, fmt.Errorf("retention: listing workspaces with evidence: %w", err))
		}
		for _, ws := range wss {
			done, err := r.workspaceEvidence(ctx, ids.WorkspaceID(ws))
			if err != nil || !done {
				return false, err
			}
		}
		if len(wss) < workspacesPage {
			return true, nil
		}
		after = wss[len(wss)-1]
	}
}

// workspaceEvidence handles one workspace's due evidence, batch by batch.
func (r *run) workspaceEvidence(ctx context.Context, ws ids.WorkspaceID) (bool, error) {
	sql := fmt.Sprintf(dueEvidenceSQL, "")
	extra := []any(nil)
	if r.j.o.Mode == ModeRedact {
		sql = fmt.Sprintf(dueEvidenceSQL, notRedactedFilter)
		extra = []any{keptMetadataKeys}
	}
	afterAt := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	afterID := int64(0)
	for {
		if ok, err := r.more(ctx); !ok {
			return false, err
		}
		args := append([]any{string(ws), ids.SourceLark, ids.SourceTypeLarkMessage, r.cutoff,
			afterAt, afterID, r.j.o.BatchSize}, extra...)
		batch, err := r.loadEvidence(ctx, sql, ws, args)
		if err != nil {
			return false, failed(reasonPostgres, fmt.Errorf("retention: reading due evidence of workspace %s: %w", ws, err))
		}
		if len(batch) == 0 {
			return true, nil
		}
		if err := r.evidenceBatch(ctx, ws, batch); err != nil {
			return false, err
		}
		last := batch[len(batch)-1]
		afterAt, afterID = pgtype.Timestamptz{Time: last.OccurredAt, Valid: true}, last.ID
		if len(batch) < r.j.o.BatchSize {
			return true, nil
		}
	}
}

func (r *run) loadEvidence(ctx context.Context, sql string, ws ids.WorkspaceID, args []any) ([]evidenceRow, error) {
	qctx, cancel := r.queryCtx(ctx)
	defer cancel()
	rows, err := r.j.db.Query(qctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (evidenceRow, error) {
		e := evidenceRow{Workspace: ws}
		var meta string
		err := row.Scan(&e.ID, &e.SourceKey, &e.OccurredAt, &e.SourceUpdatedAt, &e.ActorID, &e.ActorName,
			&e.Content, &e.ContentHash, &meta, &e.Deleted, &e.Eligible)
		e.Metadata = []byte(meta)
		return e, err
	})
}

// evidenceBatch publishes, then changes, one batch.
func (r *run) evidenceBatch(ctx context.Context, ws ids.WorkspaceID, batch []evidenceRow) error {
	if r.j.o.Mode == ModeDelete {
		return r.deleteBatch(ctx, ws, batch)
	}
	return r.redactBatch(ctx, ws, batch)
}

func (r *run) redactBatch(ctx context.Context, ws ids.WorkspaceID, batch []evidenceRow) error {
	observed := r.j.o.Clock().UTC().Truncate(time.Millisecond) // what the record keeps
	var (
		hashes, metas []string
		rowIDs        []int64
		recs          []*kgo.Record
		unpublishable int64
	)
	for _, row := range batch {
		red := redact(row, observed)
		if alreadyRedacted(row, red) {
			continue
		}
		rowIDs = append(rowIDs, row.ID)
		hashes = append(hashes, red.hash)
		metas = append(metas, string(red.metadata))
		if red.record == nil {
			unpublishable++
			r.j.log.Warn("due evidence row has no valid evidence key; redacting it in Postgres only",
				"workspace", string(ws), "evidence_id", row.ID, "content_hash", row.ContentHash)
			continue
		}
		value, err := r.j.o.Codecs.Evidence.Encode(ctx, *red.record)
		if err != nil {
			return failed(reasonEncode, fmt.Errorf("retention: encoding the redaction of evidence %d of workspace %s: %w", row.ID, ws, err))
		}
		recs = append(recs, &kgo.Record{Topic: r.j.o.EvidenceTopic, Key: []byte(red.record.Key()), Value: value, Timestamp: observed})
	}
	if len(rowIDs) == 0 {
		return nil
	}
	if err := r.produce(ctx, recs); err != nil {
		return err
	}
	r.rep.Unpublishable += unpublishable
	if r.dry {
		r.rep.Redacted += int64(len(rowIDs))
		return nil
	}
	r.j.m.failures.WithLabelValues(reasonInvalidRow).Add(float64(unpublishable))
	dctx, cancel := r.dbCtx(ctx)
	defer cancel()
	tag, err := r.j.db.Exec(dctx, redactEvidenceSQL, rowIDs, hashes, metas, observed, r.cutoff, string(ws))
	if err != nil {
		return failed(reasonPostgres, fmt.Errorf("retention: redacting %d evidence rows of workspace %s (published already; the next run repeats them): %w", len(rowIDs), ws, err))
	}
	r.rep.Redacted += tag.RowsAffected()
	r.j.m.rows.WithLabelValues(actionRedacted).Add(float64(tag.RowsAffected()))
	r.j.log.Debug("evidence redacted", "workspace", string(ws), "rows", tag.RowsAffected(), "published", len(recs))
	return nil
}

func (r *run) deleteBatch(ctx context.Context, ws ids.WorkspaceID, batch []evidenceRow) error {
	var (
		rowIDs        = make([]int64, 0, len(batch))
		recs          = make([]*kgo.Record, 0, len(batch))
		unpublishable int64
		now           = time.Now()
	)
	for _, row := range batch {
		rowIDs = append(rowIDs, row.ID)
		key, ok := row.topicKey()
		if !ok {
			unpublishable++
			r.j.log.Warn("due evidence row has no valid evidence key; deleting it in Postgres only",
				"workspace", string(ws), "evidence_id", row.ID, "content_hash", row.ContentHash)
			continue
		}
		// A nil Value is a tombstone.
		recs = append(recs, &kgo.Record{Topic: r.j.o.EvidenceTopic, Key: []byte(key), Timestamp: now})
	}
	if err := r.produce(ctx, recs); err != nil {
		return err
	}
	r.rep.Unpublishable += unpublishable
	if r.dry {
		r.rep.Deleted += int64(len(rowIDs))
		return nil
	}
	r.j.m.failures.WithLabelValues(reasonInvalidRow).Add(float64(unpublishable))
	dctx, cancel := r.dbCtx(ctx)
	defer cancel()
	tag, err := r.j.db.Exec(dctx, deleteEvidenceSQL, rowIDs, r.cutoff, string(ws))
	if err != nil {
		return failed(reasonPostgres, fmt.Errorf("retention: deleting %d evidence rows of workspace %s (tombstones published already; the next run repeats them): %w", len(rowIDs), ws, err))
	}
	r.rep.Deleted += tag.RowsAffected()
	r.j.m.rows.WithLabelValues(actionDeleted).Add(float64(tag.RowsAffected()))
	r.j.log.Debug("evidence deleted", "workspace", string(ws), "rows", tag.RowsAffected(), "tombstones", len(recs))
	return nil
}
