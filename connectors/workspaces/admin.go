package workspaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	larkchats "github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// AdminStore is the part of the store the admin operations use; *store.Store
// implements it.
type AdminStore interface {
	UpsertWorkspace(ctx context.Context, w store.Workspace, version int64) (store.WorkspaceOutcome, error)
	GetWorkspace(ctx context.Context, ws ids.WorkspaceID) (store.Workspace, error)
	SetWorkspaceStatus(ctx context.Context, ws ids.WorkspaceID, status store.WorkspaceStatus) (bool, error)
	BindChat(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error)
	UnbindChat(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error)
	BindingsForChat(ctx context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error)
	ChatsOfWorkspace(ctx context.Context, ws ids.WorkspaceID) ([]ids.ChatID, error)
}

var _ AdminStore = (*store.Store)(nil)

// AdminOptions configure an Admin.
type AdminOptions struct {
	// ClockSkew is how far in the future created_at may be. Default DefaultClockSkew.
	ClockSkew time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives one line per change, with ids only. Nil discards.
	Logger *slog.Logger
	// Chats checks every chat bound with Bind against the Lark chat info API: a
	// single (p2p) or unsupported chat is refused (ErrNotGroupChat). *chats.Guard
	// satisfies it; larkline's CLI and admin API always set it. Nil: no check (tests
	// of other behaviour); reconciliation still refuses to read such a chat.
	Chats ChatChecker
}

// ChatChecker tells whether a chat may be bound: nil for a group chat, an error
// wrapping chats.ErrRefused for a p2p or unsupported chat, another error when Lark
// could not say. *chats.Guard satisfies it.
type ChatChecker interface {
	Check(ctx context.Context, chat ids.ChatID, path string) error
}

// Admin performs the administrative operations on workspaces and chat bindings,
// directly on Postgres. The admin HTTP API (Handler) and the CLI both use it. Every
// change is committed with a NOTIFY on store.BindingsChannel for the chats it
// affects, so running resolvers see it without a restart. It is safe for concurrent
// use.
type Admin struct {
	st    AdminStore
	chats ChatChecker
	skew  time.Duration
	now   func() time.Time
	log   *slog.Logger
}

// NewAdmin returns an Admin over st.
func NewAdmin(st AdminStore, opts AdminOptions) (*Admin, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: admin: nil store", ErrInvalidOptions)
	}
	opts.ClockSkew = cmp.Or(opts.ClockSkew, DefaultClockSkew)
	if opts.ClockSkew < 0 {
		return nil, fmt.Errorf("%w: admin: clock skew %s is negative", ErrInvalidOptions, opts.ClockSkew)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Admin{st: st, chats: opts.Chats, skew: opts.ClockSkew, now: opts.Now, log: opts.Logger.With("component", "workspace_admin")}, nil
}

// WorkspaceSpec is a workspace as an administrator creates or replaces it.
type WorkspaceSpec struct {
	ID        ids.WorkspaceID
	Type      string
	Status    store.WorkspaceStatus
	CreatedAt time.Time
	// Version is the feed version to store. Zero means the next one: 1 for a new
	// workspace, the stored version plus one otherwise. An explicit version must be
	// newer than the stored one (ErrStaleVersion otherwise).
	Version int64
}

// PutOutcome says what PutWorkspace did.
type PutOutcome uint8

// PutWorkspace outcomes.
const (
	PutCreated PutOutcome = iota + 1
	PutUpdated
	// PutUnchanged: the stored workspace already had the given type, status and
	// creation time, and no version was given; nothing was written.
	PutUnchanged
)

func (o PutOutcome) String() string {
	switch o {
	case PutCreated:
		return "created"
	case PutUpdated:
		return "updated"
	case PutUnchanged:
		return "unchanged"
	}
	return fmt.Sprintf("PutOutcome(%d)", uint8(o))
}

// PutWorkspace creates a workspace or replaces its type, status and creation time,
// and returns the stored workspace. An update bumps the feed version (see
// WorkspaceSpec.Version): a feed record with a version not newer than the result is
// then ignored, so a ticket system that publishes to the feed as well should derive
// its versions from a clock (e.g. milliseconds of its update time), not a counter.
func (a *Admin) PutWorkspace(ctx context.Context, spec WorkspaceSpec) (store.Workspace, PutOutcome, error) {
	w := store.Workspace{ID: spec.ID, Type: spec.Type, Status: spec.Status, CreatedAt: spec.CreatedAt.UTC()}
	if err := ValidateWorkspace(w, a.now(), a.skew); err != nil {
		return store.Workspace{}, 0, err
	}
	if spec.Version < 0 {
		return store.Workspace{}, 0, fieldErr("version", fmt.Sprintf("%d is negative", spec.Version), nil)
	}
	cur, err := a.st.GetWorkspace(ctx, spec.ID)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Workspace{}, 0, fmt.Errorf("put workspace %s: %w", spec.ID, err)
	}
	version := spec.Version
	switch {
	case !exists && version == 0:
		version = 1
	case exists && version == 0:
		if cur.Type == w.Type && cur.Status == w.Status && cur.CreatedAt.Equal(w.CreatedAt) {
			return cur, PutUnchanged, nil
		}
		version = cur.Version + 1
	case exists && version <= cur.Version:
		return store.Workspace{}, 0, fmt.Errorf("put workspace %s: %w: version %d is not newer than the stored version %d",
			spec.ID, ErrStaleVersion, version, cur.Version)
	}
	out, err := a.st.UpsertWorkspace(ctx, w, version)
	if err != nil {
		return store.Workspace{}, 0, fmt.Errorf("put workspace %s: %w", spec.ID, storeErr(err))
	}
	if out == store.WorkspaceIgnored {
		return store.Workspace{}, 0, fmt.Errorf("put workspace %s: %w: a concurrent update stored a version at least %d; read it and retry",
			spec.ID, ErrStaleVersion, version)
	}
	got, err := a.st.GetWorkspace(ctx, spec.ID)
	if err != nil {
		return store.Workspace{}, 0, fmt.Errorf("put workspace %s: read back: %w", spec.ID, err)
	}
	outcome := PutUpdated
	if out == store.WorkspaceInserted {
		outcome = PutCreated
	}
	a.log.Info("workspace put", "workspace_id", string(spec.ID), "outcome", outcome.String(), "status", string(got.Status), "version", got.Version)
	if exists && cur.Status == store.WorkspaceFiring && got.Status != store.WorkspaceFiring {
		a.logLeftFiring(spec.ID, got.Status)
	}
	return got, outcome, nil
}

// SetStatus changes a workspace's status, keeping its feed version (a newer feed
// record still wins), and returns the workspace and whether the status changed. The
// change is committed with a NOTIFY for every chat bound to the workspace: a
// workspace leaving firing is no longer eligible (design §6) at the next eligibility
// check of ingestion and reconciliation, which resolve bindings through that
// channel, without a restart. A missing workspace gives ErrWorkspaceNotFound.
func (a *Admin) SetStatus(ctx context.Context, ws ids.WorkspaceID, status store.WorkspaceStatus) (store.Workspace, bool, error) {
	if _, err := ParseWorkspaceID(string(ws)); err != nil {
		return store.Workspace{}, false, err
	}
	if _, err := ParseStatus(string(status)); err != nil {
		return store.Workspace{}, false, err
	}
	before, err := a.st.GetWorkspace(ctx, ws)
	if err != nil {
		return store.Workspace{}, false, fmt.Errorf("set status of workspace %s: %w", ws, storeErr(err))
	}
	changed, err := a.st.SetWorkspaceStatus(ctx, ws, status)
	if err != nil {
		return store.Workspace{}, false, fmt.Errorf("set status of workspace %s: %w", ws, storeErr(err))
	}
	got, err := a.st.GetWorkspace(ctx, ws)
	if err != nil {
		return store.Workspace{}, false, fmt.Errorf("set status of workspace %s: read back: %w", ws, storeErr(err))
	}
	if changed {
		a.log.Info("workspace status set", "workspace_id", string(ws), "from", string(before.Status), "status", string(status))
		if before.Status == store.WorkspaceFiring && status != store.WorkspaceFiring {
			a.logLeftFiring(ws, status)
		}
	}
	return got, changed, nil
}

func (a *Admin) logLeftFiring(ws ids.WorkspaceID, status store.WorkspaceStatus) {
	a.log.Info("workspace left firing: ingestion and reconciliation stop for it at their next eligibility check",
		"workspace_id", string(ws), "status", string(status))
}

// WorkspaceDetails is a workspace with the chats bound to it.
type WorkspaceDetails struct {
	store.Workspace
	Chats []ids.ChatID
}

// GetWorkspace returns a workspace and its bound chats; a missing workspace gives
// ErrWorkspaceNotFound.
func (a *Admin) GetWorkspace(ctx context.Context, ws ids.WorkspaceID) (WorkspaceDetails, error) {
	if _, err := ParseWorkspaceID(string(ws)); err != nil {
		return WorkspaceDetails{}, err
	}
	w, err := a.st.GetWorkspace(ctx, ws)
	if err != nil {
		return WorkspaceDetails{}, fmt.Errorf("get workspace %s: %w", ws, storeErr(err))
	}
	chats, err := a.st.ChatsOfWorkspace(ctx, ws)
	if err != nil {
		return WorkspaceDetails{}, fmt.Errorf("get workspace %s: %w", ws, storeErr(err))
	}
	return WorkspaceDetails{Workspace: w, Chats: chats}, nil
}

// Bind binds a Lark chat to a workspace and reports whether the binding is new. The
// binding is committed with a NOTIFY for the chat, so the event path honours it
// within its resolver's reaction time. A missing workspace is invalid input: the
// error wraps ErrInvalid and ErrWorkspaceNotFound. A workspace may have at most
// MaxChats chats. A chat that is not a group chat (AdminOptions.Chats) is refused
// with ErrNotGroupChat; when Lark cannot say, nothing is bound and the error wraps
// ErrChatCheckUnavailable.
func (a *Admin) Bind(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (bool, error) {
	if _, err := ParseWorkspaceID(string(ws)); err != nil {
		return false, err
	}
	if _, err := ParseChatID(string(chat)); err != nil {
		return false, err
	}
	chats, err := a.st.ChatsOfWorkspace(ctx, ws)
	if err != nil {
		return false, fmt.Errorf("bind chat %s to workspace %s: %w", chat, ws, storeErr(err))
	}
	if len(chats) >= MaxChats {
		if !slices.Contains(chats, chat) {
			return false, fieldErr("chat_id", fmt.Sprintf("workspace %s already has %d chats, the most allowed", ws, len(chats)), nil)
		}
	}
	if err := a.checkChat(ctx, chat); err != nil {
		return false, err
	}
	added, err := a.st.BindChat(ctx, ws, chat)
	if errors.Is(err, store.ErrNotFound) {
		return false, fieldErr("workspace_id", fmt.Sprintf("workspace %s does not exist; create it before binding chats", ws), ErrWorkspaceNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("bind chat %s to workspace %s: %w", chat, ws, storeErr(err))
	}
	if added {
		a.log.Info("chat bound", "workspace_id", string(ws), "chat_id", string(chat))
	}
	return added, nil
}

// checkChat refuses a chat that is not a group chat.
func (a *Admin) checkChat(ctx context.Context, chat ids.ChatID) error {
	if a.chats == nil {
		return nil
	}
	err := a.chats.Check(ctx, chat, larkchats.PathAdmin)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, larkchats.ErrP2PChat):
		a.log.Warn("bind refused: the chat is a single (p2p) chat", "chat_id", string(chat))
		return fieldErr("chat_id", fmt.Sprintf("chat %s is a single (p2p) chat; only group chats can be bound", chat),
			errors.Join(ErrNotGroupChat, err))
	case errors.Is(err, larkchats.ErrRefused):
		a.log.Warn("bind refused: the chat is not a group chat", "chat_id", string(chat), "reason", larkchats.Reason(err))
		return fieldErr("chat_id", fmt.Sprintf("chat %s is not a group chat (%v); only group chats can be bound", chat, err),
			errors.Join(ErrNotGroupChat, err))
	}
	return fmt.Errorf("bind chat %s: %w: %w", chat, ErrChatCheckUnavailable, err)
}

// Unbind removes a binding; one that does not exist gives ErrBindingNotFound. The
// removal is committed with a NOTIFY for the chat.
func (a *Admin) Unbind(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) error {
	if _, err := ParseWorkspaceID(string(ws)); err != nil {
		return err
	}
	if _, err := ParseChatID(string(chat)); err != nil {
		return err
	}
	removed, err := a.st.UnbindChat(ctx, ws, chat)
	if err != nil {
		return fmt.Errorf("unbind chat %s from workspace %s: %w", chat, ws, storeErr(err))
	}
	if !removed {
		return fmt.Errorf("unbind chat %s from workspace %s: %w", chat, ws, ErrBindingNotFound)
	}
	a.log.Info("chat unbound", "workspace_id", string(ws), "chat_id", string(chat))
	return nil
}

// BindingsOfChat returns every workspace the chat is bound to, in any status, ordered
// by workspace id.
func (a *Admin) BindingsOfChat(ctx context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error) {
	if _, err := ParseChatID(string(chat)); err != nil {
		return nil, err
	}
	bs, err := a.st.BindingsForChat(ctx, chat)
	if err != nil {
		return nil, fmt.Errorf("bindings of chat %s: %w", chat, storeErr(err))
	}
	return bs, nil
}

// storeErr maps the store's sentinels onto this package's.
func storeErr(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrWorkspaceNotFound, err)
	case errors.Is(err, store.ErrInvalid):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}
