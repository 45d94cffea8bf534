package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/larkline/larkline/schemas/ids"
)

// VersionState is a processor version's place in the registry (decisions D26).
type VersionState string

// Version states. Exactly one version is serving: the API, the page and the summary
// show its output. A candidate runs next to it and writes into its own namespace,
// invisible to users. A retired version's outputs are deleted; its name is never
// reused.
const (
	VersionServing   VersionState = "serving"
	VersionCandidate VersionState = "candidate"
	VersionRetired   VersionState = "retired"
)

// Sentinels of the version registry.
var (
	// ErrVersionExists: RegisterVersion was asked for a name the registry holds
	// (serving, candidate or retired: a name is never reused).
	ErrVersionExists = errors.New("processor version already exists")
	// ErrVersionServing: the version is serving and may not be retired.
	ErrVersionServing = errors.New("processor version is serving")
	// ErrVersionRetired: the version is retired and may not serve again.
	ErrVersionRetired = errors.New("processor version is retired")
	// ErrVersionInUse: a synthesis-only version synthesizes the version's windows, so
	// it may not be retired before that one.
	ErrVersionInUse = errors.New("processor version is in use")
)

// ProcessorVersion is one row of the version registry.
type ProcessorVersion struct {
	Name  string
	State VersionState
	// Window and Grace are the version's window geometry; zero while unknown (the
	// default version before its windows role first started).
	Window, Grace time.Duration
	// CodeVersion is the build of the larkline binary that started the version.
	CodeVersion string
	// Groups and Topics are the Kafka consumer groups and topics the version owns;
	// retiring it deletes them.
	Groups, Topics []string
	// StartFrom is the evidence time the version was started from (nil: the start of
	// the evidence topic).
	StartFrom *time.Time
	// SynthesisOf names the version whose closed windows a synthesis-only version
	// synthesizes again; "" for a version with its own window processor.
	SynthesisOf string
	// Synthesis is the version's own synthesis settings; nil: the deployment's.
	Synthesis  *VersionSynthesis
	CreatedAt  time.Time
	PromotedAt *time.Time
	RetiredAt  *time.Time
}

// VersionSpec is what a version records when it starts.
type VersionSpec struct {
	Name          string
	Window, Grace time.Duration
	CodeVersion   string
	Groups        []string
	Topics        []string
	StartFrom     *time.Time
	// SynthesisOf makes a synthesis-only version of that one (see SeedSynthesisWindows).
	SynthesisOf string
	// Synthesis records the version's own synthesis settings; nil leaves it to the
	// deployment's configuration.
	Synthesis *VersionSynthesis
}

func (v *VersionSpec) validate() error {
	if _, err := ids.ParseProcessorVersion(v.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if v.SynthesisOf != "" {
		if _, err := ids.ParseProcessorVersion(v.SynthesisOf); err != nil {
			return fmt.Errorf("%w: synthesis of: %w", ErrInvalid, err)
		}
	}
	if v.Window < time.Second || v.Grace < 0 {
		return fmt.Errorf("%w: version %s: window %s, grace %s", ErrInvalid, v.Name, v.Window, v.Grace)
	}
	if v.Synthesis != nil {
		if err := v.Synthesis.validate(); err != nil {
			return fmt.Errorf("%w: version %s: %w", ErrInvalid, v.Name, err)
		}
	}
	return nil
}

func versionName(name string) (string, error) {
	if name == "" {
		return ids.DefaultProcessorVersion, nil
	}
	if _, err := ids.ParseProcessorVersion(name); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return name, nil
}

const versionColumns = `name, state, window_seconds, grace_seconds, code_version, groups, topics, start_from,
	coalesce(synthesis_of, ''), synthesis, created_at, promoted_at, retired_at`

func scanVersion(row pgx.CollectableRow) (ProcessorVersion, error) {
	var (
		v             ProcessorVersion
		state         string
		window, grace *int64
	)
	err := row.Scan(&v.Name, &state, &window, &grace, &v.CodeVersion, &v.Groups, &v.Topics, &v.StartFrom,
		&v.SynthesisOf, &v.Synthesis, &v.CreatedAt, &v.PromotedAt, &v.RetiredAt)
	v.State = VersionState(state)
	if window != nil {
		v.Window = time.Duration(*window) * time.Second
	}
	if grace != nil {
		v.Grace = time.Duration(*grace) * time.Second
	}
	v.CreatedAt = v.CreatedAt.UTC()
	for _, p := range []**time.Time{&v.StartFrom, &v.PromotedAt, &v.RetiredAt} {
		if *p != nil {
			t := (*p).UTC()
			*p = &t
		}
	}
	return v, err
}

// RegisterVersion adds a candidate version. A name the registry already holds, in any
// state, is ErrVersionExists and changes nothing.
func (s *Store) RegisterVersion(ctx context.Context, spec VersionSpec) (ProcessorVersion, error) {
	if err := spec.validate(); err != nil {
		return ProcessorVersion{}, err
	}
	var of *string
	if spec.SynthesisOf != "" {
		of = &spec.SynthesisOf
	}
	rows, err := s.pool.Query(ctx, `INSERT INTO processor_versions
			(name, state, window_seconds, grace_seconds, code_version, groups, topics, start_from, synthesis_of, synthesis)
		VALUES ($1, 'candidate', $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+versionColumns,
		spec.Name, int64(spec.Window/time.Second), int64(spec.Grace/time.Second), spec.CodeVersion,
		nonNil(spec.Groups), nonNil(spec.Topics), spec.StartFrom, of, spec.Synthesis)
	if err != nil {
		return ProcessorVersion{}, fmt.Errorf("register processor version %s: %w", spec.Name, err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanVersion)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return ProcessorVersion{}, fmt.Errorf("register processor version %s: %w", spec.Name, ErrVersionExists)
	}
	if err != nil {
		return ProcessorVersion{}, fmt.Errorf("register processor version %s: %w", spec.Name, err)
	}
	return v, nil
}

// EnsureVersion records what a starting windows role knows of its version: a version
// the registry does not hold is added as a candidate; one whose geometry is unknown
// (the default version after migration 0007) gets it. A version whose recorded
// geometry differs keeps it (the processor refuses to start with another geometry).
// A retired version is ErrVersionRetired.
func (s *Store) EnsureVersion(ctx context.Context, spec VersionSpec) (ProcessorVersion, error) {
	if err := spec.validate(); err != nil {
		return ProcessorVersion{}, err
	}
	rows, err := s.pool.Query(ctx, `INSERT INTO processor_versions AS pv
			(name, state, window_seconds, grace_seconds, code_version, groups, topics)
		VALUES ($1, 'candidate', $2, $3, $4, $5, $6)
		ON CONFLICT (name) DO UPDATE SET
			window_seconds = coalesce(pv.window_seconds, excluded.window_seconds),
			grace_seconds = coalesce(pv.grace_seconds, excluded.grace_seconds),
			code_version = CASE WHEN pv.code_version = '' THEN excluded.code_version ELSE pv.code_version END,
			groups = CASE WHEN cardinality(pv.groups) = 0 THEN excluded.groups ELSE pv.groups END,
			topics = CASE WHEN cardinality(pv.topics) = 0 THEN excluded.topics ELSE pv.topics END
		RETURNING `+versionColumns,
		spec.Name, int64(spec.Window/time.Second), int64(spec.Grace/time.Second), spec.CodeVersion,
		nonNil(spec.Groups), nonNil(spec.Topics))
	if err != nil {
		return ProcessorVersion{}, fmt.Errorf("ensure processor version %s: %w", spec.Name, err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanVersion)
	if err != nil {
		return ProcessorVersion{}, fmt.Errorf("ensure processor version %s: %w", spec.Name, err)
	}
	if v.State == VersionRetired {
		return v, fmt.Errorf("ensure processor version %s: %w", spec.Name, ErrVersionRetired)
	}
	return v, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// GetVersion returns one version of the registry, or ErrNotFound.
func (s *Store) GetVersion(ctx context.Context, name string) (ProcessorVersion, error) {
	name, err := versionName(name)
	if err != nil {
		return ProcessorVersion{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+versionColumns+` FROM processor_versions WHERE name = $1`, name)
	if err != nil {
		return ProcessorVersion{}, fmt.Errorf("get processor version %s: %w", name, err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return ProcessorVersion{}, fmt.Errorf("get processor version %s: %w", name, err)
	}
	return v, nil
}

// ListVersions returns the registry: the serving version first, then by creation.
func (s *Store) ListVersions(ctx context.Context) ([]ProcessorVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+versionColumns+` FROM processor_versions
		ORDER BY state = 'serving' DESC, state = 'retired', created_at, name`)
	if err != nil {
		return nil, fmt.Errorf("list processor versions: %w", err)
	}
	vs, err := pgx.CollectRows(rows, scanVersion)
	if err != nil {
		return nil, fmt.Errorf("list processor versions: %w", err)
	}
	return vs, nil
}

// ServingVersion returns the name of the serving version.
func (s *Store) ServingVersion(ctx context.Context) (string, error) {
	var name string
	err := s.pool.QueryRow(ctx, `SELECT name FROM processor_versions WHERE state = 'serving'`).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("serving processor version: %w", err)
	}
	return name, nil
}

// Promotion says what PromoteVersion did (or, dry, would do).
type Promotion struct {
	// From is the version that served before, To the one serving after.
	From, To string
	// Changed is false when To was serving already (a no-op).
	Changed bool
}

// PromoteVersion makes a candidate serving and the serving version a candidate, in
// one transaction: every reader sees either the old or the new serving version, and
// the API follows without a restart (it resolves the serving version per query).
// Promoting the serving version changes nothing; a retired version is
// ErrVersionRetired, an unknown one ErrNotFound. dryRun rolls the transaction back.
func (s *Store) PromoteVersion(ctx context.Context, name string, dryRun bool) (Promotion, error) {
	name, err := versionName(name)
	if err != nil {
		return Promotion{}, err
	}
	var p Promotion
	err = s.beginDry(ctx, dryRun, func(tx pgx.Tx) error {
		// Locking every row in name order serialises promotions and retirements.
		rows, err := tx.Query(ctx, `SELECT `+versionColumns+` FROM processor_versions ORDER BY name FOR UPDATE`)
		if err != nil {
			return err
		}
		vs, err := pgx.CollectRows(rows, scanVersion)
		if err != nil {
			return err
		}
		var target *ProcessorVersion
		for i := range vs {
			if vs[i].State == VersionServing {
				p.From = vs[i].Name
			}
			if vs[i].Name == name {
				target = &vs[i]
			}
		}
		switch {
		case target == nil:
			return ErrNotFound
		case target.State == VersionRetired:
			return ErrVersionRetired
		case target.State == VersionServing:
			p.To = name
			return nil
		}
		p.To, p.Changed = name, true
		if _, err := tx.Exec(ctx, `UPDATE processor_versions SET state = 'candidate' WHERE state = 'serving'`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE processor_versions SET state = 'serving', promoted_at = now() WHERE name = $1`, name)
		return err
	})
	if err != nil {
		return Promotion{}, fmt.Errorf("promote processor version %s: %w", name, err)
	}
	return p, nil
}

// errDryRun rolls back the transaction of beginDry.
var errDryRun = errors.New("dry run")

// beginDry runs fn in one transaction, and rolls it back when dryRun: what fn
// reported is what the change would do.
func (s *Store) beginDry(ctx context.Context, dryRun bool, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return nil
	}
	return err
}

// Retirement counts what RetireVersion deleted (or, dry, would delete).
type Retirement struct {
	Entries, Summaries, Windows int64
	// AlreadyRetired is true when the version was retired before (the rows counted
	// are leftovers a late write of it left, deleted again).
	AlreadyRetired bool
}

// RetireVersion deletes a version's namespace rows (its entries with their evidence
// bindings, its summaries, its window states) and marks it retired, in one
// transaction. The serving version is ErrVersionServing; an unknown one ErrNotFound.
// Retiring a retired version deletes whatever is left and is otherwise a no-op.
// dryRun counts and rolls back.
func (s *Store) RetireVersion(ctx context.Context, name string, dryRun bool) (Retirement, error) {
	name, err := versionName(name)
	if err != nil {
		return Retirement{}, err
	}
	var r Retirement
	err = s.beginDry(ctx, dryRun, func(tx pgx.Tx) error {
		var state string
		err := tx.QueryRow(ctx, `SELECT state FROM processor_versions WHERE name = $1 FOR UPDATE`, name).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		switch VersionState(state) {
		case VersionServing:
			return ErrVersionServing
		case VersionRetired:
			r.AlreadyRetired = true
		}
		var user string
		err = tx.QueryRow(ctx, `SELECT name FROM processor_versions WHERE synthesis_of = $1 AND state <> 'retired' ORDER BY name LIMIT 1`,
			name).Scan(&user)
		if err == nil {
			return fmt.Errorf("%w: synthesis-only version %s synthesizes its windows; retire %s first", ErrVersionInUse, user, user)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM workspace_timeline_entries WHERE processor_version = $1`, name)
		if err != nil {
			return err
		}
		r.Entries = tag.RowsAffected()
		if tag, err = tx.Exec(ctx, `DELETE FROM workspace_timeline_summaries WHERE processor_version = $1`, name); err != nil {
			return err
		}
		r.Summaries = tag.RowsAffected()
		if tag, err = tx.Exec(ctx, `DELETE FROM workspace_timeline_sync_states
			WHERE source_type = $2 AND source_key LIKE 'chat/%' AND `+windowVersionSQL+` = $1`,
			name, ids.SourceTypeLarkWindow); err != nil {
			return err
		}
		r.Windows = tag.RowsAffected()
		_, err = tx.Exec(ctx, `UPDATE processor_versions SET state = 'retired', retired_at = coalesce(retired_at, now())
			WHERE name = $1`, name)
		return err
	})
	if err != nil {
		return Retirement{}, fmt.Errorf("retire processor version %s: %w", name, err)
	}
	return r, nil
}

// windowVersionSQL is the processor version of a window sync-state row, from its
// source_key (ids.WindowSourceKey): the default version's keys carry none.
const windowVersionSQL = `(CASE WHEN split_part(source_key, '/', 3) = 'processor' THEN split_part(source_key, '/', 4)
	ELSE '` + ids.DefaultProcessorVersion + `' END)`

// VersionWindows counts one version's windows by state.
type VersionWindows struct {
	// Closed counts every window state the version wrote (a closed window that had
	// evidence); Synthesized the completed and ignored ones; Failed the failed and
	// needs_attention ones.
	Closed, Synthesized, Failed int64
	// First and Last are the starts of its first and last window; zero when none.
	First, Last time.Time
}

// WindowsByVersion counts the windows of every version that has any.
func (s *Store) WindowsByVersion(ctx context.Context) (map[string]VersionWindows, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+windowVersionSQL+` AS v, count(*),
			count(*) FILTER (WHERE status IN ('completed', 'ignored')),
			count(*) FILTER (WHERE status IN ('failed', 'needs_attention')),
			min(split_part(source_key, '/window/', 2)), max(split_part(source_key, '/window/', 2))
		FROM workspace_timeline_sync_states
		WHERE source_type = $1 GROUP BY 1`, ids.SourceTypeLarkWindow)
	if err != nil {
		return nil, fmt.Errorf("count windows by version: %w", err)
	}
	out := map[string]VersionWindows{}
	var (
		name        string
		w           VersionWindows
		first, last string
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &w.Closed, &w.Synthesized, &w.Failed, &first, &last}, func() error {
		// RFC 3339 UTC starts of one layout sort as text in time order.
		w.First, _ = time.Parse(time.RFC3339, first)
		w.Last, _ = time.Parse(time.RFC3339, last)
		out[name] = w
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count windows by version: %w", err)
	}
	return out, nil
}

// versionWritable reports whether version may write into its namespace and whether
// it serves, with the row locked FOR SHARE until tx ends, so that a promotion or a
// retirement waits for the write (or the write sees its result). A version the
// registry does not hold writes as a candidate.
func versionWritable(ctx context.Context, tx pgx.Tx, version string) (writable, serving bool, err error) {
	return versionAccess(tx.QueryRow(ctx, versionWritableSQL, version))
}

// versionWritableSQL locks version's registry row FOR SHARE and reads its state.
const versionWritableSQL = `SELECT state FROM processor_versions WHERE name = $1 FOR SHARE`

// versionAccess is versionWritable's answer from versionWritableSQL's row, for a
// caller that queues the statement in a batch.
func versionAccess(row pgx.Row) (writable, serving bool, err error) {
	var state string
	err = row.Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return state != string(VersionRetired), state == string(VersionServing), nil
}

// RetryWindows hands the windows of one processor version that start at start in
// workspace ws (every chat, or only chat when set) back to synthesis: a window in
// needs_attention or failed (its attempts spent or not) becomes processing with no
// attempt spent, its summary not attempted, and so old that the next stale sweep of a
// synthesis worker takes it over — the takeover path, fenced by the attempt lease like
// any other, so the retry has the same exactly-once guarantees as a first run. Chunks a
// failed attempt committed stay committed (the takeover resumes after them). Windows
// in another state are returned unchanged (completed and ignored ones are not rerun;
// processing ones are running or already retried). No window at all is ErrNotFound.
func (s *Store) RetryWindows(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID, version string, start time.Time) (retried, left []WindowState, err error) {
	if err := validWorkspace(ws); err != nil {
		return nil, nil, err
	}
	if chat != "" {
		if err := validChat(chat); err != nil {
			return nil, nil, err
		}
	}
	version, err = versionName(version)
	if err != nil {
		return nil, nil, err
	}
	start = start.UTC()
	pattern := "chat/" + string(chat) + "%/window/" + start.Format(time.RFC3339)
	if chat == "" {
		pattern = "chat/%/window/" + start.Format(time.RFC3339)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+windowColumns+` FROM workspace_timeline_sync_states
			WHERE workspace_id = $1 AND source_type = $2 AND source_key LIKE $3 AND `+windowVersionSQL+` = $4
			ORDER BY source_key FOR UPDATE`, string(ws), ids.SourceTypeLarkWindow, pattern, version)
		if err != nil {
			return err
		}
		ws, err := pgx.CollectRows(rows, scanWindow)
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			return ErrNotFound
		}
		for _, w := range ws {
			if chat != "" && w.Key.Chat != chat {
				continue
			}
			if w.Status != WindowNeedsAttention && w.Status != WindowFailed {
				left = append(left, w)
				continue
			}
			if err := applyWindowMutation(&w, WindowProcessing, func(w *WindowState) {
				w.Attempts, w.Meta.SummaryAttempted = 0, false
				w.Meta.Error = "retried by an operator (larkline windows retry)"
			}); err != nil {
				return err
			}
			if w, err = putWindow(ctx, tx, w, false); err != nil {
				return err
			}
			// stale at once: the next sweep takes it over
			if _, err := tx.Exec(ctx, `UPDATE workspace_timeline_sync_states SET updated_at = 'epoch' WHERE id = $1`, w.ID); err != nil {
				return err
			}
			retried = append(retried, w)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("retry windows at %s of workspace %s, version %s: %w", start.Format(time.RFC3339), ws, version, err)
	}
	return retried, left, nil
}

// SeedSynthesisWindows gives synthesis-only version the windows version of closed and
// synthesized (completed or ignored) that it does not have yet: each a processing state
// in its own namespace, with the closed window's bounds and evidence offset, no attempt
// spent and an updated_at so old that the next stale sweep of a synthesis worker takes
// it over and synthesizes it under the synthesis configured now. Idempotent: a window
// version has is never seeded again. A retired version gets none. Returns how many it
// seeded.
func (s *Store) SeedSynthesisWindows(ctx context.Context, version, of string) (int64, error) {
	version, err := versionName(version)
	if err != nil {
		return 0, err
	}
	if of, err = versionName(of); err != nil {
		return 0, err
	}
	if version == ids.DefaultProcessorVersion || version == of {
		return 0, fmt.Errorf("%w: version %s cannot synthesize the windows of %s", ErrInvalid, version, of)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO workspace_timeline_sync_states
			(workspace_id, source, source_type, source_key, status, attempts, metadata_json, updated_at)
		SELECT src.workspace_id, src.source, src.source_type,
			'chat/' || split_part(src.source_key, '/', 2) || '/processor/' || $1 || '/window/' || split_part(src.source_key, '/window/', 2),
			'processing', 0,
			jsonb_build_object('window_start', src.metadata_json->'window_start', 'window_end', src.metadata_json->'window_end',
				'evidence_count', 0, 'chunk_count', 0, 'summary_attempted', false, 'status', 'processing', 'attempts', 0,
				'error', 'seeded for synthesis-only version ' || $1)
			|| CASE WHEN src.metadata_json ? 'below_offset' THEN jsonb_build_object('below_offset', src.metadata_json->'below_offset')
			        ELSE '{}'::jsonb END,
			'epoch'
		FROM workspace_timeline_sync_states src
		WHERE src.source_type = $3 AND src.status IN ('completed', 'ignored') AND `+windowVersionOfSQL("src")+` = $2
		  AND EXISTS (SELECT 1 FROM processor_versions pv WHERE pv.name = $1 AND pv.state <> 'retired')
		ON CONFLICT (workspace_id, source, source_type, source_key) DO NOTHING`, version, of, ids.SourceTypeLarkWindow)
	if err != nil {
		return 0, fmt.Errorf("seed the windows of %s for synthesis-only version %s: %w", of, version, err)
	}
	return tag.RowsAffected(), nil
}

// windowVersionOfSQL is windowVersionSQL on a table alias.
func windowVersionOfSQL(alias string) string {
	return strings.ReplaceAll(windowVersionSQL, "source_key", alias+".source_key")
}
