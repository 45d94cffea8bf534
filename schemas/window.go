package schemas

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
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

// windowEvidenceKeyMaxLen bounds an evidence key: three ids and two separators.
const windowEvidenceKeyMaxLen = 3*ids.MaxIDLen + 2

// ClosedWindow is a non-empty fixed UTC window of one chat that the window
// processor closed (schema io.larkline.ClosedWindow). Its record key is Key().
type ClosedWindow struct {
	WorkspaceID ids.WorkspaceID
	ChatID      ids.ChatID
	// WindowStart is inclusive, WindowEnd exclusive.
	WindowStart      time.Time
	WindowEnd        time.Time
	ProcessorVersion string
	// EvidenceCount equals len(Evidence); both are carried so a reader can check.
	EvidenceCount int
	// Evidence is ordered by OccurredAt, then MessageID (SortWindowEvidence), one
	// entry per message.
	Evidence []WindowEvidence
	// AggregateHash is WindowAggregateHash(Evidence).
	AggregateHash string
	ClosedAt      time.Time
	// Reason says why the window closed, e.g. CloseReasonGraceElapsed.
	Reason string

	// Version 3 (Ranged) names the window's evidence as a range of the chat's
	// evidence partition instead of listing it: Evidence is empty, AggregateHash "",
	// and EvidenceCount counts the evidence versions (records) the window took in.
	// All six are zero in records that list their evidence.
	EvidencePartition int32
	// EvidenceLowOffset is the lowest offset of the window's evidence;
	// EvidenceEndOffset one past the highest. The window's evidence is in the
	// evidence table once the evidence sink has committed EvidenceEndOffset.
	EvidenceLowOffset int64
	EvidenceEndOffset int64
	// FirstOccurredAt and LastOccurredAt bound the occurred_at of the window's
	// evidence versions.
	FirstOccurredAt time.Time
	LastOccurredAt  time.Time
	// Oversized: the window took in more evidence versions than the processor's
	// oversized bound. It is closed like any other window.
	Oversized bool
}

// Ranged reports whether the record names its evidence as an offset range
// (schema version 3) rather than listing it: its end offset is at least 1.
func (w *ClosedWindow) Ranged() bool { return w.EvidenceEndOffset > 0 }

// WindowEvidence is one evidence version included in a window.
type WindowEvidence struct {
	// Key is the evidence record key <workspace>/<chat>/<message>.
	Key         string
	MessageID   ids.MessageID
	OccurredAt  time.Time
	ContentHash string
	// SourceUpdatedAt and Deleted rank this version among the versions of its
	// message (EvidenceRank, the evidence table's version rule). SourceUpdatedAt is
	// zero when the writer did not know it: the rank is unknown.
	SourceUpdatedAt time.Time
	Deleted         bool
}

// Rank returns the version's rank and whether the record carries it.
func (e *WindowEvidence) Rank() (EvidenceRank, bool) {
	return EvidenceRank{SourceUpdatedAt: e.SourceUpdatedAt, Deleted: e.Deleted}, !e.SourceUpdatedAt.IsZero()
}

// Key returns the record key <workspace>/<chat>.
func (w *ClosedWindow) Key() string { return ids.ChatKey(w.WorkspaceID, w.ChatID) }

// SortWindowEvidence orders evidence the way ClosedWindow carries it: by
// OccurredAt, then MessageID.
func SortWindowEvidence(ev []WindowEvidence) {
	slices.SortFunc(ev, compareWindowEvidence)
}

func compareWindowEvidence(a, b WindowEvidence) int {
	if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
		return c
	}
	return cmp.Compare(a.MessageID, b.MessageID)
}

// WindowAggregateHash is the lower-case hex SHA-256 over the ordered
// (key, content_hash) pairs of a window, each written as key "\n" content_hash "\n".
// Keys and hashes never contain a newline, so the encoding is unambiguous.
func WindowAggregateHash(ev []WindowEvidence) string {
	h := sha256.New()
	for _, e := range ev {
		h.Write([]byte(e.Key))
		h.Write([]byte{'\n'})
		h.Write([]byte(e.ContentHash))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

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
	if w.Ranged() {
		w.validateRanged(&c)
		return c.err
	}
	switch {
	case w.EvidencePartition != 0 || w.EvidenceLowOffset != 0 || w.EvidenceEndOffset != 0 ||
		!w.FirstOccurredAt.IsZero() || !w.LastOccurredAt.IsZero() || w.Oversized:
		c.fail("a window that lists its evidence has no offset range, occurred_at bounds or oversized flag")
	case len(w.Evidence) == 0:
		c.fail("window has no evidence (empty windows never exist)")
	case len(w.Evidence) > MaxWindowEvidence:
		c.fail("window has %d evidence entries, more than %d", len(w.Evidence), MaxWindowEvidence)
	case w.EvidenceCount != len(w.Evidence):
		c.fail("evidence_count %d, but %d evidence entries", w.EvidenceCount, len(w.Evidence))
	}
	if c.err != nil {
		return c.err
	}
	prefix := ids.ChatKey(w.WorkspaceID, w.ChatID) + "/"
	for i, e := range w.Evidence {
		if len(e.Key) > windowEvidenceKeyMaxLen || !strings.HasPrefix(e.Key, prefix) || e.Key[len(prefix):] != string(e.MessageID) {
			c.fail("evidence[%d].key %.300q is not %s<message_id>", i, e.Key, prefix)
			break
		}
		if _, err := ids.ParseMessageID(string(e.MessageID)); err != nil {
			c.wrap("evidence.message_id", err)
			break
		}
		if e.OccurredAt.Before(w.WindowStart) || !e.OccurredAt.Before(w.WindowEnd) {
			c.fail("evidence[%d] %s occurred outside the window", i, e.MessageID)
			break
		}
		if !e.SourceUpdatedAt.IsZero() && e.SourceUpdatedAt.UnixMilli() <= 0 {
			c.fail("evidence[%d] %s source_updated_at is not after the epoch", i, e.MessageID)
			break
		}
		if !isSHA256Hex(e.ContentHash) {
			c.sha256Hex("evidence.content_hash", e.ContentHash)
			break
		}
		if i > 0 && compareWindowEvidence(w.Evidence[i-1], e) >= 0 {
			c.fail("evidence[%d] %s is not after evidence[%d] %s in (occurred_at, message_id) order", i, e.MessageID, i-1, w.Evidence[i-1].MessageID)
			break
		}
	}
	c.sha256Hex("aggregate_hash", w.AggregateHash)
	c.time("closed_at", w.ClosedAt)
	c.token("reason", w.Reason, MaxTokenLen)
	return c.err
}

// validateRanged checks a version 3 record: an offset range, no evidence list.
func (w *ClosedWindow) validateRanged(c *checker) {
	switch {
	case w.EvidencePartition < 0:
		c.fail("evidence_partition %d is negative", w.EvidencePartition)
	case w.EvidenceLowOffset < 0 || w.EvidenceEndOffset <= w.EvidenceLowOffset:
		c.fail("evidence offsets [%d, %d) are not a non-empty range", w.EvidenceLowOffset, w.EvidenceEndOffset)
	case w.EvidenceCount <= 0:
		c.fail("evidence_count %d: a window has at least one evidence version", w.EvidenceCount)
	case int64(w.EvidenceCount) > w.EvidenceEndOffset-w.EvidenceLowOffset:
		c.fail("evidence_count %d is more than the %d offsets of its range", w.EvidenceCount, w.EvidenceEndOffset-w.EvidenceLowOffset)
	case len(w.Evidence) != 0 || w.AggregateHash != "":
		c.fail("a ranged window lists no evidence and has no aggregate_hash")
	case w.FirstOccurredAt.Before(w.WindowStart) || !w.LastOccurredAt.Before(w.WindowEnd) || w.LastOccurredAt.Before(w.FirstOccurredAt):
		c.fail("first/last occurred_at are not an ordered pair inside the window")
	}
	c.time("closed_at", w.ClosedAt)
	c.token("reason", w.Reason, MaxTokenLen)
}

var closedWindowType = &recordType[ClosedWindow]{
	name:     NameClosedWindow,
	topic:    DefaultClosedWindowTopic,
	validate: (*ClosedWindow).Validate,
	toNative: func(w *ClosedWindow) map[string]any {
		ev := make([]any, len(w.Evidence))
		for i, e := range w.Evidence {
			ev[i] = map[string]any{
				"key":               e.Key,
				"message_id":        string(e.MessageID),
				"occurred_at":       millis(e.OccurredAt),
				"content_hash":      e.ContentHash,
				"source_updated_at": optMillis(e.SourceUpdatedAt),
				"deleted":           e.Deleted,
			}
		}
		return map[string]any{
			"workspace_id":        string(w.WorkspaceID),
			"chat_id":             string(w.ChatID),
			"window_start":        millis(w.WindowStart),
			"window_end":          millis(w.WindowEnd),
			"processor_version":   w.ProcessorVersion,
			"evidence_count":      int32(w.EvidenceCount),
			"evidence":            ev,
			"aggregate_hash":      w.AggregateHash,
			"closed_at":           millis(w.ClosedAt),
			"reason":              w.Reason,
			"evidence_partition":  w.EvidencePartition,
			"evidence_low_offset": w.EvidenceLowOffset,
			"evidence_end_offset": w.EvidenceEndOffset,
			"first_occurred_at":   optMillis(w.FirstOccurredAt),
			"last_occurred_at":    optMillis(w.LastOccurredAt),
			"oversized":           w.Oversized,
		}
	},
	fromNative: func(f *fieldReader) (ClosedWindow, error) {
		w := ClosedWindow{
			WorkspaceID:      ids.WorkspaceID(f.str("workspace_id")),
			ChatID:           ids.ChatID(f.str("chat_id")),
			WindowStart:      f.timestamp("window_start"),
			WindowEnd:        f.timestamp("window_end"),
			ProcessorVersion: f.str("processor_version"),
			EvidenceCount:    int(f.int32("evidence_count")),
			AggregateHash:    f.str("aggregate_hash"),
			ClosedAt:         f.timestamp("closed_at"),
			Reason:           f.str("reason"),

			EvidencePartition: f.int32("evidence_partition"),
			EvidenceLowOffset: f.long("evidence_low_offset"),
			EvidenceEndOffset: f.long("evidence_end_offset"),
			FirstOccurredAt:   f.optTimestamp("first_occurred_at"),
			LastOccurredAt:    f.optTimestamp("last_occurred_at"),
			Oversized:         f.boolean("oversized"),
		}
		items := f.records("evidence")
		if f.err != nil {
			return w, f.err
		}
		if len(items) > 0 {
			w.Evidence = make([]WindowEvidence, len(items))
		}
		for i, e := range items {
			w.Evidence[i] = WindowEvidence{
				Key:             e.str("key"),
				MessageID:       ids.MessageID(e.str("message_id")),
				OccurredAt:      e.timestamp("occurred_at"),
				ContentHash:     e.str("content_hash"),
				SourceUpdatedAt: e.optTimestamp("source_updated_at"),
				Deleted:         e.boolean("deleted"),
			}
			if e.err != nil {
				return w, e.err
			}
		}
		return w, nil
	},
}

// NewClosedWindowCodec returns the codec of ClosedWindow values.
func NewClosedWindowCodec(opts ...Option) (*Codec[ClosedWindow], error) {
	return newCodec(closedWindowType, opts)
}
