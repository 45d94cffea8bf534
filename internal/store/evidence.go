package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/larkline/larkline/schemas/ids"
)

// Bounds on one evidence row. The normalizer bounds message text far below these; they
// protect the table from a runaway writer.
const (
	MaxSourceLen        = 64
	MaxSourceKeyLen     = 512
	MaxActorLen         = 256
	MaxContentHashLen   = 128
	MaxContentBytes     = 256 << 10
	MaxMetadataBytes    = 64 << 10
	maxEvidenceRowsStmt = 1000 // rows per INSERT statement; larger batches use several
	// MaxKeysPerCall bounds the keys of one DeleteEvidence or EvidenceByKeys call.
	MaxKeysPerCall = 10000
)

// EvidenceKind is the (source, source_type) pair that, with the workspace and source
// key, identifies an evidence row.
type EvidenceKind struct {
	Source     string
	SourceType string
}

// LarkMessageEvidence is the kind of every Lark message evidence row (design §8.3).
var LarkMessageEvidence = EvidenceKind{Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage}

// Evidence is one row of workspace_timeline_evidence: a workspace-scoped fact.
type Evidence struct {
	// ID is assigned by the store; ignored on write.
	ID          int64
	WorkspaceID ids.WorkspaceID
	Source      string
	SourceType  string
	// SourceKey is chat/<chat>/message/<message> for Lark messages (ids.MessageSourceKey).
	SourceKey string
	// ChatID is derived by the database from a Lark message SourceKey; ignored on write,
	// empty for other kinds.
	ChatID     ids.ChatID
	OccurredAt time.Time
	// SourceUpdatedAt is the source's update time; zero on write means OccurredAt.
	SourceUpdatedAt time.Time
	// ObservedAt is when larkline ingested this version; zero on write means now.
	ObservedAt       time.Time
	ActorID          string
	ActorDisplayName string
	Content          string
	// ContentHash identifies the version: a write with an unchanged hash is a no-op.
	ContentHash string
	// Metadata is a JSON object of whitelisted fields; empty means {}.
	Metadata          json.RawMessage
	Deleted           bool
	SynthesisEligible bool
	// Offset is the evidence-topic offset of the record that first carried the message,
	// when HasOffset: the sink sets it, the store writes it when it inserts the row and
	// keeps it through later versions (a window of record version 3 reads the messages
	// first carried below its end offset, RangeQuery.BelowOffset). Rows written before
	// migration 0004 or outside the sink have none.
	Offset    int64
	HasOffset bool
}

// offset is the row's evidence offset for the database: nil without one.
func (e *Evidence) offset() *int64 {
	if !e.HasOffset {
		return nil
	}
	o := e.Offset
	return &o
}

// Kind returns the row's (source, source_type).
func (e *Evidence) Kind() EvidenceKind {
	return EvidenceKind{Source: e.Source, SourceType: e.SourceType}
}

// Cursor returns the row's keyset position.
func (e *Evidence) Cursor() Cursor { return Cursor{OccurredAt: e.OccurredAt, ID: e.ID} }

// Validate checks e as UpsertEvidence would. The error wraps ErrInvalid.
func (e *Evidence) Validate() error {
	if _, err := ids.ParseWorkspaceID(string(e.WorkspaceID)); err != nil {
		return fmt.Errorf("%w: workspace: %w", ErrInvalid, err)
	}
	if err := validKind(e.Kind()); err != nil {
		return err
	}
	if err := checkText("source_key", e.SourceKey, MaxSourceKeyLen, true); err != nil {
		return err
	}
	if e.Kind() == LarkMessageEvidence {
		if _, err := parseMessageSourceKey(e.SourceKey); err != nil {
			return err
		}
	}
	if e.OccurredAt.IsZero() {
		return fmt.Errorf("%w: occurred_at is zero", ErrInvalid)
	}
	for _, f := range []struct {
		name, v string
		max     int
		need    bool
	}{
		{"actor_id", e.ActorID, MaxActorLen, false},
		{"actor_display_name", e.ActorDisplayName, MaxActorLen, false},
		{"content", e.Content, MaxContentBytes, false},
		{"content_hash", e.ContentHash, MaxContentHashLen, true},
	} {
		if err := checkText(f.name, f.v, f.max, f.need); err != nil {
			return err
		}
	}
	if e.HasOffset && e.Offset < 0 {
		return fmt.Errorf("%w: evidence offset %d < 0", ErrInvalid, e.Offset)
	}
	return checkJSONObject("metadata_json", e.Metadata, MaxMetadataBytes)
}

func validKind(k EvidenceKind) error {
	if err := checkText("source", k.Source, MaxSourceLen, true); err != nil {
		return err
	}
	return checkText("source_type", k.SourceType, MaxSourceLen, true)
}

// parseMessageSourceKey returns the chat of chat/<chat>/message/<message>.
func parseMessageSourceKey(key string) (ids.ChatID, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "chat" || parts[2] != "message" {
		return "", fmt.Errorf("%w: lark message source_key %q is not chat/<chat>/message/<message>", ErrInvalid, key)
	}
	chat, err := ids.ParseChatID(parts[1])
	if err != nil {
		return "", fmt.Errorf("%w: source_key: %w", ErrInvalid, err)
	}
	if _, err := ids.ParseMessageID(parts[3]); err != nil {
		return "", fmt.Errorf("%w: source_key: %w", ErrInvalid, err)
	}
	return chat, nil
}

// EvidenceResult says what an upsert did to one row.
type EvidenceResult uint8

// Upsert results.
const (
	// EvidenceInserted: the row did not exist.
	EvidenceInserted EvidenceResult = iota + 1
	// EvidenceUpdated: a new version (content_hash changed) replaced the row.
	EvidenceUpdated
	// EvidenceRedacted: a deleted version replaced a version that was not deleted.
	EvidenceRedacted
	// EvidenceUnchanged: the stored row already has this content_hash (a duplicate).
	EvidenceUnchanged
	// EvidenceStale: the stored version is newer (later source_updated_at) or deleted,
	// and a non-deleted version never replaces a deleted one; nothing changed.
	EvidenceStale
)

func (r EvidenceResult) String() string {
	switch r {
	case EvidenceInserted:
		return "inserted"
	case EvidenceUpdated:
		return "updated"
	case EvidenceRedacted:
		return "redacted"
	case EvidenceUnchanged:
		return "unchanged"
	case EvidenceStale:
		return "stale"
	}
	return fmt.Sprintf("EvidenceResult(%d)", uint8(r))
}

// UpsertOutcome is the result for one input row of UpsertEvidence.
type UpsertOutcome struct {
	// ID of the stored row (0 only for EvidenceStale when a concurrent writer created
	// the row within the same instant).
	ID     int64
	Result EvidenceResult
}

// InvalidEvidenceError names the first invalid row of a batch. It wraps ErrInvalid.
type InvalidEvidenceError struct {
	Index int
	Err   error
}

func (e *InvalidEvidenceError) Error() string {
	return fmt.Sprintf("evidence[%d]: %v", e.Index, e.Err)
}

func (e *InvalidEvidenceError) Unwrap() error { return e.Err }

type evidenceIdentity struct {
	ws                            ids.WorkspaceID
	source, sourceType, sourceKey string
}

// evidenceVersionRule is the one statement of which version of a message wins: it
// writes a version only when its content_hash differs and it is not older than the
// stored one; a deleted version always replaces a live one and a live one never
// replaces a deleted one. Every version of a stored key goes through it; the COPY
// path only writes keys that have no row.
const evidenceVersionRule = `    ON CONFLICT (workspace_id, source, source_type, source_key) DO UPDATE SET
        occurred_at = excluded.occurred_at,
        source_updated_at = excluded.source_updated_at,
        observed_at = excluded.observed_at,
        actor_id = excluded.actor_id,
        actor_display_name = excluded.actor_display_name,
        content = excluded.content,
        content_hash = excluded.content_hash,
        metadata_json = excluded.metadata_json,
        deleted = excluded.deleted,
        synthesis_eligible = excluded.synthesis_eligible
    WHERE e.content_hash IS DISTINCT FROM excluded.content_hash
      AND CASE WHEN e.deleted THEN excluded.deleted AND excluded.source_updated_at >= e.source_updated_at
               WHEN excluded.deleted THEN true
               ELSE excluded.source_updated_at >= e.source_updated_at END
    RETURNING e.id, e.workspace_id, e.source, e.source_type, e.source_key, (e.xmax = 0) AS inserted`

// upsertEvidenceSQL is the upsert of one batch of distinct keys: the input arrives as
// arrays, the INSERT applies evidenceVersionRule, and the outer query reads the rows as
// they were before the statement (every part of a statement shares one snapshot) to
// tell an update from a redaction and a duplicate from a stale version: a Lark
// message's with storedMessageSQL, another kind's with a per-row lookup on the four
// key columns. It returns the written rows (ord 0, by key) and the previous rows (by
// input ordinal) and leaves the matching to Go: joining them in SQL would sort both
// sides by text.
const upsertEvidenceSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                         $5::timestamptz[], $6::timestamptz[], $7::timestamptz[],
                         $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
                         $13::bool[], $14::bool[], $15::int8[])
        WITH ORDINALITY AS t(workspace_id, source, source_type, source_key,
                             occurred_at, source_updated_at, observed_at,
                             actor_id, actor_display_name, content, content_hash, metadata_json,
                             deleted, synthesis_eligible, evidence_offset, ord)
), up AS (
    INSERT INTO workspace_timeline_evidence AS e (
        workspace_id, source, source_type, source_key, occurred_at, source_updated_at, observed_at,
        actor_id, actor_display_name, content, content_hash, metadata_json, deleted, synthesis_eligible, evidence_offset)
    SELECT workspace_id, source, source_type, source_key, occurred_at, source_updated_at, observed_at,
           actor_id, actor_display_name, content, content_hash, metadata_json::jsonb, deleted, synthesis_eligible,
           evidence_offset
    FROM input ORDER BY ord
` + evidenceVersionRule + `
)
SELECT 0::bigint, id, workspace_id, source, source_type, source_key, inserted, false, ''
FROM up
UNION ALL
SELECT i.ord, p.id, '', '', '', '', false, p.deleted, p.content_hash
FROM input i CROSS JOIN LATERAL (` + storedMessageSQL + `) p
WHERE i.source = '` + ids.SourceLark + `' AND i.source_type = '` + ids.SourceTypeLarkMessage + `'
UNION ALL
SELECT i.ord, p.id, '', '', '', '', false, p.deleted, p.content_hash
FROM input i CROSS JOIN LATERAL (
    SELECT e.id, e.deleted, e.content_hash FROM workspace_timeline_evidence e
    WHERE e.workspace_id = i.workspace_id AND e.source = i.source
      AND e.source_type = i.source_type AND e.source_key = i.source_key
    LIMIT 1) p
WHERE NOT (i.source = '` + ids.SourceLark + `' AND i.source_type = '` + ids.SourceTypeLarkMessage + `')`

// storedMessageSQL is the stored row of the Lark message i, as one probe of
// message_idx: source_key pinned, the other three key columns compared with IS NOT
// DISTINCT FROM, which no index serves, so that on a table without statistics the
// planner cannot take a prefix of time_idx or scan the table, which read every row of
// the workspace per call (D47). The LIMIT keeps it a per-row probe.
const storedMessageSQL = `
    SELECT e.id, e.deleted, e.content_hash FROM workspace_timeline_evidence e
    WHERE e.source_key = i.source_key AND e.chat_id IS NOT NULL
      AND (e.workspace_id, e.source, e.source_type) IS NOT DISTINCT FROM (i.workspace_id, i.source, i.source_type)
    LIMIT 1`

// UpsertEvidence writes a batch of evidence versions idempotently and reports, per input
// row and in input order, what happened. All of it is one transaction. In a batch of at
// least copyEvidenceMinRows rows the keys without a stored row are COPYed into the
// table and the rest go through the array statement; a smaller batch goes as arrays
// in statements of up to 1000 distinct keys. A key repeated in the batch is applied in
// input order (later statements). An invalid row rejects the whole batch before anything
// is written (*InvalidEvidenceError, wrapping ErrInvalid).
//
// Outcomes are exact unless another writer changes the same key concurrently; the data
// is correct either way.
func (s *Store) UpsertEvidence(ctx context.Context, batch []Evidence) ([]UpsertOutcome, error) {
	return s.upsertEvidence(ctx, batch, len(batch) >= copyEvidenceMinRows)
}

// copyEvidenceMinRows is the smallest batch that UpsertEvidence writes with COPY; a
// smaller one saves the probe's and the copy's round trips. The sink's calls are of
// 625 to 1,000 rows under load, where the COPY path runs the sink at 0.87-0.94 of a
// raw CopyFrom against 0.53-0.59 with the arrays alone (docs/perf.md, D47); the
// bound itself dates from the temporary-table path and was not measured again.
const copyEvidenceMinRows = 256

func (s *Store) upsertEvidence(ctx context.Context, batch []Evidence, viaCopy bool) ([]UpsertOutcome, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	now := time.Now().UTC()
	rows := make([]Evidence, len(batch))
	for i := range batch {
		e := batch[i]
		if err := e.Validate(); err != nil {
			return nil, &InvalidEvidenceError{Index: i, Err: err}
		}
		if e.SourceUpdatedAt.IsZero() {
			e.SourceUpdatedAt = e.OccurredAt
		}
		if e.ObservedAt.IsZero() {
			e.ObservedAt = now
		}
		if len(e.Metadata) == 0 {
			e.Metadata = json.RawMessage("{}")
		}
		rows[i] = e
	}

	// A statement cannot touch one row twice: group k holds the k-th occurrence of each
	// key, groups run in order (so each key's versions apply in input order).
	var groups [][]int
	occurrence := map[evidenceIdentity]int{}
	for i := range rows {
		id := evidenceIdentity{rows[i].WorkspaceID, rows[i].Source, rows[i].SourceType, rows[i].SourceKey}
		k := occurrence[id]
		occurrence[id] = k + 1
		if k == len(groups) {
			groups = append(groups, nil)
		}
		groups[k] = append(groups[k], i)
	}

	out := make([]UpsertOutcome, len(rows))
	if viaCopy {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return upsertEvidenceCopy(ctx, tx, rows, groups, out)
		})
		if err == nil {
			return out, nil
		}
		// A key another writer inserted after the probe: nothing of the call was
		// written, and the array path upserts every row.
		if !isEvidenceKeyConflict(err) {
			return nil, fmt.Errorf("upsert %d evidence rows: %w", len(rows), err)
		}
	}
	// Large groups are split to bound statement size.
	var stmts [][]int
	for _, g := range groups {
		for len(g) > maxEvidenceRowsStmt {
			stmts = append(stmts, g[:maxEvidenceRowsStmt])
			g = g[maxEvidenceRowsStmt:]
		}
		stmts = append(stmts, g)
	}
	run := func(q querier) error {
		for _, idx := range stmts {
			if err := upsertEvidenceStmt(ctx, q, rows, idx, out); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if len(stmts) == 1 {
		err = run(s.pool)
	} else {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return run(tx) })
	}
	if err != nil {
		return nil, fmt.Errorf("upsert %d evidence rows: %w", len(rows), err)
	}
	return out, nil
}

// isEvidenceKeyConflict reports whether err is a unique violation of an evidence key.
func isEvidenceKeyConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" &&
		pgErr.ConstraintName == "workspace_timeline_evidence_source_key_uq"
}

// upsertResult is what one statement tells about one input row: whether it wrote the
// row (and whether that was an insert), and the row as it was before the statement.
type upsertResult struct {
	written, inserted, existed, prevDeleted, prevSameHash bool
	id, prevID                                            int64
}

// outcome turns what happened to the row of e into its reported outcome.
func (r *upsertResult) outcome(e *Evidence) UpsertOutcome {
	switch {
	case r.written && r.inserted:
		return UpsertOutcome{ID: r.id, Result: EvidenceInserted}
	case r.written && e.Deleted && !(r.existed && r.prevDeleted):
		return UpsertOutcome{ID: r.id, Result: EvidenceRedacted}
	case r.written:
		return UpsertOutcome{ID: r.id, Result: EvidenceUpdated}
	case r.existed && r.prevSameHash:
		return UpsertOutcome{ID: r.prevID, Result: EvidenceUnchanged}
	case r.existed:
		return UpsertOutcome{ID: r.prevID, Result: EvidenceStale}
	}
	// Created by a concurrent writer after this statement's snapshot.
	return UpsertOutcome{Result: EvidenceStale}
}

// probeEvidenceSQL finds which Lark messages of a batch are stored (storedMessageSQL)
// and draws an id from the table's sequence for each one that is not. Rows come back
// in input order.
const probeEvidenceSQL = `
SELECT i.ord, s.id IS NOT NULL,
       CASE WHEN s.id IS NULL THEN nextval('workspace_timeline_evidence_id_seq') ELSE 0 END
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS i(workspace_id, source, source_type, source_key, ord)
LEFT JOIN LATERAL (` + storedMessageSQL + `) s ON true
ORDER BY i.ord`

// evidenceCopyColumns are the columns the COPY path writes; chat_id is generated.
var evidenceCopyColumns = []string{"id", "workspace_id", "source", "source_type", "source_key",
	"occurred_at", "source_updated_at", "observed_at", "actor_id", "actor_display_name", "content",
	"content_hash", "metadata_json", "deleted", "synthesis_eligible", "evidence_offset"}

// upsertEvidenceCopy writes a batch inside tx: the first occurrence of every key that
// has no stored row is COPYed straight into the table with an id drawn beforehand
// (the bulk of a sink's batch: messages seen for the first time), and every other row
// (a stored key's new version, duplicate or recall, and a key's later occurrences in
// input order) goes through upsertEvidenceStmt, which applies the version rule and
// reports each outcome. A key another writer inserts between the probe and the COPY
// fails the COPY with a unique violation; the caller then upserts the whole batch
// with the array statement.
func upsertEvidenceCopy(ctx context.Context, tx pgx.Tx, rows []Evidence, groups [][]int, out []UpsertOutcome) error {
	// The first occurrences of Lark messages are probed; any other kind of evidence
	// goes through the array statement.
	var first, rest []int // indexes into rows
	for _, i := range groups[0] {
		if rows[i].Kind() == LarkMessageEvidence {
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	fresh, freshIDs, stored, err := probeEvidence(ctx, tx, rows, first)
	if err != nil {
		return err
	}
	rest = append(rest, stored...)
	// New rows get their ids in input order, as the array statement gives them.
	slices.Sort(freshIDs)
	if len(fresh) > 0 {
		copied, err := tx.CopyFrom(ctx, pgx.Identifier{"workspace_timeline_evidence"}, evidenceCopyColumns,
			pgx.CopyFromSlice(len(fresh), func(j int) ([]any, error) {
				e := &rows[fresh[j]]
				return []any{freshIDs[j], string(e.WorkspaceID), e.Source, e.SourceType, e.SourceKey,
					e.OccurredAt, e.SourceUpdatedAt, e.ObservedAt, e.ActorID, e.ActorDisplayName, e.Content,
					e.ContentHash, e.Metadata, e.Deleted, e.SynthesisEligible, e.offset()}, nil
			}))
		if err != nil {
			return fmt.Errorf("copy %d new rows: %w", len(fresh), err)
		}
		if copied != int64(len(fresh)) {
			return fmt.Errorf("copied %d of %d new rows", copied, len(fresh))
		}
		for j, i := range fresh {
			out[i] = UpsertOutcome{ID: freshIDs[j], Result: EvidenceInserted}
		}
	}
	// The stored keys' rows, then each later occurrence group in order.
	for k := range groups {
		if k > 0 {
			rest = groups[k]
		}
		for len(rest) > 0 {
			m := min(len(rest), maxEvidenceRowsStmt)
			if err := upsertEvidenceStmt(ctx, tx, rows, rest[:m], out); err != nil {
				return err
			}
			rest = rest[m:]
		}
	}
	return nil
}

// evidenceArrays are the arguments of upsertEvidenceSQL for the rows at idx: one
// array per column.
func evidenceArrays(rows []Evidence, idx []int) []any {
	n := len(idx)
	var (
		ws, src, typ, key           = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		occurred, updated, observed = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		actor, actorName, content   = make([]string, n), make([]string, n), make([]string, n)
		hash, meta                  = make([]string, n), make([]string, n)
		deleted, eligible           = make([]bool, n), make([]bool, n)
		offsets                     = make([]*int64, n)
	)
	for j, i := range idx {
		e := &rows[i]
		ws[j], src[j], typ[j], key[j] = string(e.WorkspaceID), e.Source, e.SourceType, e.SourceKey
		occurred[j], updated[j], observed[j] = e.OccurredAt, e.SourceUpdatedAt, e.ObservedAt
		actor[j], actorName[j], content[j] = e.ActorID, e.ActorDisplayName, e.Content
		hash[j], meta[j] = e.ContentHash, string(e.Metadata)
		deleted[j], eligible[j] = e.Deleted, e.SynthesisEligible
		offsets[j] = e.offset()
	}
	return []any{ws, src, typ, key, occurred, updated, observed, actor, actorName, content, hash, meta, deleted, eligible, offsets}
}

// probeEvidence splits the rows at idx (Lark messages, each key once) into the ones
// without a stored row, with the ids drawn for them, and the ones with.
func probeEvidence(ctx context.Context, tx pgx.Tx, rows []Evidence, idx []int) (fresh []int, drawn []int64, stored []int, err error) {
	n := len(idx)
	if n == 0 {
		return nil, nil, nil, nil
	}
	ws, src, typ, key := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for j, i := range idx {
		e := &rows[i]
		ws[j], src[j], typ[j], key[j] = string(e.WorkspaceID), e.Source, e.SourceType, e.SourceKey
	}
	// CacheDescribe: an unnamed statement, planned with each call's arrays (see
	// upsertEvidenceStmt).
	res, err := tx.Query(ctx, probeEvidenceSQL, pgx.QueryExecModeCacheDescribe, ws, src, typ, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("probe stored keys: %w", err)
	}
	var (
		ord, id int64
		found   bool
	)
	_, err = pgx.ForEachRow(res, []any{&ord, &found, &id}, func() error {
		if ord < 1 || ord > int64(n) {
			return fmt.Errorf("probe returned ordinal %d for %d keys", ord, n)
		}
		if found {
			stored = append(stored, idx[ord-1])
		} else {
			fresh, drawn = append(fresh, idx[ord-1]), append(drawn, id)
		}
		return nil
	})
	if err == nil && len(fresh)+len(stored) != n {
		err = fmt.Errorf("probe answered %d of %d keys", len(fresh)+len(stored), n)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("probe stored keys: %w", err)
	}
	return fresh, drawn, stored, nil
}

func upsertEvidenceStmt(ctx context.Context, q querier, rows []Evidence, idx []int, out []UpsertOutcome) error {
	n := len(idx)
	// An unnamed statement (CacheDescribe) is planned with each call's arrays. A cached
	// named statement switches to a generic plan after five calls, which cannot see the
	// batch size and joins the batch against the whole table: seconds instead of
	// milliseconds once the table holds a few thousand rows.
	res, err := q.Query(ctx, upsertEvidenceSQL, append([]any{pgx.QueryExecModeCacheDescribe}, evidenceArrays(rows, idx)...)...)
	if err != nil {
		return err
	}
	pos := make(map[evidenceIdentity]int, n)
	for j, i := range idx {
		e := &rows[i]
		pos[evidenceIdentity{e.WorkspaceID, e.Source, e.SourceType, e.SourceKey}] = j
	}
	results := make([]upsertResult, n)
	prevHash := make([]string, n)
	var (
		ord, id               int64
		ws1, src1, typ1, key1 string
		ins, prevDeleted      bool
		hash1                 string
	)
	_, err = pgx.ForEachRow(res, []any{&ord, &id, &ws1, &src1, &typ1, &key1, &ins, &prevDeleted, &hash1}, func() error {
		if ord > 0 {
			if ord > int64(n) {
				return fmt.Errorf("upsert returned ordinal %d for %d inputs", ord, n)
			}
			r := &results[ord-1]
			r.existed, r.prevID, r.prevDeleted = true, id, prevDeleted
			prevHash[ord-1] = hash1
			return nil
		}
		j, ok := pos[evidenceIdentity{ids.WorkspaceID(ws1), src1, typ1, key1}]
		if !ok {
			return fmt.Errorf("upsert returned a row it was not given (id %d)", id)
		}
		results[j].written, results[j].id, results[j].inserted = true, id, ins
		return nil
	})
	if err != nil {
		return err
	}
	for j := range results {
		e := &rows[idx[j]]
		results[j].prevSameHash = results[j].existed && prevHash[j] == e.ContentHash
		out[idx[j]] = results[j].outcome(e)
	}
	return nil
}

// DeleteEvidence removes evidence rows (tombstones after retention, design §15) and,
// by cascade, their entry bindings. Keys that do not exist are ignored; it returns how
// many rows it deleted.
func (s *Store) DeleteEvidence(ctx context.Context, ws ids.WorkspaceID, kind EvidenceKind, sourceKeys []string) (int64, error) {
	if err := validWorkspace(ws); err != nil {
		return 0, err
	}
	if err := validKind(kind); err != nil {
		return 0, err
	}
	if len(sourceKeys) > MaxKeysPerCall {
		return 0, fmt.Errorf("%w: %d keys > %d", ErrInvalid, len(sourceKeys), MaxKeysPerCall)
	}
	if len(sourceKeys) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, deleteEvidenceSQL(kind),
		string(ws), kind.Source, kind.SourceType, sourceKeys)
	if err != nil {
		return 0, fmt.Errorf("delete evidence of workspace %s: %w", ws, err)
	}
	return tag.RowsAffected(), nil
}

const evidenceColumns = `id, workspace_id, source, source_type, source_key, coalesce(chat_id, ''), evidence_offset,
	occurred_at, source_updated_at, observed_at, actor_id, actor_display_name, content, content_hash,
	metadata_json, deleted, synthesis_eligible`

func scanEvidence(row pgx.CollectableRow) (Evidence, error) {
	var (
		e        Evidence
		ws, chat string
		offset   *int64
	)
	err := row.Scan(&e.ID, &ws, &e.Source, &e.SourceType, &e.SourceKey, &chat, &offset,
		&e.OccurredAt, &e.SourceUpdatedAt, &e.ObservedAt, &e.ActorID, &e.ActorDisplayName,
		&e.Content, &e.ContentHash, rawJSON(&e.Metadata), &e.Deleted, &e.SynthesisEligible)
	e.WorkspaceID, e.ChatID = ids.WorkspaceID(ws), ids.ChatID(chat)
	if offset != nil {
		e.Offset, e.HasOffset = *offset, true
	}
	e.OccurredAt, e.SourceUpdatedAt, e.ObservedAt = e.OccurredAt.UTC(), e.SourceUpdatedAt.UTC(), e.ObservedAt.UTC()
	return e, err
}

// EvidencePage is one keyset page. Next is nil on the last page; otherwise pass it as
// the next call's after.
type EvidencePage struct {
	Items []Evidence
	Next  *Cursor
}

// page runs a keyset query that selects limit+1 rows and turns the extra row into Next.
func (s *Store) evidencePage(ctx context.Context, limit int, sql string, args ...any) (EvidencePage, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return EvidencePage{}, err
	}
	items, err := pgx.CollectRows(rows, scanEvidence)
	if err != nil {
		return EvidencePage{}, err
	}
	var p EvidencePage
	if len(items) > limit {
		items = items[:limit]
		c := items[limit-1].Cursor()
		p.Next = &c
	}
	p.Items = items
	return p, nil
}

// ListEvidence pages through a workspace's evidence of one kind in (occurred_at, id)
// order, starting after the given cursor (nil: from the start). limit is capped at
// MaxPageSize.
func (s *Store) ListEvidence(ctx context.Context, ws ids.WorkspaceID, kind EvidenceKind, after *Cursor, limit int) (EvidencePage, error) {
	if err := validWorkspace(ws); err != nil {
		return EvidencePage{}, err
	}
	if err := validKind(kind); err != nil {
		return EvidencePage{}, err
	}
	limit, err := pageLimit(limit)
	if err != nil {
		return EvidencePage{}, err
	}
	var p EvidencePage
	if after == nil {
		p, err = s.evidencePage(ctx, limit, `SELECT `+evidenceColumns+` FROM workspace_timeline_evidence
			WHERE workspace_id = $1 AND source = $2 AND source_type = $3
			ORDER BY occurred_at, id LIMIT $4`, string(ws), kind.Source, kind.SourceType, limit+1)
	} else {
		p, err = s.evidencePage(ctx, limit, `SELECT `+evidenceColumns+` FROM workspace_timeline_evidence
			WHERE workspace_id = $1 AND source = $2 AND source_type = $3 AND (occurred_at, id) > ($4, $5)
			ORDER BY occurred_at, id LIMIT $6`, string(ws), kind.Source, kind.SourceType, after.OccurredAt, after.ID, limit+1)
	}
	if err != nil {
		return EvidencePage{}, fmt.Errorf("list evidence of workspace %s: %w", ws, err)
	}
	return p, nil
}

// RangeQuery selects one chat's Lark message evidence in [From, To).
type RangeQuery struct {
	Workspace ids.WorkspaceID
	Chat      ids.ChatID
	From, To  time.Time
	// After continues a previous page (nil: from From).
	After *Cursor
	// Limit is capped at MaxPageSize.
	Limit int
	// EligibleOnly keeps only synthesis-eligible rows that are not deleted.
	EligibleOnly bool
	// BelowOffset, when positive, keeps only rows whose message was first carried
	// below this evidence-topic offset (Evidence.Offset), and rows without one: the
	// evidence a closed window of record version 3 names, not messages that reached
	// the chat's partition after it.
	BelowOffset int64
}

// EvidenceInRange pages through one chat's evidence in a time window in (occurred_at, id)
// order (design §12.1).
func (s *Store) EvidenceInRange(ctx context.Context, q RangeQuery) (EvidencePage, error) {
	if err := validWorkspace(q.Workspace); err != nil {
		return EvidencePage{}, err
	}
	if err := validChat(q.Chat); err != nil {
		return EvidencePage{}, err
	}
	if q.From.IsZero() || !q.From.Before(q.To) {
		return EvidencePage{}, fmt.Errorf("%w: range [%s, %s) is empty", ErrInvalid, q.From, q.To)
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return EvidencePage{}, err
	}
	after := Cursor{OccurredAt: q.From, ID: 0} // ids start at 1: (From, 0) precedes every row at From
	if q.After != nil {
		after = *q.After
	}
	sql := `SELECT ` + evidenceColumns + ` FROM workspace_timeline_evidence
		WHERE workspace_id = $1 AND chat_id = $2 AND occurred_at >= $3 AND occurred_at < $4
		  AND (occurred_at, id) > ($5, $6)`
	if q.EligibleOnly {
		sql += ` AND synthesis_eligible AND NOT deleted`
	}
	args := []any{string(q.Workspace), string(q.Chat), q.From, q.To, after.OccurredAt, after.ID, limit + 1}
	if q.BelowOffset > 0 {
		sql += ` AND (evidence_offset IS NULL OR evidence_offset < $8)`
		args = append(args, q.BelowOffset)
	}
	sql += ` ORDER BY occurred_at, id LIMIT $7`
	p, err := s.evidencePage(ctx, limit, sql, args...)
	if err != nil {
		return EvidencePage{}, fmt.Errorf("evidence of workspace %s chat %s in range: %w", q.Workspace, q.Chat, err)
	}
	return p, nil
}

// EvidenceByKeys returns the stored rows among sourceKeys, in (occurred_at, id) order.
// Keys without a row are simply absent.
func (s *Store) EvidenceByKeys(ctx context.Context, ws ids.WorkspaceID, kind EvidenceKind, sourceKeys []string) ([]Evidence, error) {
	if err := validWorkspace(ws); err != nil {
		return nil, err
	}
	if err := validKind(kind); err != nil {
		return nil, err
	}
	if len(sourceKeys) > MaxKeysPerCall {
		return nil, fmt.Errorf("%w: %d keys > %d", ErrInvalid, len(sourceKeys), MaxKeysPerCall)
	}
	if len(sourceKeys) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, evidenceByKeysSQL(kind), string(ws), kind.Source, kind.SourceType, sourceKeys)
	if err != nil {
		return nil, fmt.Errorf("evidence of workspace %s by key: %w", ws, err)
	}
	out, err := pgx.CollectRows(rows, scanEvidence)
	if err != nil {
		return nil, fmt.Errorf("evidence of workspace %s by key: %w", ws, err)
	}
	return out, nil
}

// evidenceByKeysSQL reads the rows of kind whose source_key is among $4 in workspace
// $1 ($2, $3: the kind), in (occurred_at, id) order.
func evidenceByKeysSQL(kind EvidenceKind) string {
	if kind == LarkMessageEvidence {
		return `SELECT ` + evidenceColumns + ` FROM ` + messagesByKeySQL + ` ORDER BY occurred_at, id`
	}
	return `SELECT ` + evidenceColumns + ` FROM workspace_timeline_evidence WHERE ` + kindKeysSQL + ` ORDER BY occurred_at, id`
}

// deleteEvidenceSQL deletes what evidenceByKeysSQL reads.
func deleteEvidenceSQL(kind EvidenceKind) string {
	if kind == LarkMessageEvidence {
		return `DELETE FROM workspace_timeline_evidence WHERE id IN (SELECT e.id FROM ` + messagesByKeySQL + `)`
	}
	return `DELETE FROM workspace_timeline_evidence WHERE ` + kindKeysSQL
}

const kindKeysSQL = `workspace_id = $1 AND source = $2 AND source_type = $3 AND source_key = ANY($4::text[])`

// messagesByKeySQL is the stored row, if any, of each Lark message key of $4 in
// workspace $1, found as storedMessageSQL finds a row: one message_idx probe a key
// (D47). Compared on the four key columns, or with source_key = ANY, a table
// without statistics led the planner to a prefix of time_idx or a sequential scan,
// reading every row of the workspace per call (4,000 rows for a window's 40 keys).
const messagesByKeySQL = `(SELECT DISTINCT unnest($4::text[]) AS key) k CROSS JOIN LATERAL (
    SELECT * FROM workspace_timeline_evidence e
    WHERE e.source_key = k.key AND e.chat_id IS NOT NULL
      AND (e.workspace_id, e.source, e.source_type) IS NOT DISTINCT FROM ($1::text, $2::text, $3::text)
    LIMIT 1) e`

// WorkspacesHoldingMessage returns, ordered by id, every workspace holding evidence
// of the Lark message (any version, redacted or not): the workspaces a recall of it
// must reach, whatever their state or bindings now (issue #29). One index probe.
func (s *Store) WorkspacesHoldingMessage(ctx context.Context, chat ids.ChatID, msg ids.MessageID) ([]ids.WorkspaceID, error) {
	if _, err := ids.ParseChatID(string(chat)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := ids.ParseMessageID(string(msg)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT workspace_id FROM workspace_timeline_evidence
		WHERE source_key = $1 AND chat_id = $2 AND source = $3 AND source_type = $4
		ORDER BY workspace_id`, ids.MessageSourceKey(chat, msg), string(chat),
		LarkMessageEvidence.Source, LarkMessageEvidence.SourceType)
	if err != nil {
		return nil, fmt.Errorf("workspaces holding message %s: %w", msg, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ids.WorkspaceID, error) {
		var ws string
		err := r.Scan(&ws)
		return ids.WorkspaceID(ws), err
	})
	if err != nil {
		return nil, fmt.Errorf("workspaces holding message %s: %w", msg, err)
	}
	return out, nil
}

// ChatRef names one chat of one workspace.
type ChatRef struct {
	Workspace ids.WorkspaceID
	Chat      ids.ChatID
}

// MaxChatRefs bounds the chats one ChatsWithEvidence call asks about.
const MaxChatRefs = 100_000

// ChatsWithEvidence returns, in the order given, those of chats that hold
// synthesis-eligible Lark message evidence that occurred in [from, to): the chats
// with a window there. One index probe per chat (chat_time_idx), no rows read.
func (s *Store) ChatsWithEvidence(ctx context.Context, chats []ChatRef, from, to time.Time) ([]ChatRef, error) {
	if from.IsZero() || !from.Before(to) {
		return nil, fmt.Errorf("%w: range [%s, %s) is empty", ErrInvalid, from, to)
	}
	if len(chats) > MaxChatRefs {
		return nil, fmt.Errorf("%w: %d chats (at most %d)", ErrInvalid, len(chats), MaxChatRefs)
	}
	if len(chats) == 0 {
		return nil, nil
	}
	wss, cs := make([]string, len(chats)), make([]string, len(chats))
	for i, c := range chats {
		if err := validWorkspace(c.Workspace); err != nil {
			return nil, err
		}
		if err := validChat(c.Chat); err != nil {
			return nil, err
		}
		wss[i], cs[i] = string(c.Workspace), string(c.Chat)
	}
	rows, err := s.pool.Query(ctx, `SELECT c.ws, c.chat FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS c(ws, chat, n)
		WHERE EXISTS (SELECT 1 FROM workspace_timeline_evidence e
			WHERE e.workspace_id = c.ws AND e.chat_id = c.chat AND e.occurred_at >= $3 AND e.occurred_at < $4
			  AND e.synthesis_eligible)
		ORDER BY c.n`, wss, cs, from, to)
	if err != nil {
		return nil, fmt.Errorf("chats with evidence in [%s, %s): %w", from, to, err)
	}
	defer rows.Close()
	var out []ChatRef
	for rows.Next() {
		var ws, chat string
		if err := rows.Scan(&ws, &chat); err != nil {
			return nil, fmt.Errorf("chats with evidence: %w", err)
		}
		out = append(out, ChatRef{Workspace: ids.WorkspaceID(ws), Chat: ids.ChatID(chat)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chats with evidence in [%s, %s): %w", from, to, err)
	}
	return out, nil
}
