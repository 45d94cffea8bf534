package workspaces

import (
	"fmt"
	"strings"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Validation bounds.
const (
	// DefaultClockSkew is how far in the future a creation time may lie before it is
	// rejected: ticket systems and larkline do not share a clock.
	DefaultClockSkew = 5 * time.Minute
	// MaxChats bounds the chats bound to one workspace, on every path (the feed
	// record's limit, so that any workspace can be published).
	MaxChats = schemas.MaxWorkspaceChats
	// MaxTypeLen bounds a workspace type.
	MaxTypeLen = min(store.MaxWorkspaceTypeLen, schemas.MaxTokenLen)
)

// Statuses lists the workspace statuses larkline knows, in the order they usually
// occur. Only firing workspaces ingest automatically (design §6).
var Statuses = []store.WorkspaceStatus{store.WorkspaceFiring, store.WorkspaceRecovered, store.WorkspaceArchived}

// ParseStatus returns the status named s (exact, lower case), or a FieldError for
// "status" that lists the known ones.
func ParseStatus(s string) (store.WorkspaceStatus, error) {
	for _, st := range Statuses {
		if s == string(st) {
			return st, nil
		}
	}
	return "", fieldErr("status", fmt.Sprintf("unknown status %.64q (want firing, recovered or archived)", s), nil)
}

// ParseWorkspaceID validates a workspace id given as input field "workspace_id".
func ParseWorkspaceID(s string) (ids.WorkspaceID, error) {
	return parseWorkspaceField("workspace_id", s)
}

func parseWorkspaceField(field, s string) (ids.WorkspaceID, error) {
	ws, err := ids.ParseWorkspaceID(s)
	if err != nil {
		return "", fieldErr(field, idProblem(err), err)
	}
	return ws, nil
}

// ParseChatID validates a Lark chat id (oc_…) given as input field "chat_id".
func ParseChatID(s string) (ids.ChatID, error) {
	c, err := ids.ParseChatID(s)
	if err != nil {
		return "", fieldErr("chat_id", "not a Lark chat id: "+idProblem(err), err)
	}
	return c, nil
}

// idProblem is the text of an ids parse error without its "invalid id: " prefix.
func idProblem(err error) string {
	return strings.TrimPrefix(err.Error(), ids.ErrInvalidID.Error()+": ")
}

// checkType applies the rule of a workspace type: 1..MaxTypeLen bytes of letters,
// digits, '_', '-', '.', ':' (the feed record's rule for short codes).
func checkType(t string) error {
	switch {
	case t == "":
		return fieldErr("type", "is empty", nil)
	case len(t) > MaxTypeLen:
		return fieldErr("type", fmt.Sprintf("is %d bytes, more than %d", len(t), MaxTypeLen), nil)
	}
	for i := 0; i < len(t); i++ {
		b := t[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.' || b == ':') {
			return fieldErr("type", fmt.Sprintf("%.64q has characters outside [A-Za-z0-9_.:-]", t), nil)
		}
	}
	return nil
}

// checkCreatedAt rejects a zero creation time and one later than now plus skew.
func checkCreatedAt(at, now time.Time, skew time.Duration) error {
	switch {
	case at.IsZero():
		return fieldErr("created_at", "is not set", nil)
	case at.After(now.Add(skew)):
		return fieldErr("created_at", fmt.Sprintf("%s is in the future (now %s, allowed clock skew %s)",
			at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), skew), nil)
	}
	return nil
}

// checkChats validates a workspace's complete chat list: at most MaxChats Lark chat
// ids, none twice.
func checkChats(chats []ids.ChatID) error {
	if len(chats) > MaxChats {
		return fieldErr("chats", fmt.Sprintf("%d chats, more than %d", len(chats), MaxChats), nil)
	}
	seen := make(map[ids.ChatID]struct{}, len(chats))
	for i, c := range chats {
		if _, err := ids.ParseChatID(string(c)); err != nil {
			return fieldErr(fmt.Sprintf("chats[%d]", i), "not a Lark chat id: "+idProblem(err), err)
		}
		if _, dup := seen[c]; dup {
			return fieldErr(fmt.Sprintf("chats[%d]", i), fmt.Sprintf("chat %s is listed twice", c), nil)
		}
		seen[c] = struct{}{}
	}
	return nil
}

// ValidateWorkspace checks a workspace before it is written: its id, a non-empty
// type of at most MaxTypeLen token characters, a known status, and a creation time
// that is set and not later than now+skew. Errors are *FieldError wrapping ErrInvalid.
func ValidateWorkspace(w store.Workspace, now time.Time, skew time.Duration) error {
	if _, err := parseWorkspaceField("id", string(w.ID)); err != nil {
		return err
	}
	if err := checkType(w.Type); err != nil {
		return err
	}
	if _, err := ParseStatus(string(w.Status)); err != nil {
		return err
	}
	return checkCreatedAt(w.CreatedAt, now, skew)
}

// ValidateRecord checks a feed record: everything ValidateWorkspace checks, a
// positive version, the chat list (at most MaxChats Lark chat ids, no duplicates), a
// set updated_at, and finally every rule of the record schema (rec.Validate). Errors
// wrap ErrInvalid; those found here are *FieldError naming the field.
func ValidateRecord(rec *schemas.WorkspaceRecord, now time.Time, skew time.Duration) error {
	if rec == nil {
		return fieldErr("record", "is nil", nil)
	}
	if err := ValidateWorkspace(workspaceOf(rec), now, skew); err != nil {
		return err
	}
	if rec.Version < 1 {
		return fieldErr("version", fmt.Sprintf("%d is not positive", rec.Version), nil)
	}
	if err := checkChats(rec.Chats); err != nil {
		return err
	}
	if rec.UpdatedAt.IsZero() {
		return fieldErr("updated_at", "is not set", nil)
	}
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// workspaceOf is the workspace row a feed record describes.
func workspaceOf(rec *schemas.WorkspaceRecord) store.Workspace {
	return store.Workspace{
		ID:        rec.ID,
		Type:      rec.Type,
		Status:    store.WorkspaceStatus(rec.Status),
		CreatedAt: rec.CreatedAt,
	}
}
