package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/larkline/larkline/schemas/ids"
)

// EntrySource says who created a timeline entry.
type EntrySource string

// Entry sources.
const (
	EntryFromAI    EntrySource = "ai"
	EntryFromHuman EntrySource = "human"
)

// EntryStatus is a timeline entry's curation status.
type EntryStatus string

// Entry statuses. Hidden entries stay (with their evidence) but are not shown.
const (
	EntryStatusDraft     EntryStatus = "draft"
	EntryStatusConfirmed EntryStatus = "confirmed"
	EntryStatusHidden    EntryStatus = "hidden"
)

func (s EntryStatus) valid() bool {
	return s == EntryStatusDraft || s == EntryStatusConfirmed || s == EntryStatusHidden
}

// Bounds on entry text.
const (
	MaxEntryKindLen    = 64
	MaxEntryTitleBytes = 1024
	MaxEntryBodyBytes  = 16 << 10
	MaxFingerprintLen  = 256
	MaxAIMetadataBytes = 64 << 10
	MaxEvidencePerCall = 1000
	MaxVisibleEntries  = 10000
)

// Entry is one curated timeline entry with the ids of its supporting evidence.
type Entry struct {
	ID          int64
	Workspace   ids.WorkspaceID
	OccurredAt  time.Time
	Kind        string
	Title       string
	Body        string
	Source      EntrySource
	Status      EntryStatus
	Fingerprint string
	// ProcessorVersion is the processor version whose synthesis wrote the entry; "" for
	// the workspace's own entries (human-made, or human-edited: a human edit moves an
	// entry out of its version), visible whatever version serves (decisions D26).
	ProcessorVersion string
	// AIMetadata records processor and prompt version, evidence ids with their input
	// content hashes, chat/thread/root ids and the synthesis batch id (design §12.4).
	AIMetadata json.RawMessage
	// HumanEditedAt is set once a human changed the entry.
	HumanEditedAt *time.Time
	// WithdrawnAt is set when the entry was an AI draft no human had touched and a
	// message it cites was recalled: it is hidden and its title and body are empty
	// (decisions D12). A human edit clears it.
	WithdrawnAt *time.Time
	// NeedsReviewAt is set when a message the entry cites was recalled and the entry
	// is a human's (or curated) one, whose text is never changed: a person should look
	// at it. A human edit clears it.
	NeedsReviewAt *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	EvidenceIDs   []int64
}

// HumanOwned reports whether synthesis must leave the entry's text alone: it was
// created or edited by a human, or curated (confirmed or hidden).
func (e *Entry) HumanOwned() bool {
	return e.Source == EntryFromHuman || e.Status != EntryStatusDraft || e.HumanEditedAt != nil
}

// EntryContent is the text of an AI entry and the evidence supporting it.
type EntryContent struct {
	OccurredAt  time.Time
	Kind        string
	Title       string
	Body        string
	AIMetadata  json.RawMessage
	EvidenceIDs []int64
}

func (c *EntryContent) validate() error {
	if c.OccurredAt.IsZero() {
		return fmt.Errorf("%w: entry occurred_at is zero", ErrInvalid)
	}
	if err := checkText("entry kind", c.Kind, MaxEntryKindLen, true); err != nil {
		return err
	}
	if err := checkText("entry title", c.Title, MaxEntryTitleBytes, true); err != nil {
		return err
	}
	if err := checkText("entry body", c.Body, MaxEntryBodyBytes, false); err != nil {
		return err
	}
	if len(c.EvidenceIDs) > MaxEvidencePerCall {
		return fmt.Errorf("%w: %d evidence ids > %d", ErrInvalid, len(c.EvidenceIDs), MaxEvidencePerCall)
	}
	return checkJSONObject("ai_metadata", c.AIMetadata, MaxAIMetadataBytes)
}

// EntryDraft is an AI draft deduplicated by its fingerprint (design §12.4) within its
// processor version.
type EntryDraft struct {
	Workspace   ids.WorkspaceID
	Fingerprint string
	// ProcessorVersion is the version whose synthesis wrote the draft; "" means
	// ids.DefaultProcessorVersion.
	ProcessorVersion string
	EntryContent
}

// EntryOutcome says what UpsertDraftEntry or UpdateDraftEntry did.
type EntryOutcome uint8

// Entry outcomes.
const (
	// EntryCreated: a new draft.
	EntryCreated EntryOutcome = iota + 1
	// EntryUpdated: an AI draft's text changed (a material update, design §13).
	EntryUpdated
	// EntryEvidenceAttached: only new evidence was bound (the text was equal, or is
	// human-owned and was left alone).
	EntryEvidenceAttached
	// EntryUnchanged: nothing visible changed.
	EntryUnchanged
	// EntryDiscarded: the draft's version is retired; nothing was written.
	EntryDiscarded
)

func (o EntryOutcome) String() string {
	switch o {
	case EntryCreated:
		return "created"
	case EntryUpdated:
		return "updated"
	case EntryEvidenceAttached:
		return "evidence_attached"
	case EntryUnchanged:
		return "unchanged"
	case EntryDiscarded:
		return "discarded"
	}
	return fmt.Sprintf("EntryOutcome(%d)", uint8(o))
}

// EntryResult reports one entry write.
type EntryResult struct {
	ID      int64
	Outcome EntryOutcome
	// HumanOwned is true when an existing entry's text was protected from the write.
	HumanOwned bool
}

const entryColumns = `e.id, e.workspace_id, e.occurred_at, e.kind, e.title, e.body, e.source, e.status,
	coalesce(e.fingerprint, ''), e.processor_version, e.ai_metadata, e.human_edited_at, e.withdrawn_at, e.needs_review_at,
	e.created_at, e.updated_at,
	ARRAY(SELECT b.evidence_id FROM workspace_timeline_entry_evidence b WHERE b.entry_id = e.id ORDER BY b.evidence_id)`

func scanEntry(row pgx.CollectableRow) (Entry, error) {
	var (
		e           Entry
		ws, src, st string
	)
	err := row.Scan(&e.ID, &ws, &e.OccurredAt, &e.Kind, &e.Title, &e.Body, &src, &st, &e.Fingerprint,
		&e.ProcessorVersion, rawJSON(&e.AIMetadata), &e.HumanEditedAt, &e.WithdrawnAt, &e.NeedsReviewAt, &e.CreatedAt, &e.UpdatedAt, &e.EvidenceIDs)
	e.Workspace, e.Source, e.Status = ids.WorkspaceID(ws), EntrySource(src), EntryStatus(st)
	e.OccurredAt, e.CreatedAt, e.UpdatedAt = e.OccurredAt.UTC(), e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	for _, p := range []**time.Time{&e.HumanEditedAt, &e.WithdrawnAt, &e.NeedsReviewAt} {
		if *p != nil {
			t := (*p).UTC()
			*p = &t
		}
	}
	if e.EvidenceIDs == nil {
		e.EvidenceIDs = []int64{}
	}
	return e, err
}

func getEntry(ctx context.Context, q querier, ws ids.WorkspaceID, id int64, lock bool) (Entry, error) {
	sql := `SELECT ` + entryColumns + ` FROM workspace_timeline_entries e WHERE e.workspace_id = $1 AND e.id = $2`
	if lock {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, string(ws), id)
	if err != nil {
		return Entry{}, err
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEntry)
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, ErrNotFound
	}
	return e, err
}

// GetEntry returns one entry of a workspace, or ErrNotFound.
func (s *Store) GetEntry(ctx context.Context, ws ids.WorkspaceID, id int64) (Entry, error) {
	if err := validWorkspace(ws); err != nil {
		return Entry{}, err
	}
	e, err := getEntry(ctx, s.pool, ws, id, false)
	if err != nil {
		return Entry{}, fmt.Errorf("get entry %d of workspace %s: %w", id, ws, err)
	}
	return e, nil
}

// bindEvidence binds evidence rows of workspace ws to an entry and returns how many
// bindings are new. Every id must name evidence of ws, or nothing is bound (ErrInvalid).
// Evidence already recalled withdraws or flags the entry as the recall would have
// (recallBound).
func bindEvidence(ctx context.Context, q querier, ws ids.WorkspaceID, entryID int64, evidenceIDs []int64) (int, error) {
	if len(evidenceIDs) == 0 {
		return 0, nil
	}
	added, err := insertBindings(ctx, q, ws, entryID, evidenceIDs)
	if err != nil {
		return 0, err
	}
	if err := recallBound(ctx, q, ws, evidenceIDs); err != nil {
		return 0, err
	}
	return added, nil
}

// recallBound applies recalls the entries missed: a synthesizer may have read a
// message just before its recall and write a draft citing it just after. The evidence
// rows are read FOR SHARE, so a recall in flight either commits first (the lock waits,
// the row is read as recalled, and larkline_recall_entries withdraws the draft here)
// or waits for this transaction (its trigger then sees the new binding). Migration
// 0005, decisions D12.
func recallBound(ctx context.Context, q querier, ws ids.WorkspaceID, evidenceIDs []int64) error {
	rows, err := q.Query(ctx, recallBoundSQL, string(ws), evidenceIDs)
	if err != nil {
		return err
	}
	return applyRecalls(ctx, q, ws, rows)
}

// recallBoundSQL reads evidence rows FOR SHARE and tells which are recalled.
const recallBoundSQL = `SELECT id, deleted AND NOT coalesce(metadata_json ? 'retention', false)
		FROM workspace_timeline_evidence WHERE workspace_id = $1 AND id = ANY($2::bigint[])
		ORDER BY id FOR SHARE`

// applyRecalls withdraws the entries bound to the recalled rows of recallBoundSQL's
// answer (rows, which it closes).
func applyRecalls(ctx context.Context, q querier, ws ids.WorkspaceID, rows pgx.Rows) error {
	recalled, err := recalledIDs(rows)
	if err != nil || len(recalled) == 0 {
		return err
	}
	return recallEntries(ctx, q, ws, recalled)
}

// recalledIDs reads recallBoundSQL's answer (rows, which it closes): the recalled ids.
func recalledIDs(rows pgx.Rows) ([]int64, error) {
	var recalled []int64
	var id int64
	var isRecalled bool
	_, err := pgx.ForEachRow(rows, []any{&id, &isRecalled}, func() error {
		if isRecalled {
			recalled = append(recalled, id)
		}
		return nil
	})
	return recalled, err
}

// recallEntries withdraws the entries of workspace ws bound to the recalled evidence.
func recallEntries(ctx context.Context, q querier, ws ids.WorkspaceID, recalled []int64) error {
	_, err := q.Exec(ctx, `SELECT larkline_recall_entries($1, $2::bigint[])`, string(ws), recalled)
	return err
}

func insertBindings(ctx context.Context, q querier, ws ids.WorkspaceID, entryID int64, evidenceIDs []int64) (int, error) {
	var want, found, added int
	err := q.QueryRow(ctx, insertBindingsSQL, entryID, string(ws), evidenceIDs).Scan(&want, &found, &added)
	if err != nil {
		return 0, err
	}
	return bindingsAdded(ws, want, found, added)
}

// insertBindingsSQL binds entry $1 to the evidence ids $3 when every one of them is
// evidence of workspace $2, and counts the ids, those of the workspace and the new
// bindings.
const insertBindingsSQL = `WITH want AS (SELECT DISTINCT unnest($3::bigint[]) AS id),
		ok AS (SELECT ev.id FROM workspace_timeline_evidence ev JOIN want USING (id) WHERE ev.workspace_id = $2),
		ins AS (INSERT INTO workspace_timeline_entry_evidence (entry_id, evidence_id)
			SELECT $1, id FROM ok WHERE (SELECT count(*) FROM ok) = (SELECT count(*) FROM want)
			ON CONFLICT DO NOTHING RETURNING 1)
		SELECT (SELECT count(*) FROM want), (SELECT count(*) FROM ok), (SELECT count(*) FROM ins)`

func bindingsAdded(ws ids.WorkspaceID, want, found, added int) (int, error) {
	if found != want {
		return 0, fmt.Errorf("%w: %d of %d evidence ids are not evidence of workspace %s", ErrInvalid, want-found, want, ws)
	}
	return added, nil
}

// UpsertDraftEntry writes an AI draft of a processor version, deduplicated by
// (workspace, version, fingerprint):
//
//   - the workspace's own entry (” version: human-made or human-edited) has the
//     fingerprint → its text is never changed (HumanOwned); the serving version
//     attaches the draft's evidence to it, a candidate leaves it alone;
//   - no entry of the version has the fingerprint → a new draft (EntryCreated);
//   - an AI draft no human edited → its text and metadata are replaced (EntryUpdated
//     when the text changed);
//   - a confirmed or hidden entry of the version → its text is never changed
//     (HumanOwned), but new evidence is attached.
//
// A retired version writes nothing (EntryDiscarded). A candidate's writes never touch
// what the serving version shows (decisions D26). Every evidence id must belong to the
// workspace (ErrInvalid otherwise, and nothing is written).
func (s *Store) UpsertDraftEntry(ctx context.Context, d EntryDraft) (EntryResult, error) {
	res, err := s.UpsertDraftEntries(ctx, []EntryDraft{d})
	if err != nil {
		return EntryResult{}, err
	}
	return res[0], nil
}

// UpsertDraftEntries writes drafts as UpsertDraftEntry writes each, in one
// transaction: all of them or, on any error (an invalid draft included), none. A
// synthesis chunk's drafts go in one call, so a chunk costs one transaction, not one
// per draft (issue 35).
func (s *Store) UpsertDraftEntries(ctx context.Context, ds []EntryDraft) ([]EntryResult, error) {
	versions := make([]string, len(ds))
	for i, d := range ds {
		if err := validWorkspace(d.Workspace); err != nil {
			return nil, fmt.Errorf("draft %d: %w", i, err)
		}
		if err := checkText("fingerprint", d.Fingerprint, MaxFingerprintLen, true); err != nil {
			return nil, fmt.Errorf("draft %d: %w", i, err)
		}
		version, err := versionName(d.ProcessorVersion)
		if err != nil {
			return nil, fmt.Errorf("draft %d: %w", i, err)
		}
		if err := d.validate(); err != nil {
			return nil, fmt.Errorf("draft %d: %w", i, err)
		}
		versions[i] = version
	}
	if len(ds) == 0 {
		return nil, nil
	}
	res := make([]EntryResult, len(ds))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// One pipelined round trip: each version's access (its registry row locked FOR
		// SHARE, as versionWritable does), then every draft's own-entry lookup. The
		// lookups read only the workspace's own entries, which nothing here writes, so
		// a draft of a version found retired merely had one read too many.
		type access struct{ writable, serving bool }
		seen := map[string]*access{}
		all := make([]draftWrite, len(ds))
		b := &pgx.Batch{}
		for i := range ds {
			if _, ok := seen[versions[i]]; !ok {
				a := &access{}
				seen[versions[i]] = a
				b.Queue(versionWritableSQL, versions[i]).QueryRow(func(row pgx.Row) (err error) {
					a.writable, a.serving, err = versionAccess(row)
					return err
				})
			}
			w := &all[i]
			*w = draftWrite{i: i, d: &ds[i], version: versions[i]}
			b.Queue(ownEntrySQL, string(w.d.Workspace), w.d.Fingerprint).QueryRow(func(row pgx.Row) error {
				if err := row.Scan(&w.own); err != nil {
					return fmt.Errorf("draft %d of workspace %s, version %s: %w", w.i, w.d.Workspace, w.version, err)
				}
				return nil
			})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		var writes []draftWrite
		for i := range all {
			a := seen[versions[i]]
			if !a.writable {
				res[i] = EntryResult{Outcome: EntryDiscarded}
				continue
			}
			all[i].serving = a.serving
			writes = append(writes, all[i])
		}
		return upsertDrafts(ctx, tx, writes, res)
	})
	if err != nil {
		return nil, fmt.Errorf("upsert %d draft entries: %w", len(ds), err)
	}
	return res, nil
}

// draftWrite is one draft of a writable version in UpsertDraftEntries: ds[i].
type draftWrite struct {
	i       int
	d       *EntryDraft
	version string
	serving bool
	own     int64 // the workspace's own entry with the fingerprint (0: none)
	created int64 // the new entry (0: none was inserted)
}

const (
	// ownEntrySQL finds the workspace's own entry ('' version) with a fingerprint.
	ownEntrySQL = `SELECT coalesce(max(id), 0) FROM workspace_timeline_entries
		WHERE workspace_id = $1 AND processor_version = '' AND fingerprint = $2`
	// insertDraftSQL inserts a new draft unless the version has the fingerprint.
	insertDraftSQL = `INSERT INTO workspace_timeline_entries
			(workspace_id, occurred_at, kind, title, body, source, status, fingerprint, ai_metadata, processor_version)
		VALUES ($1, $2, $3, $4, $5, 'ai', 'draft', $6, $7::jsonb, $8)
		ON CONFLICT (workspace_id, processor_version, fingerprint) WHERE fingerprint IS NOT NULL DO NOTHING
		RETURNING id`
)

// upsertDrafts writes drafts of writable versions in tx as UpsertDraftEntry describes,
// each result into res[w.i]; each write's own entry (w.own) was looked up by the
// caller, in the round trip that checked the versions. The common case, a new draft,
// goes in two more pipelined rounds for all drafts at once (the inserts, the bindings
// with their recall check), so a chunk of n new drafts costs three round trips in
// all, not 4n; the rest (an own entry, a fingerprint the version already has) is
// updated one draft at a time after them. The order does not change the outcome: a
// lookup reads only the own (” version) entries, which no insert writes, and a draft
// whose insert met an earlier draft of the batch updates that entry afterwards as it
// would have.
func upsertDrafts(ctx context.Context, tx pgx.Tx, writes []draftWrite, res []EntryResult) error {
	fail := func(w *draftWrite, err error) error {
		return fmt.Errorf("draft %d of workspace %s, version %s: %w", w.i, w.d.Workspace, w.version, err)
	}
	b := &pgx.Batch{}
	for k := range writes {
		w := &writes[k]
		if w.own != 0 {
			continue
		}
		d := w.d
		b.Queue(insertDraftSQL, string(d.Workspace), d.OccurredAt, d.Kind, d.Title, d.Body, d.Fingerprint,
			jsonObject(d.AIMetadata), w.version).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&w.created)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // the version has the fingerprint: updated below
			}
			if err != nil {
				return fail(w, err)
			}
			return nil
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	type recall struct {
		ws  ids.WorkspaceID
		ids []int64
	}
	var recalls []recall
	b = &pgx.Batch{}
	for k := range writes {
		w := &writes[k]
		if w.created == 0 {
			continue
		}
		res[w.i] = EntryResult{ID: w.created, Outcome: EntryCreated}
		if len(w.d.EvidenceIDs) == 0 {
			continue
		}
		ws := w.d.Workspace
		b.Queue(insertBindingsSQL, w.created, string(ws), w.d.EvidenceIDs).QueryRow(func(row pgx.Row) error {
			var want, found, added int
			if err := row.Scan(&want, &found, &added); err != nil {
				return fail(w, err)
			}
			if _, err := bindingsAdded(ws, want, found, added); err != nil {
				return fail(w, err)
			}
			return nil
		})
		// recallBound's check, pipelined; a recalled row (rare) is applied below.
		b.Queue(recallBoundSQL, string(ws), w.d.EvidenceIDs).Query(func(rows pgx.Rows) error {
			recalled, err := recalledIDs(rows)
			if err != nil {
				return fail(w, err)
			}
			if len(recalled) > 0 {
				recalls = append(recalls, recall{ws, recalled})
			}
			return nil
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, r := range recalls {
		if err := recallEntries(ctx, tx, r.ws, r.ids); err != nil {
			return err
		}
	}
	for k := range writes {
		w := &writes[k]
		var err error
		switch {
		case w.created != 0:
			continue
		case w.own != 0 && w.serving:
			res[w.i], err = updateDraft(ctx, tx, w.d.Workspace, w.own, w.d.EntryContent, false)
		case w.own != 0:
			res[w.i] = EntryResult{ID: w.own, Outcome: EntryUnchanged, HumanOwned: true}
		default:
			var id int64
			if err = tx.QueryRow(ctx, `SELECT id FROM workspace_timeline_entries
				WHERE workspace_id = $1 AND processor_version = $2 AND fingerprint = $3`,
				string(w.d.Workspace), w.version, w.d.Fingerprint).Scan(&id); err == nil {
				res[w.i], err = updateDraft(ctx, tx, w.d.Workspace, id, w.d.EntryContent, false)
			}
		}
		if err != nil {
			return fail(w, err)
		}
	}
	return nil
}

// updateDraft applies content to entry id under a row lock. A human-owned entry keeps
// its text (strict: ErrHumanOwned; otherwise only evidence is attached).
func updateDraft(ctx context.Context, tx pgx.Tx, ws ids.WorkspaceID, id int64, c EntryContent, strict bool) (EntryResult, error) {
	cur, err := getEntry(ctx, tx, ws, id, true)
	if err != nil {
		return EntryResult{}, err
	}
	res := EntryResult{ID: id, Outcome: EntryUnchanged, HumanOwned: cur.HumanOwned()}
	if res.HumanOwned && strict {
		return EntryResult{}, fmt.Errorf("%w: entry %d (source %s, status %s)", ErrHumanOwned, id, cur.Source, cur.Status)
	}
	if !res.HumanOwned {
		textChanged := !cur.OccurredAt.Equal(c.OccurredAt.Truncate(time.Microsecond)) || cur.Kind != c.Kind ||
			cur.Title != c.Title || cur.Body != c.Body
		tag, err := tx.Exec(ctx, `UPDATE workspace_timeline_entries
			SET occurred_at = $2, kind = $3, title = $4, body = $5, ai_metadata = $6::jsonb,
			    updated_at = CASE WHEN $7 THEN now() ELSE updated_at END
			WHERE id = $1 AND ($7 OR ai_metadata IS DISTINCT FROM $6::jsonb)`,
			id, c.OccurredAt, c.Kind, c.Title, c.Body, jsonObject(c.AIMetadata), textChanged)
		if err != nil {
			return EntryResult{}, err
		}
		if textChanged && tag.RowsAffected() == 1 {
			res.Outcome = EntryUpdated
		}
	}
	added, err := bindEvidence(ctx, tx, ws, id, c.EvidenceIDs)
	if err != nil {
		return EntryResult{}, err
	}
	if added > 0 && res.Outcome == EntryUnchanged {
		res.Outcome = EntryEvidenceAttached
	}
	return res, nil
}

// UpdateDraftEntry replaces the text of AI draft id (for a synthesizer that refers to
// an existing entry) and binds the content's evidence. A human-owned entry gives
// ErrHumanOwned and is left entirely alone; a missing one ErrNotFound.
func (s *Store) UpdateDraftEntry(ctx context.Context, ws ids.WorkspaceID, id int64, c EntryContent) (EntryResult, error) {
	if err := validWorkspace(ws); err != nil {
		return EntryResult{}, err
	}
	if err := c.validate(); err != nil {
		return EntryResult{}, err
	}
	var res EntryResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = updateDraft(ctx, tx, ws, id, c, true)
		return err
	})
	if err != nil {
		return EntryResult{}, fmt.Errorf("update draft entry %d of workspace %s: %w", id, ws, err)
	}
	return res, nil
}

// BindEvidence attaches evidence of the workspace to any entry of it (a confirmed entry
// may gain supporting evidence, design §12.4) and returns how many bindings are new.
func (s *Store) BindEvidence(ctx context.Context, ws ids.WorkspaceID, entryID int64, evidenceIDs []int64) (int, error) {
	if err := validWorkspace(ws); err != nil {
		return 0, err
	}
	if len(evidenceIDs) > MaxEvidencePerCall {
		return 0, fmt.Errorf("%w: %d evidence ids > %d", ErrInvalid, len(evidenceIDs), MaxEvidencePerCall)
	}
	var added int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workspace_timeline_entries
			WHERE workspace_id = $1 AND id = $2 FOR SHARE)`, string(ws), entryID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ErrNotFound
		}
		var err error
		added, err = bindEvidence(ctx, tx, ws, entryID, evidenceIDs)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("bind evidence to entry %d of workspace %s: %w", entryID, ws, err)
	}
	return added, nil
}

// HumanEntry is an entry a human writes.
type HumanEntry struct {
	Workspace  ids.WorkspaceID
	OccurredAt time.Time
	Kind       string
	Title      string
	Body       string
	// Status defaults to confirmed.
	Status EntryStatus
	// Fingerprint is optional; an AI draft with the same fingerprint then only attaches
	// evidence to this entry.
	Fingerprint string
	EvidenceIDs []int64
}

// CreateHumanEntry adds a source=human entry. A fingerprint already used in the
// workspace gives ErrConflict.
func (s *Store) CreateHumanEntry(ctx context.Context, h HumanEntry) (Entry, error) {
	if err := validWorkspace(h.Workspace); err != nil {
		return Entry{}, err
	}
	if h.Status == "" {
		h.Status = EntryStatusConfirmed
	}
	if !h.Status.valid() {
		return Entry{}, fmt.Errorf("%w: entry status %q", ErrInvalid, h.Status)
	}
	if err := checkText("fingerprint", h.Fingerprint, MaxFingerprintLen, false); err != nil {
		return Entry{}, err
	}
	c := EntryContent{OccurredAt: h.OccurredAt, Kind: h.Kind, Title: h.Title, Body: h.Body, EvidenceIDs: h.EvidenceIDs}
	if err := c.validate(); err != nil {
		return Entry{}, err
	}
	var fp *string
	if h.Fingerprint != "" {
		fp = &h.Fingerprint
	}
	var e Entry
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO workspace_timeline_entries
				(workspace_id, occurred_at, kind, title, body, source, status, fingerprint)
			VALUES ($1, $2, $3, $4, $5, 'human', $6, $7) RETURNING id`,
			string(h.Workspace), h.OccurredAt, h.Kind, h.Title, h.Body, string(h.Status), fp).Scan(&id)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return fmt.Errorf("%w: fingerprint already used in the workspace", ErrConflict)
		}
		if err != nil {
			return err
		}
		if _, err := bindEvidence(ctx, tx, h.Workspace, id, h.EvidenceIDs); err != nil {
			return err
		}
		e, err = getEntry(ctx, tx, h.Workspace, id, false)
		return err
	})
	if err != nil {
		return Entry{}, fmt.Errorf("create human entry in workspace %s: %w", h.Workspace, err)
	}
	return e, nil
}

// EntryPatch is a human edit; nil fields are left as they are.
type EntryPatch struct {
	Status     *EntryStatus
	OccurredAt *time.Time
	Kind       *string
	Title      *string
	Body       *string
}

// HumanEditEntry applies a human's edit and marks the entry human-edited, so synthesis
// never changes its text again. The edit is the review a recall asked for: it clears
// WithdrawnAt and NeedsReviewAt. The entry must be one users see (the workspace's own
// or the serving version's); the edit moves it to the workspace (ProcessorVersion ""),
// so it stays visible whatever version serves later (decisions D26). An empty patch is
// ErrInvalid; a missing or invisible entry ErrNotFound.
func (s *Store) HumanEditEntry(ctx context.Context, ws ids.WorkspaceID, id int64, p EntryPatch) (Entry, error) {
	if err := validWorkspace(ws); err != nil {
		return Entry{}, err
	}
	if p.Status == nil && p.OccurredAt == nil && p.Kind == nil && p.Title == nil && p.Body == nil {
		return Entry{}, fmt.Errorf("%w: empty entry patch", ErrInvalid)
	}
	var status *string
	if p.Status != nil {
		if !p.Status.valid() {
			return Entry{}, fmt.Errorf("%w: entry status %q", ErrInvalid, *p.Status)
		}
		status = (*string)(p.Status)
	}
	if p.OccurredAt != nil && p.OccurredAt.IsZero() {
		return Entry{}, fmt.Errorf("%w: entry occurred_at is zero", ErrInvalid)
	}
	for _, f := range []struct {
		name     string
		v        *string
		max      int
		required bool
	}{
		{"entry kind", p.Kind, MaxEntryKindLen, true},
		{"entry title", p.Title, MaxEntryTitleBytes, true},
		{"entry body", p.Body, MaxEntryBodyBytes, false},
	} {
		if f.v != nil {
			if err := checkText(f.name, *f.v, f.max, f.required); err != nil {
				return Entry{}, err
			}
		}
	}
	var e Entry
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE workspace_timeline_entries e SET
				status = coalesce($3, status), occurred_at = coalesce($4, occurred_at), kind = coalesce($5, kind),
				title = coalesce($6, title), body = coalesce($7, body),
				human_edited_at = now(), updated_at = now(), withdrawn_at = NULL, needs_review_at = NULL,
				processor_version = ''
			WHERE workspace_id = $1 AND id = $2 AND `+entryInViewSQL("$8"),
			string(ws), id, status, p.OccurredAt, p.Kind, p.Title, p.Body, "")
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		e, err = getEntry(ctx, tx, ws, id, false)
		return err
	})
	if err != nil {
		return Entry{}, fmt.Errorf("human edit of entry %d in workspace %s: %w", id, ws, err)
	}
	return e, nil
}

// EntryQuery pages through a workspace's entries in (occurred_at, id) order.
type EntryQuery struct {
	// ProcessorVersion selects the view: the workspace's own entries and those of this
	// version; "" is the serving version (what users see).
	ProcessorVersion string
	IncludeHidden    bool
	After            *Cursor
	// Limit is capped at MaxPageSize.
	Limit int
}

// EntryPage is one page of entries; Next is nil on the last page.
type EntryPage struct {
	Items []Entry
	Next  *Cursor
}

// ListEntries pages through a workspace's entries, each with its evidence ids.
func (s *Store) ListEntries(ctx context.Context, ws ids.WorkspaceID, q EntryQuery) (EntryPage, error) {
	if err := validWorkspace(ws); err != nil {
		return EntryPage{}, err
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return EntryPage{}, err
	}
	if q.ProcessorVersion != "" {
		if _, err := versionName(q.ProcessorVersion); err != nil {
			return EntryPage{}, err
		}
	}
	items, err := s.queryEntries(ctx, ws, q.ProcessorVersion, q.After, q.IncludeHidden, limit+1)
	if err != nil {
		return EntryPage{}, fmt.Errorf("list entries of workspace %s: %w", ws, err)
	}
	var p EntryPage
	if len(items) > limit {
		items = items[:limit]
		last := items[limit-1]
		p.Next = &Cursor{OccurredAt: last.OccurredAt, ID: last.ID}
	}
	p.Items = items
	return p, nil
}

// ListVisibleEntries returns every entry of the workspace users see (the workspace's
// own and the serving version's) that is not hidden, in time order, with evidence ids.
// A workspace with more than MaxVisibleEntries gives ErrTooMany.
func (s *Store) ListVisibleEntries(ctx context.Context, ws ids.WorkspaceID) ([]Entry, error) {
	return s.VersionVisibleEntries(ctx, ws, "")
}

// VersionVisibleEntries is ListVisibleEntries in the view of one processor version
// ("" the serving one): the input of that version's summary (design §13).
func (s *Store) VersionVisibleEntries(ctx context.Context, ws ids.WorkspaceID, version string) ([]Entry, error) {
	if err := validWorkspace(ws); err != nil {
		return nil, err
	}
	if version != "" {
		if _, err := versionName(version); err != nil {
			return nil, err
		}
	}
	items, err := s.queryEntries(ctx, ws, version, nil, false, MaxVisibleEntries+1)
	if err != nil {
		return nil, fmt.Errorf("list visible entries of workspace %s: %w", ws, err)
	}
	if len(items) > MaxVisibleEntries {
		return nil, fmt.Errorf("list visible entries of workspace %s: %w: more than %d", ws, ErrTooMany, MaxVisibleEntries)
	}
	return items, nil
}

// entryInViewSQL is true for an entry e in the view of the processor version named
// by the parameter p (” the serving one): the workspace's own entries, and the
// version's entries that no workspace entry with the same fingerprint replaces (a
// human edit of a draft with that fingerprint, kept across promotions).
func entryInViewSQL(p string) string {
	return `(e.processor_version = '' OR (e.processor_version = coalesce(nullif(` + p + `::text, ''),
		(SELECT pv.name FROM processor_versions pv WHERE pv.state = 'serving'))
		AND (e.fingerprint IS NULL OR NOT EXISTS (SELECT 1 FROM workspace_timeline_entries h
			WHERE h.workspace_id = e.workspace_id AND h.processor_version = '' AND h.fingerprint = e.fingerprint))))`
}

// entriesQuery is the statement and arguments of queryEntries.
func entriesQuery(ws ids.WorkspaceID, version string, after *Cursor, includeHidden bool, limit int) (string, []any) {
	start := Cursor{} // the zero time (year 1) precedes every entry
	if after != nil {
		start = *after
	}
	sql := `SELECT ` + entryColumns + ` FROM workspace_timeline_entries e
		WHERE e.workspace_id = $1 AND (e.occurred_at, e.id) > ($2, $3) AND ` + entryInViewSQL("$5")
	if !includeHidden {
		sql += ` AND e.status <> 'hidden'`
	}
	sql += ` ORDER BY e.occurred_at, e.id LIMIT $4`
	return sql, []any{string(ws), start.OccurredAt, start.ID, limit, version}
}

func (s *Store) queryEntries(ctx context.Context, ws ids.WorkspaceID, version string, after *Cursor, includeHidden bool, limit int) ([]Entry, error) {
	sql, args := entriesQuery(ws, version, after, includeHidden, limit)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanEntry)
}
