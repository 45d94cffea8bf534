package schemas

import (
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// DefaultClosedWindowTopic is the topic of ClosedWindow values.
const DefaultClosedWindowTopic = "larkline.windows.closed.v1"

// Common values of ClosedWindow.Reason. Any short code is accepted.
const (
	CloseReasonGraceElapsed               = "grace_elapsed"
	CloseReasonGraceElapsedHistoryCovered = "grace_elapsed_history_covered"
)

// ClosedWindow is a non-empty fixed UTC window of one chat that the window
// processor closed (schema io.larkline.ClosedWindow). Its record key is Key(). It
// names its evidence as the offsets [EvidenceLowOffset, EvidenceEndOffset) of the
// chat's evidence partition: the evidence is in the evidence table once the
// evidence sink has committed EvidenceEndOffset.
type ClosedWindow struct {
	WorkspaceID ids.WorkspaceID
	ChatID      ids.ChatID
	// WindowStart is inclusive, WindowEnd exclusive.
	WindowStart      time.Time
	WindowEnd        time.Time
	ProcessorVersion string
	// EvidenceCount counts the evidence versions (records) the window took in.
	EvidenceCount     int
	ClosedAt          time.Time
	Reason            string // why the window closed, e.g. CloseReasonGraceElapsed
	EvidencePartition int32
	EvidenceLowOffset int64
	EvidenceEndOffset int64
	// FirstOccurredAt and LastOccurredAt bound the occurred_at of the evidence.
	FirstOccurredAt time.Time
	LastOccurredAt  time.Time
	// Oversized: more evidence versions than the processor's oversized bound.
	Oversized bool
}

// Key returns the record key <workspace>/<chat>.
func (w *ClosedWindow) Key() string { return ids.ChatKey(w.WorkspaceID, w.ChatID) }

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (w *ClosedWindow) Validate() error {
	c := checker{rec: NameClosedWindow}
	_, err := ids.ParseWorkspaceID(string(w.WorkspaceID))
	c.wrap("workspace_id", err)
	_, err = ids.ParseChatID(string(w.ChatID))
	c.wrap("chat_id", err)
	c.time("window_start", w.WindowStart)
	c.time("window_end", w.WindowEnd)
	if !w.WindowEnd.After(w.WindowStart) {
		c.fail("window_end is not after window_start")
	}
	_, err = ids.ParseProcessorVersion(w.ProcessorVersion)
	c.wrap("processor_version", err)
	switch {
	case w.EvidencePartition < 0:
		c.fail("evidence_partition %d is negative", w.EvidencePartition)
	case w.EvidenceLowOffset < 0 || w.EvidenceEndOffset <= w.EvidenceLowOffset:
		c.fail("evidence offsets [%d, %d) are not a non-empty range", w.EvidenceLowOffset, w.EvidenceEndOffset)
	case w.EvidenceCount <= 0:
		c.fail("evidence_count %d: a window has at least one evidence version", w.EvidenceCount)
	case int64(w.EvidenceCount) > w.EvidenceEndOffset-w.EvidenceLowOffset:
		c.fail("evidence_count %d is more than the %d offsets of its range", w.EvidenceCount, w.EvidenceEndOffset-w.EvidenceLowOffset)
	case w.FirstOccurredAt.Before(w.WindowStart) || !w.LastOccurredAt.Before(w.WindowEnd) || w.LastOccurredAt.Before(w.FirstOccurredAt):
		c.fail("first/last occurred_at are not an ordered pair inside the window")
	}
	c.time("closed_at", w.ClosedAt)
	c.token("reason", w.Reason, MaxTokenLen)
	return c.err
}

// The schema's evidence and aggregate_hash fields are kept for the wire (version 3
// shipped with them, always empty): Encode leaves them to their defaults and Decode
// ignores them.
var closedWindowType = &recordType[ClosedWindow]{
	name:     NameClosedWindow,
	topic:    DefaultClosedWindowTopic,
	validate: (*ClosedWindow).Validate,
	toNative: func(w *ClosedWindow) map[string]any {
		return map[string]any{
			"workspace_id":        string(w.WorkspaceID),
			"chat_id":             string(w.ChatID),
			"window_start":        millis(w.WindowStart),
			"window_end":          millis(w.WindowEnd),
			"processor_version":   w.ProcessorVersion,
			"evidence_count":      int32(w.EvidenceCount),
			"closed_at":           millis(w.ClosedAt),
			"reason":              w.Reason,
			"evidence_partition":  w.EvidencePartition,
			"evidence_low_offset": w.EvidenceLowOffset,
			"evidence_end_offset": w.EvidenceEndOffset,
			"first_occurred_at":   millis(w.FirstOccurredAt),
			"last_occurred_at":    millis(w.LastOccurredAt),
			"oversized":           w.Oversized,
		}
	},
	fromNative: func(f *fieldReader) (ClosedWindow, error) {
		w := ClosedWindow{
			WorkspaceID:       ids.WorkspaceID(f.str("workspace_id")),
			ChatID:            ids.ChatID(f.str("chat_id")),
			WindowStart:       f.timestamp("window_start"),
			WindowEnd:         f.timestamp("window_end"),
			ProcessorVersion:  f.str("processor_version"),
			EvidenceCount:     int(f.int32("evidence_count")),
			ClosedAt:          f.timestamp("closed_at"),
			Reason:            f.str("reason"),
			EvidencePartition: f.int32("evidence_partition"),
			EvidenceLowOffset: f.long("evidence_low_offset"),
			EvidenceEndOffset: f.long("evidence_end_offset"),
			FirstOccurredAt:   f.timestamp("first_occurred_at"),
			LastOccurredAt:    f.timestamp("last_occurred_at"),
			Oversized:         f.boolean("oversized"),
		}
		return w, f.err
	},
}

// NewClosedWindowCodec returns the codec of ClosedWindow values.
func NewClosedWindowCodec(opts ...Option) (*Codec[ClosedWindow], error) {
	return newCodec(closedWindowType, opts)
}

// DefaultCheckpointTopic is the compacted topic of CollectionCheckpoint values.
const DefaultCheckpointTopic = "larkline.checkpoints.v1"

// CollectionCheckpoint says how far the history of one chat has been collected for
// one workspace (schema io.larkline.CollectionCheckpoint). Its record key is Key().
// The reconciler publishes it only after Kafka acknowledged every page it covers.
type CollectionCheckpoint struct {
	WorkspaceID ids.WorkspaceID
	ChatID      ids.ChatID
	// CoveredUntil: chat history is complete up to this instant.
	CoveredUntil time.Time
	// CursorCreateTimeMS (Unix ms, as Lark reports it) and CursorMessageID name the
	// last collected message; both zero until one is.
	CursorCreateTimeMS int64
	CursorMessageID    ids.MessageID
	UpdatedAt          time.Time
	// ReconcileVersion identifies the reconciliation logic that wrote the checkpoint.
	ReconcileVersion string
	// EvidenceEndOffset is one past the highest offset of the evidence the
	// reconciler produced for the chat up to this checkpoint, on the chat's evidence
	// partition: the read-your-writes barrier of coverage gating. 0: no barrier.
	EvidenceEndOffset int64
}

// Key returns the record key <workspace>/<chat>.
func (p *CollectionCheckpoint) Key() string { return ids.ChatKey(p.WorkspaceID, p.ChatID) }

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (p *CollectionCheckpoint) Validate() error {
	c := checker{rec: NameCollectionCheckpoint}
	_, err := ids.ParseWorkspaceID(string(p.WorkspaceID))
	c.wrap("workspace_id", err)
	_, err = ids.ParseChatID(string(p.ChatID))
	c.wrap("chat_id", err)
	c.time("covered_until", p.CoveredUntil)
	switch {
	case p.CursorCreateTimeMS < 0:
		c.fail("cursor_create_time_ms %d is negative", p.CursorCreateTimeMS)
	case p.CursorMessageID == "" && p.CursorCreateTimeMS != 0:
		c.fail("cursor_create_time_ms is set without cursor_message_id")
	case p.CursorMessageID != "":
		_, err := ids.ParseMessageID(string(p.CursorMessageID))
		c.wrap("cursor_message_id", err)
	}
	c.time("updated_at", p.UpdatedAt)
	c.token("reconcile_version", p.ReconcileVersion, MaxTokenLen)
	if p.EvidenceEndOffset < 0 {
		c.fail("evidence_end_offset %d is negative", p.EvidenceEndOffset)
	}
	return c.err
}

var checkpointType = &recordType[CollectionCheckpoint]{
	name:     NameCollectionCheckpoint,
	topic:    DefaultCheckpointTopic,
	validate: (*CollectionCheckpoint).Validate,
	toNative: func(p *CollectionCheckpoint) map[string]any {
		return map[string]any{
			"workspace_id":          string(p.WorkspaceID),
			"chat_id":               string(p.ChatID),
			"covered_until":         millis(p.CoveredUntil),
			"cursor_create_time_ms": p.CursorCreateTimeMS,
			"cursor_message_id":     nullableString(string(p.CursorMessageID)),
			"updated_at":            millis(p.UpdatedAt),
			"reconcile_version":     p.ReconcileVersion,
			"evidence_end_offset":   p.EvidenceEndOffset,
		}
	},
	fromNative: func(f *fieldReader) (CollectionCheckpoint, error) {
		p := CollectionCheckpoint{
			WorkspaceID:        ids.WorkspaceID(f.str("workspace_id")),
			ChatID:             ids.ChatID(f.str("chat_id")),
			CoveredUntil:       f.timestamp("covered_until"),
			CursorCreateTimeMS: f.long("cursor_create_time_ms"),
			CursorMessageID:    ids.MessageID(f.optStr("cursor_message_id")),
			UpdatedAt:          f.timestamp("updated_at"),
			ReconcileVersion:   f.str("reconcile_version"),
			EvidenceEndOffset:  f.long("evidence_end_offset"),
		}
		return p, f.err
	},
}

// NewCheckpointCodec returns the codec of CollectionCheckpoint values.
func NewCheckpointCodec(opts ...Option) (*Codec[CollectionCheckpoint], error) {
	return newCodec(checkpointType, opts)
}

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
