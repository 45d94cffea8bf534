package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// Small interfaces at the seams: each consumer depends on the part it uses and can fake
// it in unit tests. *Store implements all of them.

// EvidenceWriter is what the evidence sink needs.
type EvidenceWriter interface {
	UpsertEvidence(ctx context.Context, batch []Evidence) ([]UpsertOutcome, error)
	DeleteEvidence(ctx context.Context, ws ids.WorkspaceID, kind EvidenceKind, sourceKeys []string) (int64, error)
}

// EvidenceReader reads evidence by page, by window and by key.
type EvidenceReader interface {
	ListEvidence(ctx context.Context, ws ids.WorkspaceID, kind EvidenceKind, after *Cursor, limit int) (EvidencePage, error)
	EvidenceInRange(ctx context.Context, q RangeQuery) (EvidencePage, error)
	EvidenceByKeys(ctx context.Context, ws ids.WorkspaceID, kind EvidenceKind, sourceKeys []string) ([]Evidence, error)
}

// WindowStates is the synthesis window state machine (design §10.2, §11).
type WindowStates interface {
	GetWindow(ctx context.Context, key WindowKey) (WindowState, error)
	CreateWindowIfAbsent(ctx context.Context, key WindowKey, opts ClaimOptions) (WindowState, bool, error)
	ClaimWindow(ctx context.Context, key WindowKey, opts ClaimOptions) (WindowState, ClaimOutcome, error)
	AdvanceWindowCursor(ctx context.Context, lease WindowLease, p ChunkProgress) (WindowState, error)
	FinishWindow(ctx context.Context, lease WindowLease, to WindowStatus, mutate func(*WindowState)) (WindowState, error)
	RefundWindowAttempt(ctx context.Context, lease WindowLease, mutate func(*WindowState)) (WindowState, error)
	HeartbeatWindow(ctx context.Context, lease WindowLease) error
	MarkWindowNeedsAttention(ctx context.Context, key WindowKey, opts ClaimOptions, diagnostics string) (WindowState, bool, error)
	TransitionWindow(ctx context.Context, key WindowKey, from []WindowStatus, to WindowStatus, mutate func(*WindowState)) (WindowState, error)
	MarkSummaryAttempted(ctx context.Context, key WindowKey) (bool, error)
	StaleProcessing(ctx context.Context, staleAfter time.Duration, limit int) ([]WindowState, error)
}

// Checkpoints are the chat collection checkpoints of reconciliation (design §8.2).
type Checkpoints interface {
	GetCheckpoint(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (Checkpoint, error)
	AdvanceCheckpoint(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID, pos CheckpointPosition, meta CheckpointMeta) (Checkpoint, bool, error)
}

// Entries is the curated timeline.
type Entries interface {
	GetEntry(ctx context.Context, ws ids.WorkspaceID, id int64) (Entry, error)
	UpsertDraftEntry(ctx context.Context, d EntryDraft) (EntryResult, error)
	UpdateDraftEntry(ctx context.Context, ws ids.WorkspaceID, id int64, c EntryContent) (EntryResult, error)
	BindEvidence(ctx context.Context, ws ids.WorkspaceID, entryID int64, evidenceIDs []int64) (int, error)
	CreateHumanEntry(ctx context.Context, h HumanEntry) (Entry, error)
	HumanEditEntry(ctx context.Context, ws ids.WorkspaceID, id int64, p EntryPatch) (Entry, error)
	ListEntries(ctx context.Context, ws ids.WorkspaceID, q EntryQuery) (EntryPage, error)
	ListVisibleEntries(ctx context.Context, ws ids.WorkspaceID) ([]Entry, error)
}

// Summaries is the workspace summary.
type Summaries interface {
	GetSummary(ctx context.Context, ws ids.WorkspaceID) (Summary, error)
	PutHumanSummary(ctx context.Context, ws ids.WorkspaceID, text string) error
	PutAISummaryIfNotHuman(ctx context.Context, ws ids.WorkspaceID, text string, meta json.RawMessage) (bool, error)
}

// Workspaces is the workspace feed.
type Workspaces interface {
	UpsertWorkspace(ctx context.Context, w Workspace, version int64) (WorkspaceOutcome, error)
	GetWorkspace(ctx context.Context, ws ids.WorkspaceID) (Workspace, error)
	SetWorkspaceStatus(ctx context.Context, ws ids.WorkspaceID, status WorkspaceStatus) (bool, error)
}

// Bindings maps chats to workspaces (design §6.1).
type Bindings interface {
	BindChat(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error)
	UnbindChat(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error)
	ReplaceBindings(ctx context.Context, ws ids.WorkspaceID, chats []ids.ChatID) (added, removed int, err error)
	BindingsForChat(ctx context.Context, chat ids.ChatID) ([]WorkspaceBinding, error)
	ListBindings(ctx context.Context, f BindingFilter) ([]WorkspaceBinding, error)
	ChatsOfWorkspace(ctx context.Context, ws ids.WorkspaceID) ([]ids.ChatID, error)
	ListenBindings(ctx context.Context, h BindingEvents) error
}

var (
	_ EvidenceWriter = (*Store)(nil)
	_ EvidenceReader = (*Store)(nil)
	_ WindowStates   = (*Store)(nil)
	_ Checkpoints    = (*Store)(nil)
	_ Entries        = (*Store)(nil)
	_ Summaries      = (*Store)(nil)
	_ Workspaces     = (*Store)(nil)
	_ Bindings       = (*Store)(nil)
)
