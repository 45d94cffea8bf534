package schemas

import (
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// DefaultWorkspaceTopic is the compacted topic of WorkspaceRecord values.
const DefaultWorkspaceTopic = "larkline.workspaces.v1"

// WorkspaceRecord is a workspace and its bound Lark chats (schema
// io.larkline.WorkspaceRecord). Its record key is Key().
type WorkspaceRecord struct {
	ID ids.WorkspaceID
	// Type and Status are the workspace's type and status (e.g. "firing").
	Type      string
	Status    string
	CreatedAt time.Time
	// Version is monotonic per workspace, starting at 1. A reader that holds a
	// version keeps it when an older one arrives (see Supersedes).
	Version int64
	// Chats are the bound Lark chats, without duplicates; nil when none.
	Chats     []ids.ChatID
	UpdatedAt time.Time
}

// Key returns the record key, the workspace id.
func (w *WorkspaceRecord) Key() string { return string(w.ID) }

// Supersedes reports whether w should replace old, the version a reader holds:
// only a strictly newer version does, so a replayed or reordered older record is
// ignored.
func (w *WorkspaceRecord) Supersedes(old *WorkspaceRecord) bool {
	return old == nil || w.Version > old.Version
}

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (w *WorkspaceRecord) Validate() error {
	c := checker{rec: NameWorkspaceRecord}
	_, err := ids.ParseWorkspaceID(string(w.ID))
	c.wrap("id", err)
	c.token("type", w.Type, MaxTokenLen)
	c.token("status", w.Status, MaxTokenLen)
	c.time("created_at", w.CreatedAt)
	if w.Version < 1 {
		c.fail("version %d is not positive", w.Version)
	}
	if len(w.Chats) > MaxWorkspaceChats {
		c.fail("%d chats, more than %d", len(w.Chats), MaxWorkspaceChats)
	}
	if c.err == nil {
		seen := make(map[ids.ChatID]struct{}, len(w.Chats))
		for _, chat := range w.Chats {
			if _, err := ids.ParseChatID(string(chat)); err != nil {
				c.wrap("chats", err)
				break
			}
			if _, dup := seen[chat]; dup {
				c.fail("chat %s is listed twice", chat)
				break
			}
			seen[chat] = struct{}{}
		}
	}
	c.time("updated_at", w.UpdatedAt)
	return c.err
}

var workspaceType = &recordType[WorkspaceRecord]{
	name:     NameWorkspaceRecord,
	topic:    DefaultWorkspaceTopic,
	validate: (*WorkspaceRecord).Validate,
	toNative: func(w *WorkspaceRecord) map[string]any {
		chats := make([]any, len(w.Chats))
		for i, c := range w.Chats {
			chats[i] = string(c)
		}
		return map[string]any{
			"id":         string(w.ID),
			"type":       w.Type,
			"status":     w.Status,
			"created_at": millis(w.CreatedAt),
			"version":    w.Version,
			"chats":      chats,
			"updated_at": millis(w.UpdatedAt),
		}
	},
	fromNative: func(f *fieldReader) (WorkspaceRecord, error) {
		w := WorkspaceRecord{
			ID:        ids.WorkspaceID(f.str("id")),
			Type:      f.str("type"),
			Status:    f.str("status"),
			CreatedAt: f.timestamp("created_at"),
			Version:   f.long("version"),
			UpdatedAt: f.timestamp("updated_at"),
		}
		chats := f.list("chats")
		if f.err != nil {
			return w, f.err
		}
		if len(chats) > 0 {
			w.Chats = make([]ids.ChatID, len(chats))
		}
		for i, c := range chats {
			s, ok := unwrap(c).(string)
			if !ok {
				f.fail("chats", "item %d is a %T, want a string", i, c)
				return w, f.err
			}
			w.Chats[i] = ids.ChatID(s)
		}
		return w, nil
	},
}

// NewWorkspaceCodec returns the codec of WorkspaceRecord values.
func NewWorkspaceCodec(opts ...Option) (*Codec[WorkspaceRecord], error) {
	return newCodec(workspaceType, opts)
}
