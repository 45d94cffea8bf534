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
