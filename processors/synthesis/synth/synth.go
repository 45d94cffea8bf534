package synth

import (
	"context"
	"fmt"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// Kind is the kind of a timeline entry (design §12.3).
type Kind string

// The timeline-worthy kinds, in their canonical order.
const (
	KindImpact     Kind = "impact"     // customer impact or affected scope
	KindFinding    Kind = "finding"    // a new investigation finding
	KindDecision   Kind = "decision"   // a decision taken by the responders
	KindOwnership  Kind = "ownership"  // who owns the incident or a task, handovers
	KindMitigation Kind = "mitigation" // a mitigation or operational action carried out
	KindRootCause  Kind = "root_cause" // a root-cause conclusion
	KindRecovery   Kind = "recovery"   // recovery or verification
	KindNextStep   Kind = "next_step"  // an important next step or follow-up
	KindBlocker    Kind = "blocker"    // something blocking the response
)

var kinds = []Kind{
	KindImpact, KindFinding, KindDecision, KindOwnership, KindMitigation,
	KindRootCause, KindRecovery, KindNextStep, KindBlocker,
}

// Kinds returns every known kind in canonical order (a fresh slice).
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// Rank is the kind's position in the canonical order, or -1 for an unknown kind. It is
// the deterministic tie-breaker when drafts of the same instant are sorted.
func (k Kind) Rank() int {
	for i, known := range kinds {
		if k == known {
			return i
		}
	}
	return -1
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k.Rank() >= 0 }

// ParseKind validates a kind name.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("%w: unknown kind (%d bytes)", ErrInvalidOutput, len(s))
	}
	return k, nil
}

// Bounds of synthesized text, in Unicode code points.
const (
	MaxTitleRunes   = 200
	MaxBodyRunes    = 2000
	MaxSummaryRunes = 4000
)

// Message types the worker passes through (Lark message types, design §7.3).
const (
	MessageTypeText = "text"
	MessageTypePost = "post"
)

// Message is one evidence row as a synthesizer sees it.
type Message struct {
	// EvidenceID is the id of the workspace_timeline_evidence row; drafts cite these.
	EvidenceID   int64
	MessageID    ids.MessageID
	SenderOpenID string
	SenderName   string
	OccurredAt   time.Time
	// Text is the normalized message text. It never leaves the process unredacted.
	Text        string
	MessageType string
	ThreadID    string
	RootID      string
	ParentID    string
	// Context marks read-only context (the previous five minutes, or the same thread
	// or root up to window_end): it may inform a synthesizer but is never cited.
	Context bool
	// Deleted marks a recalled message whose evidence was redacted; never cited.
	Deleted bool
	// FromBot marks a message sent by a bot (including larkline's own); never cited,
	// never sent to a model, so generated text cannot feed back into the timeline.
	FromBot bool
}

// Citable reports whether m may be cited by a draft: primary (not context), not
// deleted and not from a bot.
func (m Message) Citable() bool { return !m.Context && !m.Deleted && !m.FromBot }

// Group is one conversation of a chunk, in message order. The caller groups by
// thread_id, then root_id, then top-level message plus replies, then proximity (§12.2).
type Group struct {
	Key      string
	Messages []Message
}

// ExistingEntry is a timeline entry already in the workspace near the window, given so
// that a synthesizer can avoid repeating it.
type ExistingEntry struct {
	Kind        Kind
	Title       string
	OccurredAt  time.Time
	Fingerprint string
}

// Request is one chunk of one window of one chat.
type Request struct {
	Workspace   ids.WorkspaceID
	Chat        ids.ChatID
	WindowStart time.Time // inclusive
	WindowEnd   time.Time // exclusive
	Groups      []Group
	Existing    []ExistingEntry
	// ProcessorVersion is the window processor version the chunk belongs to; the
	// worker records it with the entries.
	ProcessorVersion string
}

// Draft is one proposed timeline entry.
type Draft struct {
	Kind       Kind
	Title      string
	Body       string
	OccurredAt time.Time
	// EvidenceIDs are the supporting messages: non-empty, each a citable message of
	// the request (see [Message.Citable]).
	EvidenceIDs []int64
}

// Usage is the model token usage of a call (zero for the rule-based synthesizer).
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{PromptTokens: u.PromptTokens + v.PromptTokens, CompletionTokens: u.CompletionTokens + v.CompletionTokens}
}

// Result is what one Synthesize call produced. No drafts is a valid result: the chunk
// held nothing timeline-worthy.
type Result struct {
	Drafts []Draft
	// Synthesizer names the implementation ("rules", "openai").
	Synthesizer string
	// Model is the model that answered (empty for the rule-based synthesizer).
	Model string
	// PromptVersion identifies the prompt and output schema (or the rule set).
	PromptVersion string
	Usage         Usage
}

// Synthesizer turns one chunk into drafts. Implementations are safe for concurrent use.
// Errors: [ErrInvalidRequest] for a request that fails [ValidateRequest];
// [ErrInvalidOutput], [ErrUnavailable] and [ErrRejected] from model-backed
// implementations; the context's error when ctx ends. [IsRetryable] classifies them.
type Synthesizer interface {
	Synthesize(ctx context.Context, req Request) (Result, error)
}

// Entry statuses of visible timeline entries.
const (
	StatusDraft     = "draft"
	StatusConfirmed = "confirmed"
)

// VisibleEntry is a timeline entry the workspace shows (draft or confirmed, never
// hidden): the primary input of a summary (§13).
type VisibleEntry struct {
	Kind       Kind
	Title      string
	Body       string
	OccurredAt time.Time
	Status     string
}

// SummaryRequest asks for a workspace summary from its visible entries.
type SummaryRequest struct {
	Workspace ids.WorkspaceID
	Entries   []VisibleEntry
	// Previous is the current AI summary, if any (a human summary is never
	// regenerated, so it never reaches a summarizer).
	Previous string
}

// Summarizer writes a workspace summary of at most [MaxSummaryRunes] runes.
// Errors are classified like [Synthesizer]'s.
type Summarizer interface {
	Summarize(ctx context.Context, req SummaryRequest) (text string, usage Usage, err error)
}
