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
	WorkspaceID ids.WorkspaceID `avro:"workspace_id"`
	ChatID      ids.ChatID      `avro:"chat_id"`
	// WindowStart is inclusive, WindowEnd exclusive.
	WindowStart      time.Time `avro:"window_start"`
	WindowEnd        time.Time `avro:"window_end"`
	ProcessorVersion string    `avro:"processor_version"`
	// EvidenceCount counts the evidence versions (records) the window took in.
	EvidenceCount     int       `avro:"evidence_count"`
	ClosedAt          time.Time `avro:"closed_at"`
	Reason            string    `avro:"reason"` // why the window closed, e.g. CloseReasonGraceElapsed
	EvidencePartition int32     `avro:"evidence_partition"`
	EvidenceLowOffset int64     `avro:"evidence_low_offset"`
	EvidenceEndOffset int64     `avro:"evidence_end_offset"`
	// FirstOccurredAt and LastOccurredAt bound the occurred_at of the evidence.
	FirstOccurredAt time.Time `avro:"first_occurred_at"`
	LastOccurredAt  time.Time `avro:"last_occurred_at"`
	// Oversized: more evidence versions than the processor's oversized bound.
	Oversized bool `avro:"oversized"`
}

// Key returns the record key <workspace>/<chat>.
func (w *ClosedWindow) Key() string { return ids.ChatKey(w.WorkspaceID, w.ChatID) }

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (w *ClosedWindow) Validate() error {
	c := checker{rec: NameClosedWindow}
	validID(&c, "workspace_id", w.WorkspaceID, ids.ParseWorkspaceID, false)
	validID(&c, "chat_id", w.ChatID, ids.ParseChatID, false)
	c.time("window_start", w.WindowStart)
	c.time("window_end", w.WindowEnd)
	if !w.WindowEnd.After(w.WindowStart) {
		c.fail("window_end is not after window_start")
	}
	validID(&c, "processor_version", w.ProcessorVersion, ids.ParseProcessorVersion, false)
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
	WorkspaceID ids.WorkspaceID `avro:"workspace_id"`
	ChatID      ids.ChatID      `avro:"chat_id"`
	// CoveredUntil: chat history is complete up to this instant.
	CoveredUntil time.Time `avro:"covered_until"`
	// CursorCreateTimeMS (Unix ms, as Lark reports it) and CursorMessageID name the
	// last collected message; both zero until one is.
	CursorCreateTimeMS int64         `avro:"cursor_create_time_ms"`
	CursorMessageID    ids.MessageID `avro:"cursor_message_id"`
	UpdatedAt          time.Time     `avro:"updated_at"`
	// ReconcileVersion identifies the reconciliation logic that wrote the checkpoint.
	ReconcileVersion string `avro:"reconcile_version"`
	// EvidenceEndOffset is one past the highest offset of the evidence the
	// reconciler produced for the chat up to this checkpoint, on the chat's evidence
	// partition: the read-your-writes barrier of coverage gating. 0: no barrier.
	EvidenceEndOffset int64 `avro:"evidence_end_offset"`
}

// Key returns the record key <workspace>/<chat>.
func (p *CollectionCheckpoint) Key() string { return ids.ChatKey(p.WorkspaceID, p.ChatID) }

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (p *CollectionCheckpoint) Validate() error {
	c := checker{rec: NameCollectionCheckpoint}
	validID(&c, "workspace_id", p.WorkspaceID, ids.ParseWorkspaceID, false)
	validID(&c, "chat_id", p.ChatID, ids.ParseChatID, false)
	c.time("covered_until", p.CoveredUntil)
	switch {
	case p.CursorCreateTimeMS < 0:
		c.fail("cursor_create_time_ms %d is negative", p.CursorCreateTimeMS)
	case p.CursorMessageID == "" && p.CursorCreateTimeMS != 0:
		c.fail("cursor_create_time_ms is set without cursor_message_id")
	case p.CursorMessageID != "":
		validID(&c, "cursor_message_id", p.CursorMessageID, ids.ParseMessageID, false)
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
	ID ids.WorkspaceID `avro:"id"`
	// Type and Status are the workspace's type and status (e.g. "firing").
	Type      string    `avro:"type"`
	Status    string    `avro:"status"`
	CreatedAt time.Time `avro:"created_at"`
	// Version is monotonic per workspace, starting at 1. A reader that holds a
	// version keeps it when an older one arrives (see Supersedes).
	Version int64 `avro:"version"`
	// Chats are the bound Lark chats, without duplicates; nil when none.
	Chats     []ids.ChatID `avro:"chats"`
	UpdatedAt time.Time    `avro:"updated_at"`
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
	validID(&c, "id", w.ID, ids.ParseWorkspaceID, false)
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
}

// NewWorkspaceCodec returns the codec of WorkspaceRecord values.
func NewWorkspaceCodec(opts ...Option) (*Codec[WorkspaceRecord], error) {
	return newCodec(workspaceType, opts)
}
