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

	"github.com/larkline/larkline/schemas/ids"
)

// WindowStatus is a synthesis window's state (design §10.2).
type WindowStatus string

// Window statuses. completed, ignored and needs_attention are terminal; failed is
// retried until the attempts are exhausted.
const (
	WindowProcessing WindowStatus = "processing"
	WindowCompleted  WindowStatus = "completed"
	WindowIgnored    WindowStatus = "ignored"
	WindowFailed     WindowStatus = "failed"
	// WindowNeedsAttention: the window was closed but its evidence never reached the
	// table within the worker's bound (MarkWindowNeedsAttention). No attempt was spent
	// on it; an operator finds it by status and re-runs it after fixing the cause.
	WindowNeedsAttention WindowStatus = "needs_attention"
)

func (s WindowStatus) valid() bool {
	switch s {
	case WindowProcessing, WindowCompleted, WindowIgnored, WindowFailed, WindowNeedsAttention:
		return true
	}
	return false
}

// Terminal reports whether no automatic claim changes a window in status s again.
func (s WindowStatus) Terminal() bool {
	return s == WindowCompleted || s == WindowIgnored || s == WindowNeedsAttention
}

// MaxDiagnosticBytes bounds a window's or checkpoint's error diagnostics; longer text
// is cut. Diagnostics carry ids, hashes and error kinds, never message text.
const MaxDiagnosticBytes = 1024

// WindowKey identifies one synthesis window of one chat in one processor namespace.
type WindowKey struct {
	Workspace ids.WorkspaceID
	Chat      ids.ChatID
	// ProcessorVersion selects the namespace; "" means ids.DefaultProcessorVersion.
	ProcessorVersion string
	// Start is the window's UTC start (ids.WindowStart).
	Start time.Time
}

// SourceKey is the sync-state source_key of the window (ids.WindowSourceKey).
func (k WindowKey) SourceKey() string {
	return ids.WindowSourceKey(k.Chat, k.ProcessorVersion, k.Start)
}

func (k WindowKey) normalized() (WindowKey, error) {
	if err := validWorkspace(k.Workspace); err != nil {
		return k, err
	}
	if err := validChat(k.Chat); err != nil {
		return k, err
	}
	if k.ProcessorVersion == "" {
		k.ProcessorVersion = ids.DefaultProcessorVersion
	}
	if _, err := ids.ParseProcessorVersion(k.ProcessorVersion); err != nil {
		return k, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if k.Start.IsZero() {
		return k, fmt.Errorf("%w: window start is zero", ErrInvalid)
	}
	k.Start = k.Start.UTC()
	return k, nil
}

// parseWindowSourceKey inverts ids.WindowSourceKey.
func parseWindowSourceKey(ws ids.WorkspaceID, key string) (WindowKey, error) {
	parts := strings.Split(key, "/")
	k := WindowKey{Workspace: ws, ProcessorVersion: ids.DefaultProcessorVersion}
	var start string
	switch {
	case len(parts) == 4 && parts[0] == "chat" && parts[2] == "window":
		start = parts[3]
	case len(parts) == 6 && parts[0] == "chat" && parts[2] == "processor" && parts[4] == "window":
		k.ProcessorVersion, start = parts[3], parts[5]
	default:
		return k, fmt.Errorf("window source_key %q has an unknown shape", key)
	}
	k.Chat = ids.ChatID(parts[1])
	t, err := time.Parse(time.RFC3339, start)
	if err != nil {
		return k, fmt.Errorf("window source_key %q: start: %w", key, err)
	}
	k.Start = t.UTC()
	return k, nil
}

// WindowMeta is the window's metadata_json (design §10.2), next to the status and
// attempts that the store keeps in both columns and metadata.
type WindowMeta struct {
	WindowStart   time.Time `json:"window_start"`
	WindowEnd     time.Time `json:"window_end"`
	EvidenceCount int       `json:"evidence_count"`
	ChunkCount    int       `json:"chunk_count"`
	PromptVersion string    `json:"prompt_version,omitempty"`
	// CurrentChunkStart is where the next chunk starts (after this position); the store
	// sets it in AdvanceWindowCursor and clears it when a window restarts.
	CurrentChunkStart *Cursor `json:"current_chunk_start,omitempty"`
	// DraftCount counts the drafts the committed chunks wrote, and DraftsChanged whether
	// one of them materially changed a visible draft (design §13): a window resumed at
	// its next chunk still knows what its earlier chunks did.
	DraftCount    int  `json:"draft_count,omitempty"`
	DraftsChanged bool `json:"drafts_changed,omitempty"`
	// BelowOffset is the evidence-topic offset the window's evidence was first carried
	// below, from its closed record (version 3; ClaimOptions.BelowOffset), so that a
	// takeover by the stale sweep, which has no record, reads the same evidence.
	BelowOffset int64 `json:"below_offset,omitempty"`
	// Error holds bounded diagnostics (MaxDiagnosticBytes) of the last failure.
	Error            string `json:"error,omitempty"`
	SummaryAttempted bool   `json:"summary_attempted"`
	// RefundedAttempts counts the attempts RefundWindowAttempt gave back (failures that
	// were not the window's own, such as a model outage); they are not in Attempts.
	RefundedAttempts int `json:"refunded_attempts,omitempty"`
}

// windowDoc is what metadata_json holds: the meta plus mirrors of the status and
// attempts columns, written together so they cannot disagree.
type windowDoc struct {
	WindowMeta
	Status   WindowStatus `json:"status"`
	Attempts int          `json:"attempts"`
}

// WindowState is one synthesis window's sync-state row.
type WindowState struct {
	ID       int64
	Key      WindowKey
	Status   WindowStatus
	Attempts int
	// Cursor is the last committed (occurred_at, evidence id) inside the window
	// (last_seen_cursor); nil before the first chunk.
	Cursor *Cursor
	// LastProcessedAt is the last successful processing time (last_seen_updated_at).
	LastProcessedAt time.Time
	// AggregateHash is last_seen_content_hash: a hash of the ordered (evidence id,
	// content hash) pairs the window included.
	AggregateHash string
	Meta          WindowMeta
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Lease is the fencing token of a claimed window: a later claim (a takeover) raises
// the attempt, after which the old lease's writes fail with ErrConflict. It remembers
// w as the state its holder last saw, so that a write under it can be one statement
// while the row is still w (WindowLease).
func (w WindowState) Lease() WindowLease {
	seen := w.clone()
	return WindowLease{Key: w.Key, Attempt: w.Attempts, seen: &seen}
}

// WindowLease is held by the worker that claimed a window.
//
// A lease taken from a WindowState (WindowState.Lease, the state a claim or a write
// under the lease returned) remembers that state. A write under it (AdvanceWindowCursor,
// FinishWindow, FinishWindowAfterChunk, RefundWindowAttempt) first applies its checks
// and change to the remembered state and writes the result in one UPDATE that only
// matches while the row's status, attempts, cursor, aggregate and metadata are still
// the remembered ones: a compare-and-set on the whole mutable state, one round trip
// instead of a transaction's four (issue 35). When the row changed (a takeover, a
// heartbeat does not count), or the checks refuse, the write runs as before: the row
// locked, the checks and the change applied to what it holds. Either way the outcome
// is what the locked path alone would give.
type WindowLease struct {
	Key     WindowKey
	Attempt int
	seen    *WindowState
}

// clone copies w deeply enough for a mutation of the copy to leave w alone.
func (w WindowState) clone() WindowState {
	if w.Cursor != nil {
		c := *w.Cursor
		w.Cursor = &c
	}
	if w.Meta.CurrentChunkStart != nil {
		c := *w.Meta.CurrentChunkStart
		w.Meta.CurrentChunkStart = &c
	}
	return w
}

const windowColumns = `id, workspace_id, source_key, status, attempts, last_seen_cursor,
	last_seen_updated_at, last_seen_content_hash, metadata_json, created_at, updated_at`

func scanWindow(row pgx.CollectableRow) (WindowState, error) {
	var (
		w         WindowState
		ws, key   string
		status    *string
		cursor    string
		processed *time.Time
		meta      []byte
	)
	if err := row.Scan(&w.ID, &ws, &key, &status, &w.Attempts, &cursor, &processed, &w.AggregateHash,
		&meta, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return w, err
	}
	k, err := parseWindowSourceKey(ids.WorkspaceID(ws), key)
	if err != nil {
		return w, err
	}
	w.Key = k
	if status != nil {
		w.Status = WindowStatus(*status)
	}
	if cursor != "" {
		c, err := ParseCursor(cursor)
		if err != nil {
			return w, fmt.Errorf("window %d: %w", w.ID, err)
		}
		w.Cursor = &c
	}
	if processed != nil {
		w.LastProcessedAt = processed.UTC()
	}
	var doc windowDoc
	if err := json.Unmarshal(meta, &doc); err != nil {
		return w, fmt.Errorf("window %d: metadata_json: %w", w.ID, err)
	}
	w.Meta = doc.WindowMeta
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return w, nil
}

func windowMetaJSON(w *WindowState) (string, error) {
	w.Meta.Error = truncateUTF8(w.Meta.Error, MaxDiagnosticBytes)
	b, err := json.Marshal(windowDoc{WindowMeta: w.Meta, Status: w.Status, Attempts: w.Attempts})
	return string(b), err
}

func getWindow(ctx context.Context, q querier, k WindowKey, lock bool) (WindowState, error) {
	sql := `SELECT ` + windowColumns + ` FROM workspace_timeline_sync_states
		WHERE workspace_id = $1 AND source = $2 AND source_type = $3 AND source_key = $4`
	if lock {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, string(k.Workspace), ids.SourceSystem, ids.SourceTypeLarkWindow, k.SourceKey())
	if err != nil {
		return WindowState{}, err
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWindow)
	if errors.Is(err, pgx.ErrNoRows) {
		return WindowState{}, ErrNotFound
	}
	return w, err
}

// putWindow writes w's mutable fields back; touchProcessed sets last_seen_updated_at.
func putWindow(ctx context.Context, q querier, w WindowState, touchProcessed bool) (WindowState, error) {
	return putWindowIf(ctx, q, w, touchProcessed, nil)
}

// putWindowIf is putWindow that, when expect is set, writes only while the row's
// status, attempts, cursor, aggregate and metadata are still expect's (jsonb equality:
// the same document); pgx.ErrNoRows when they are not.
func putWindowIf(ctx context.Context, q querier, w WindowState, touchProcessed bool, expect *WindowState) (WindowState, error) {
	meta, err := windowMetaJSON(&w)
	if err != nil {
		return WindowState{}, err
	}
	sql := `UPDATE workspace_timeline_sync_states SET
			status = $2, attempts = $3, last_seen_cursor = $4, last_seen_content_hash = $5, metadata_json = $6::jsonb,
			last_seen_updated_at = CASE WHEN $7 THEN now() ELSE last_seen_updated_at END,
			updated_at = now()
		WHERE id = $1`
	args := []any{w.ID, string(w.Status), w.Attempts, cursorText(w.Cursor), w.AggregateHash, meta, touchProcessed}
	if expect != nil {
		e := expect.clone()
		em, err := windowMetaJSON(&e)
		if err != nil {
			return WindowState{}, err
		}
		sql += ` AND status = $8 AND attempts = $9 AND last_seen_cursor = $10 AND last_seen_content_hash = $11
			AND metadata_json = $12::jsonb`
		args = append(args, string(e.Status), e.Attempts, cursorText(e.Cursor), e.AggregateHash, em)
	}
	rows, err := q.Query(ctx, sql+` RETURNING `+windowColumns, args...)
	if err != nil {
		return WindowState{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanWindow)
}

// cursorText is last_seen_cursor's text for c ("" before the first chunk).
func cursorText(c *Cursor) string {
	if c == nil {
		return ""
	}
	return c.String()
}

// GetWindow returns a window's state, or ErrNotFound.
func (s *Store) GetWindow(ctx context.Context, key WindowKey) (WindowState, error) {
	k, err := key.normalized()
	if err != nil {
		return WindowState{}, err
	}
	w, err := getWindow(ctx, s.pool, k, false)
	if err != nil {
		return WindowState{}, fmt.Errorf("get window %s of workspace %s: %w", k.SourceKey(), k.Workspace, err)
	}
	return w, nil
}

// ClaimOptions configures ClaimWindow.
type ClaimOptions struct {
	// WindowLength is the fixed window length (10m by default in the design); Start must
	// be aligned to it.
	WindowLength time.Duration
	// MaxAttempts bounds whole-window attempts (design default 3).
	MaxAttempts int
	// StaleAfter is how long a processing window may go without a write before another
	// worker takes it over; longer than the model timeout. Measured on the database clock.
	StaleAfter time.Duration
	// PromptVersion is recorded in the metadata of a claimed window.
	PromptVersion string
	// BelowOffset, when positive, is recorded in the metadata of a window the claim
	// creates or resumes (WindowMeta.BelowOffset).
	BelowOffset int64
}

func (o ClaimOptions) validate(k WindowKey) error {
	switch {
	case o.WindowLength <= 0:
		return fmt.Errorf("%w: window length %s <= 0", ErrInvalid, o.WindowLength)
	case !ids.WindowStart(k.Start, o.WindowLength).Equal(k.Start):
		return fmt.Errorf("%w: window start %s is not aligned to %s", ErrInvalid, k.Start.Format(time.RFC3339Nano), o.WindowLength)
	case o.MaxAttempts < 1:
		return fmt.Errorf("%w: max attempts %d < 1", ErrInvalid, o.MaxAttempts)
	case o.StaleAfter <= 0:
		return fmt.Errorf("%w: stale timeout %s <= 0", ErrInvalid, o.StaleAfter)
	case o.BelowOffset < 0:
		return fmt.Errorf("%w: evidence offset bound %d < 0", ErrInvalid, o.BelowOffset)
	}
	return checkText("prompt version", o.PromptVersion, 64, false)
}

// ClaimOutcome says what ClaimWindow did.
type ClaimOutcome uint8

// Claim outcomes. The first three hand the window to the caller (Claimed is true).
const (
	// ClaimCreated: no state existed; the window now exists in processing, attempt 1.
	ClaimCreated ClaimOutcome = iota + 1
	// ClaimRetried: a failed window with attempts left moved to processing.
	ClaimRetried
	// ClaimTakenOver: a processing window had gone stale; the caller took it over.
	ClaimTakenOver
	// ClaimBusy: another worker is processing the window.
	ClaimBusy
	// ClaimDone: the window is terminal: completed, ignored or needs_attention.
	ClaimDone
	// ClaimExhausted: the window failed MaxAttempts times (a stale window at its last
	// attempt is marked failed by this call).
	ClaimExhausted
)

// Claimed reports whether the caller now holds the window.
func (o ClaimOutcome) Claimed() bool {
	return o == ClaimCreated || o == ClaimRetried || o == ClaimTakenOver
}

func (o ClaimOutcome) String() string {
	switch o {
	case ClaimCreated:
		return "created"
	case ClaimRetried:
		return "retried"
	case ClaimTakenOver:
		return "taken_over"
	case ClaimBusy:
		return "busy"
	case ClaimDone:
		return "done"
	case ClaimExhausted:
		return "exhausted"
	}
	return fmt.Sprintf("ClaimOutcome(%d)", uint8(o))
}

// CreateWindowIfAbsent creates a window's state in processing (attempt 1) when none
// exists and the window holds evidence; created is false when a state already existed
// (returned as is). A range without evidence gets no row: ErrEmptyWindow. Most callers
// want ClaimWindow, which also retries and takes over.
func (s *Store) CreateWindowIfAbsent(ctx context.Context, key WindowKey, opts ClaimOptions) (w WindowState, created bool, err error) {
	k, err := key.normalized()
	if err != nil {
		return WindowState{}, false, err
	}
	if err := opts.validate(k); err != nil {
		return WindowState{}, false, err
	}
	w, created, err = createWindow(ctx, s.pool, k, opts)
	if errors.Is(err, ErrNotFound) {
		w, err = getWindow(ctx, s.pool, k, false)
		if errors.Is(err, ErrNotFound) {
			err = ErrEmptyWindow
		}
	}
	if err != nil {
		return WindowState{}, false, fmt.Errorf("create window %s of workspace %s: %w", k.SourceKey(), k.Workspace, err)
	}
	return w, created, nil
}

// createWindow inserts the processing row if absent and the window holds evidence of
// the chat. ErrNotFound means nothing was inserted (a row exists, or no evidence).
func createWindow(ctx context.Context, q querier, k WindowKey, opts ClaimOptions) (WindowState, bool, error) {
	return insertWindow(ctx, q, k, opts, false)
}

// insertWindow is createWindow; with versionCheck the statement also locks the
// version's registry row FOR SHARE (as versionWritable does, until the statement's
// transaction ends) and inserts nothing for a retired version, so that one statement
// outside a transaction claims a new window (ClaimWindow).
func insertWindow(ctx context.Context, q querier, k WindowKey, opts ClaimOptions, versionCheck bool) (WindowState, bool, error) {
	end := k.Start.Add(opts.WindowLength)
	w := WindowState{Status: WindowProcessing, Attempts: 1,
		Meta: WindowMeta{WindowStart: k.Start, WindowEnd: end, PromptVersion: opts.PromptVersion, BelowOffset: opts.BelowOffset}}
	meta, err := windowMetaJSON(&w)
	if err != nil {
		return WindowState{}, false, err
	}
	sql := `INSERT INTO workspace_timeline_sync_states
			(workspace_id, source, source_type, source_key, status, attempts, metadata_json)
		SELECT $1, $2, $3, $4, 'processing', 1, $5::jsonb
		WHERE EXISTS (SELECT 1 FROM workspace_timeline_evidence
			WHERE workspace_id = $1 AND chat_id = $6 AND occurred_at >= $7 AND occurred_at < $8)`
	args := []any{string(k.Workspace), ids.SourceSystem, ids.SourceTypeLarkWindow, k.SourceKey(), meta, string(k.Chat), k.Start, end}
	if versionCheck {
		// MATERIALIZED: the version's row is read and locked whatever its state, however
		// the planner would otherwise fold the state filter into the locking scan.
		sql = `WITH v AS MATERIALIZED (SELECT state FROM processor_versions WHERE name = $9 FOR SHARE) ` + sql +
			` AND NOT EXISTS (SELECT 1 FROM v WHERE v.state = 'retired')`
		args = append(args, k.ProcessorVersion)
	}
	rows, err := q.Query(ctx, sql+`
		ON CONFLICT (workspace_id, source, source_type, source_key) DO NOTHING
		RETURNING `+windowColumns, args...)
	if err != nil {
		return WindowState{}, false, err
	}
	w, err = pgx.CollectExactlyOneRow(rows, scanWindow)
	if errors.Is(err, pgx.ErrNoRows) {
		return WindowState{}, false, ErrNotFound
	}
	return w, err == nil, err
}

// ClaimWindow atomically hands a window to the caller (design §11 step 6):
//
//   - absent, with evidence in the window → created in processing, attempt 1;
//   - absent, without evidence → ErrEmptyWindow, and no row is written;
//   - failed with attempts < MaxAttempts → processing, attempts+1;
//   - processing, not written for StaleAfter → processing, attempts+1 (takeover), or
//     failed when it was the last attempt;
//   - processing and fresh → ClaimBusy; completed/ignored → ClaimDone; failed with no
//     attempts left → ClaimExhausted;
//   - a window of a retired processor version → ClaimDone, and no row is written.
//
// A retried or taken-over window resumes at its next undone chunk: its cursor, chunk and
// draft counters are kept (the chunks before the cursor were committed with their
// drafts), unless the prompt version changed, which restarts it as a whole. Of two
// callers racing for the same window exactly one gets a Claimed outcome.
func (s *Store) ClaimWindow(ctx context.Context, key WindowKey, opts ClaimOptions) (WindowState, ClaimOutcome, error) {
	k, err := key.normalized()
	if err != nil {
		return WindowState{}, 0, err
	}
	if err := opts.validate(k); err != nil {
		return WindowState{}, 0, err
	}
	// A new window, the common case, is claimed in one statement (issue 35): the
	// insert checks the version as the transaction below does. Anything else (a row
	// exists, no evidence, a retired version) is the transaction's to decide.
	w, created, err := insertWindow(ctx, s.pool, k, opts, true)
	if created {
		return w, ClaimCreated, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return WindowState{}, 0, fmt.Errorf("claim window %s of workspace %s: %w", k.SourceKey(), k.Workspace, err)
	}
	var outcome ClaimOutcome
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			created, stale bool
			err            error
		)
		// A closed record of a retired version (still in the closed-window topic) is
		// done: it never brings back a row `versions retire` deleted (decisions D26).
		if writable, _, err := versionWritable(ctx, tx, k.ProcessorVersion); err != nil || !writable {
			w, outcome = WindowState{Key: k}, ClaimDone
			return err
		}
		w, created, err = createWindow(ctx, tx, k, opts)
		if created {
			outcome = ClaimCreated
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		w, stale, err = lockWindow(ctx, tx, k, opts.StaleAfter)
		if errors.Is(err, ErrNotFound) {
			return ErrEmptyWindow
		}
		if err != nil {
			return err
		}
		switch {
		case w.Status.Terminal():
			outcome = ClaimDone
			return nil
		case w.Status == WindowProcessing && !stale:
			outcome = ClaimBusy
			return nil
		case w.Status == WindowFailed && w.Attempts >= opts.MaxAttempts:
			outcome = ClaimExhausted
			return nil
		case w.Status == WindowProcessing && w.Attempts >= opts.MaxAttempts:
			w.Status = WindowFailed
			w.Meta.Error = fmt.Sprintf("attempt %d went stale (no write for %s); attempts exhausted", w.Attempts, opts.StaleAfter)
			outcome = ClaimExhausted
		case w.Status == WindowProcessing:
			w.Meta.Error = fmt.Sprintf("attempt %d went stale (no write for %s)", w.Attempts, opts.StaleAfter)
			outcome = ClaimTakenOver
		default: // failed with attempts left
			outcome = ClaimRetried
		}
		if outcome.Claimed() {
			w.Status = WindowProcessing
			w.Attempts++
			if opts.PromptVersion != "" && w.Meta.PromptVersion != opts.PromptVersion {
				// chunks of another prompt do not mix with this one's: restart as a whole
				w.Cursor = nil
				w.Meta.EvidenceCount, w.Meta.ChunkCount, w.Meta.CurrentChunkStart = 0, 0, nil
				w.Meta.DraftCount, w.Meta.DraftsChanged = 0, false
				w.Meta.PromptVersion = opts.PromptVersion
			}
			if w.Meta.BelowOffset == 0 {
				w.Meta.BelowOffset = opts.BelowOffset
			}
		}
		w, err = putWindow(ctx, tx, w, false)
		return err
	})
	if err != nil {
		return WindowState{}, 0, fmt.Errorf("claim window %s of workspace %s: %w", k.SourceKey(), k.Workspace, err)
	}
	return w, outcome, nil
}

// lockWindow reads and locks a window, and whether it is stale by the database clock.
func lockWindow(ctx context.Context, tx pgx.Tx, k WindowKey, staleAfter time.Duration) (WindowState, bool, error) {
	w, err := getWindow(ctx, tx, k, true)
	if err != nil {
		return w, false, err
	}
	var stale bool
	err = tx.QueryRow(ctx, `SELECT updated_at < now() - $2::bigint * interval '1 microsecond'
		FROM workspace_timeline_sync_states WHERE id = $1`, w.ID, staleAfter.Microseconds()).Scan(&stale)
	return w, stale, err
}

// casWindow locks the window, lets check refuse (ErrConflict) and mutate change it, and
// writes it back, all in one transaction. With seen (the state a lease remembers,
// WindowLease), check and mutate are first applied to seen and the result written in
// one statement that matches only while the row is still seen; when it is not, or
// check or mutate refuse or change nothing there, the locked transaction decides.
// check and mutate may therefore run twice, the second time on the locked row.
func (s *Store) casWindow(ctx context.Context, k WindowKey, touchProcessed bool, seen *WindowState,
	check func(*WindowState) error, mutate func(*WindowState) (bool, error)) (WindowState, error) {
	if seen != nil && seen.ID != 0 {
		w := seen.clone()
		if check(&w) == nil {
			if changed, err := mutate(&w); err == nil && changed {
				out, err := putWindowIf(ctx, s.pool, w, touchProcessed, seen)
				if !errors.Is(err, pgx.ErrNoRows) {
					return out, err
				}
			}
		}
	}
	var w WindowState
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if w, err = getWindow(ctx, tx, k, true); err != nil {
			return err
		}
		if err := check(&w); err != nil {
			return err
		}
		changed, err := mutate(&w)
		if err != nil || !changed {
			return err
		}
		w, err = putWindow(ctx, tx, w, touchProcessed)
		return err
	})
	return w, err
}

// TransitionWindow moves a window from one of the statuses in from to to, applying
// mutate (which may change Attempts, Cursor, AggregateHash and Meta; the window bounds
// are kept) in the same transaction. A window in another status gives ErrConflict and is
// left alone; a missing window gives ErrNotFound.
func (s *Store) TransitionWindow(ctx context.Context, key WindowKey, from []WindowStatus, to WindowStatus, mutate func(*WindowState)) (WindowState, error) {
	k, err := key.normalized()
	if err != nil {
		return WindowState{}, err
	}
	if !to.valid() {
		return WindowState{}, fmt.Errorf("%w: window status %q", ErrInvalid, to)
	}
	w, err := s.casWindow(ctx, k, false, nil, func(w *WindowState) error {
		if !slices.Contains(from, w.Status) {
			return fmt.Errorf("%w: window is %s, not one of %v", ErrConflict, w.Status, from)
		}
		return nil
	}, func(w *WindowState) (bool, error) {
		return true, applyWindowMutation(w, to, mutate)
	})
	if err != nil {
		return WindowState{}, fmt.Errorf("transition window %s of workspace %s to %s: %w", k.SourceKey(), k.Workspace, to, err)
	}
	return w, nil
}

func applyWindowMutation(w *WindowState, to WindowStatus, mutate func(*WindowState)) error {
	keep := *w
	if mutate != nil {
		mutate(w)
	}
	w.ID, w.Key, w.Status, w.CreatedAt, w.UpdatedAt, w.LastProcessedAt = keep.ID, keep.Key, to, keep.CreatedAt, keep.UpdatedAt, keep.LastProcessedAt
	w.Meta.WindowStart, w.Meta.WindowEnd = keep.Meta.WindowStart, keep.Meta.WindowEnd
	if w.Attempts < 0 {
		return fmt.Errorf("%w: attempts %d < 0", ErrInvalid, w.Attempts)
	}
	if w.Cursor != nil && !w.Meta.WindowEnd.IsZero() &&
		(w.Cursor.OccurredAt.Before(w.Meta.WindowStart) || !w.Cursor.OccurredAt.Before(w.Meta.WindowEnd)) {
		return fmt.Errorf("%w: cursor %s outside the window", ErrInvalid, w.Cursor)
	}
	return checkText("aggregate hash", w.AggregateHash, MaxContentHashLen, false)
}

func checkLease(w *WindowState, l WindowLease) error {
	if w.Status != WindowProcessing || w.Attempts != l.Attempt {
		return fmt.Errorf("%w: lease of attempt %d lost: window is %s at attempt %d", ErrConflict, l.Attempt, w.Status, w.Attempts)
	}
	return nil
}

// ChunkProgress is one committed chunk of a window.
type ChunkProgress struct {
	// Cursor is the last evidence position the chunk covered; inside the window.
	Cursor Cursor
	// Evidence is how many evidence rows the chunk covered.
	Evidence int
	// Drafts is how many drafts the chunk wrote; Changed whether one of them created or
	// materially updated a visible draft.
	Drafts  int
	Changed bool
}

// AdvanceWindowCursor records a committed chunk under the caller's lease: it moves the
// window cursor forward, counts the chunk and its evidence, and refreshes the window's
// liveness. Repeating the last call (same cursor) changes nothing; a cursor behind the
// stored one, or a lost lease, gives ErrConflict.
func (s *Store) AdvanceWindowCursor(ctx context.Context, lease WindowLease, p ChunkProgress) (WindowState, error) {
	k, err := lease.Key.normalized()
	if err != nil {
		return WindowState{}, err
	}
	if err := checkChunkProgress(p); err != nil {
		return WindowState{}, err
	}
	w, err := s.casWindow(ctx, k, true, lease.seen, func(w *WindowState) error { return checkLease(w, lease) },
		func(w *WindowState) (bool, error) {
			if changed, err := advanceChunk(w, p); err != nil || !changed {
				return false, err
			}
			return true, applyWindowMutation(w, WindowProcessing, nil)
		})
	if err != nil {
		return WindowState{}, fmt.Errorf("advance window %s of workspace %s: %w", k.SourceKey(), k.Workspace, err)
	}
	return w, nil
}

func checkChunkProgress(p ChunkProgress) error {
	if p.Evidence < 0 || p.Drafts < 0 {
		return fmt.Errorf("%w: chunk evidence count %d or draft count %d < 0", ErrInvalid, p.Evidence, p.Drafts)
	}
	return nil
}

// advanceChunk records the committed chunk p in w; changed is false for a repeated
// call (the stored cursor is p's), and a cursor behind the stored one is ErrConflict.
func advanceChunk(w *WindowState, p ChunkProgress) (changed bool, err error) {
	if w.Cursor != nil {
		switch {
		case p.Cursor.Less(*w.Cursor):
			return false, fmt.Errorf("%w: cursor %s is behind the stored %s", ErrConflict, p.Cursor, w.Cursor)
		case !w.Cursor.Less(p.Cursor): // equal: a repeated call
			return false, nil
		}
	}
	cursor, chunkStart := p.Cursor, p.Cursor
	w.Cursor, w.Meta.CurrentChunkStart = &cursor, &chunkStart
	w.Meta.ChunkCount++
	w.Meta.EvidenceCount += p.Evidence
	w.Meta.DraftCount += p.Drafts
	w.Meta.DraftsChanged = w.Meta.DraftsChanged || p.Changed
	return true, nil
}

// FinishWindow ends the caller's attempt: completed or ignored (terminal; records the
// processing time) or failed (retried by a later claim while attempts remain). mutate
// may set AggregateHash and Meta (e.g. Error). A lost lease gives ErrConflict.
func (s *Store) FinishWindow(ctx context.Context, lease WindowLease, to WindowStatus, mutate func(*WindowState)) (WindowState, error) {
	k, err := lease.Key.normalized()
	if err != nil {
		return WindowState{}, err
	}
	if to != WindowCompleted && to != WindowIgnored && to != WindowFailed {
		return WindowState{}, fmt.Errorf("%w: a window finishes completed, ignored or failed, not %q", ErrInvalid, to)
	}
	w, err := s.casWindow(ctx, k, to != WindowFailed, lease.seen, func(w *WindowState) error { return checkLease(w, lease) },
		func(w *WindowState) (bool, error) {
			attempts := w.Attempts
			err := applyWindowMutation(w, to, mutate)
			w.Attempts = attempts // the lease's attempt is not the caller's to change
			return true, err
		})
	if err != nil {
		return WindowState{}, fmt.Errorf("finish window %s of workspace %s as %s: %w", k.SourceKey(), k.Workspace, to, err)
	}
	return w, nil
}

// FinishWindowAfterChunk records the window's last chunk p and ends the caller's
// attempt completed or ignored in one transaction: AdvanceWindowCursor(lease, p)
// then FinishWindow(lease, to, mutate), with one lock, one write and one commit
// instead of two of each (issue 35). Either both are durable or neither is: a caller
// that dies before the commit leaves the window processing at its previous cursor,
// and the next owner redoes the last chunk (its drafts are idempotent) and finishes
// it. A repeated p (the stored cursor is p's) records no second chunk; a cursor
// behind the stored one, or a lost lease, gives ErrConflict and changes nothing.
func (s *Store) FinishWindowAfterChunk(ctx context.Context, lease WindowLease, p ChunkProgress, to WindowStatus, mutate func(*WindowState)) (WindowState, error) {
	k, err := lease.Key.normalized()
	if err != nil {
		return WindowState{}, err
	}
	if to != WindowCompleted && to != WindowIgnored {
		return WindowState{}, fmt.Errorf("%w: a window finishes after its last chunk completed or ignored, not %q", ErrInvalid, to)
	}
	if err := checkChunkProgress(p); err != nil {
		return WindowState{}, err
	}
	w, err := s.casWindow(ctx, k, true, lease.seen, func(w *WindowState) error { return checkLease(w, lease) },
		func(w *WindowState) (bool, error) {
			if _, err := advanceChunk(w, p); err != nil {
				return false, err
			}
			attempts := w.Attempts
			err := applyWindowMutation(w, to, mutate)
			w.Attempts = attempts // the lease's attempt is not the caller's to change
			return true, err
		})
	if err != nil {
		return WindowState{}, fmt.Errorf("finish window %s of workspace %s as %s after its last chunk: %w", k.SourceKey(), k.Workspace, to, err)
	}
	return w, nil
}

// RefundWindowAttempt ends the caller's attempt as failed without counting it against
// ClaimOptions.MaxAttempts, for a failure that is not the window's own (a model outage:
// the window itself may be fine). In the transaction that checks the lease, the window
// becomes failed, its attempts go back to lease.Attempt-1 and Meta.RefundedAttempts
// grows by one; the next ClaimWindow retries it at the same attempt number. mutate may
// set AggregateHash and Meta (e.g. Error) as for FinishWindow. A lost lease gives
// ErrConflict and changes nothing.
//
// The lease must not be used after this call: its attempt number is handed out again.
// Fencing still holds for every other holder: a lease whose attempt was taken over
// never matches again (attempts of a processing window only grow past a takeover), and
// a refunded lease is dropped by the caller that refunded it.
func (s *Store) RefundWindowAttempt(ctx context.Context, lease WindowLease, mutate func(*WindowState)) (WindowState, error) {
	k, err := lease.Key.normalized()
	if err != nil {
		return WindowState{}, err
	}
	w, err := s.casWindow(ctx, k, false, lease.seen, func(w *WindowState) error {
		if err := checkLease(w, lease); err != nil {
			return err
		}
		if w.Attempts < 1 {
			return fmt.Errorf("%w: window at attempt %d has no attempt to refund", ErrInvalid, w.Attempts)
		}
		return nil
	}, func(w *WindowState) (bool, error) {
		attempts, refunded := w.Attempts, w.Meta.RefundedAttempts
		err := applyWindowMutation(w, WindowFailed, mutate)
		w.Attempts = attempts - 1 // the lease's attempt is not the caller's to change otherwise
		w.Meta.RefundedAttempts = refunded + 1
		return true, err
	})
	if err != nil {
		return WindowState{}, fmt.Errorf("refund attempt %d of window %s of workspace %s: %w", lease.Attempt, k.SourceKey(), k.Workspace, err)
	}
	return w, nil
}

// StaleProcessing lists up to limit processing windows not written for staleAfter (by
// the database clock), oldest first, for a watcher to reclaim with ClaimWindow.
func (s *Store) StaleProcessing(ctx context.Context, staleAfter time.Duration, limit int) ([]WindowState, error) {
	if staleAfter <= 0 {
		return nil, fmt.Errorf("%w: stale timeout %s <= 0", ErrInvalid, staleAfter)
	}
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+windowColumns+` FROM workspace_timeline_sync_states
		WHERE status = 'processing' AND source = $1 AND source_type = $2
		  AND updated_at < now() - $3::bigint * interval '1 microsecond'
		ORDER BY updated_at, id LIMIT $4`, ids.SourceSystem, ids.SourceTypeLarkWindow, staleAfter.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale processing windows: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanWindow)
	if err != nil {
		return nil, fmt.Errorf("list stale processing windows: %w", err)
	}
	return out, nil
}

// HeartbeatWindow refreshes the liveness of the caller's claim (updated_at, on the
// database clock) without changing the window, so that a long chunk does not look
// stale to another worker: ClaimWindow takes a processing window over only after
// StaleAfter without any write. A lost lease (taken over, finished, refunded) gives
// ErrConflict; a missing window ErrNotFound.
func (s *Store) HeartbeatWindow(ctx context.Context, lease WindowLease) error {
	k, err := lease.Key.normalized()
	if err != nil {
		return err
	}
	args := []any{string(k.Workspace), ids.SourceSystem, ids.SourceTypeLarkWindow, k.SourceKey()}
	tag, err := s.pool.Exec(ctx, `UPDATE workspace_timeline_sync_states SET updated_at = now()
		WHERE workspace_id = $1 AND source = $2 AND source_type = $3 AND source_key = $4
		  AND status = 'processing' AND attempts = $5`, append(args, lease.Attempt)...)
	if err == nil && tag.RowsAffected() == 1 {
		return nil
	}
	if err == nil {
		var (
			status   *string
			attempts int
		)
		err = s.pool.QueryRow(ctx, `SELECT status, attempts FROM workspace_timeline_sync_states
			WHERE workspace_id = $1 AND source = $2 AND source_type = $3 AND source_key = $4`, args...).Scan(&status, &attempts)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = ErrNotFound
		case err == nil:
			st := ""
			if status != nil {
				st = *status
			}
			err = fmt.Errorf("%w: lease of attempt %d lost: window is %s at attempt %d", ErrConflict, lease.Attempt, st, attempts)
		}
	}
	return fmt.Errorf("heartbeat of window %s of workspace %s: %w", k.SourceKey(), k.Workspace, err)
}

// MarkWindowNeedsAttention ends a window whose closed record named evidence that never
// reached the table (the worker's bound ran out) in the terminal needs_attention status
// with bounded diagnostics, spending no attempt: the row is created if absent, and a
// failed window (or a processing one gone stale for opts.StaleAfter) is moved to it. A
// window that is terminal already is returned as is (changed false); a fresh
// processing window, which another worker holds, gives ErrConflict.
func (s *Store) MarkWindowNeedsAttention(ctx context.Context, key WindowKey, opts ClaimOptions, diagnostics string) (WindowState, bool, error) {
	k, err := key.normalized()
	if err != nil {
		return WindowState{}, false, err
	}
	if err := opts.validate(k); err != nil {
		return WindowState{}, false, err
	}
	var (
		w       WindowState
		changed bool
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		end := k.Start.Add(opts.WindowLength)
		nw := WindowState{Status: WindowNeedsAttention,
			Meta: WindowMeta{WindowStart: k.Start, WindowEnd: end, PromptVersion: opts.PromptVersion, Error: diagnostics}}
		meta, err := windowMetaJSON(&nw)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `INSERT INTO workspace_timeline_sync_states
				(workspace_id, source, source_type, source_key, status, attempts, metadata_json)
			VALUES ($1, $2, $3, $4, 'needs_attention', 0, $5::jsonb)
			ON CONFLICT (workspace_id, source, source_type, source_key) DO NOTHING
			RETURNING `+windowColumns,
			string(k.Workspace), ids.SourceSystem, ids.SourceTypeLarkWindow, k.SourceKey(), meta)
		if err != nil {
			return err
		}
		w, err = pgx.CollectExactlyOneRow(rows, scanWindow)
		if err == nil {
			changed = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var stale bool
		if w, stale, err = lockWindow(ctx, tx, k, opts.StaleAfter); err != nil {
			return err
		}
		switch {
		case w.Status.Terminal():
			return nil
		case w.Status == WindowProcessing && !stale:
			return fmt.Errorf("%w: window is processing at attempt %d", ErrConflict, w.Attempts)
		}
		w.Status, w.Meta.Error, changed = WindowNeedsAttention, diagnostics, true
		w, err = putWindow(ctx, tx, w, false)
		return err
	})
	if err != nil {
		return WindowState{}, false, fmt.Errorf("mark window %s of workspace %s as needing attention: %w", k.SourceKey(), k.Workspace, err)
	}
	return w, changed, nil
}
