package bindings

import (
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// Reasons a message is not stored in a bound workspace. The set is closed, so the
// values are safe as metrics labels.
const (
	// ReasonUnboundChat: the chat is bound to no workspace at all.
	ReasonUnboundChat = "unbound_chat"
	// ReasonTypeDisabled: ingestion is not enabled for the workspace's type.
	ReasonTypeDisabled = "workspace_type_disabled"
	// ReasonNotFiring: the workspace is recovered or archived.
	ReasonNotFiring = "workspace_not_firing"
	// ReasonTooOld: the workspace was created longer than the lookback ago.
	ReasonTooOld = "workspace_too_old"
	// ReasonBeforeWorkspace: the message is older than the workspace.
	ReasonBeforeWorkspace = "message_before_workspace"
)

// Target is an eligible workspace a message must be stored in.
type Target struct {
	Workspace ids.WorkspaceID
	// Type is the workspace type (incident, ...).
	Type string
	// CreatedAt is the workspace's creation time.
	CreatedAt time.Time
}

// Exclusion is a bound workspace the message must not be stored in, and why (one of
// the Reason* constants).
type Exclusion struct {
	Workspace ids.WorkspaceID
	Reason    string
}

// Resolution is the answer for one message: the workspaces it goes to and the bound
// ones it does not, both ordered by workspace id.
type Resolution struct {
	Chat     ids.ChatID
	Targets  []Target
	Excluded []Exclusion
}

// Reason says why the message goes nowhere: "" when there is a target,
// ReasonUnboundChat when the chat has no binding, otherwise the reason of the first
// excluded workspace (by workspace id).
func (r Resolution) Reason() string {
	switch {
	case len(r.Targets) > 0:
		return ""
	case len(r.Excluded) == 0:
		return ReasonUnboundChat
	default:
		return r.Excluded[0].Reason
	}
}

// policy is the eligibility rule of design §6, apart from the chat type.
type policy struct {
	lookback time.Duration
	types    map[string]bool
}

// exclusion returns why a message created at occurredAt must not go to the bound
// workspace w at time now, or "" when it must.
func (p policy) exclusion(w store.Workspace, now, occurredAt time.Time) string {
	switch {
	case !p.types[w.Type]:
		return ReasonTypeDisabled
	case w.Status != store.WorkspaceFiring:
		return ReasonNotFiring
	case now.Sub(w.CreatedAt) > p.lookback:
		return ReasonTooOld
	case occurredAt.Before(w.CreatedAt):
		return ReasonBeforeWorkspace
	}
	return ""
}

// resolve applies the policy to a chat's bindings.
func (p policy) resolve(chat ids.ChatID, bs []store.WorkspaceBinding, now, occurredAt time.Time) Resolution {
	res := Resolution{Chat: chat}
	for _, b := range bs {
		if reason := p.exclusion(b.Workspace, now, occurredAt); reason != "" {
			res.Excluded = append(res.Excluded, Exclusion{Workspace: b.Workspace.ID, Reason: reason})
			continue
		}
		res.Targets = append(res.Targets, Target{Workspace: b.Workspace.ID, Type: b.Workspace.Type, CreatedAt: b.Workspace.CreatedAt})
	}
	return res
}
