package synth

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/larkline/larkline/schemas/ids"
)

// ValidateRequest checks a request before any work is done. It returns a wrapped
// [ErrInvalidRequest] naming the first problem:
//
//   - the workspace or chat id is invalid (see package ids);
//   - the window is empty or inverted, or a bound is the zero time;
//   - a group has an empty or repeated key;
//   - a message has a non-positive or repeated evidence id or an invalid message id;
//   - a primary message lies outside [WindowStart, WindowEnd), or a context message at
//     or after WindowEnd (context is the recent past or the same thread, never the future);
//   - an existing entry names an unknown kind.
//
// A request with no groups, or with no citable message, is valid: it yields no drafts.
func ValidateRequest(req Request) error {
	if _, err := ids.ParseWorkspaceID(string(req.Workspace)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if _, err := ids.ParseChatID(string(req.Chat)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if req.WindowStart.IsZero() || req.WindowEnd.IsZero() || !req.WindowStart.Before(req.WindowEnd) {
		return fmt.Errorf("%w: window [%s, %s) is empty or unset", ErrInvalidRequest,
			req.WindowStart.UTC().Format(time.RFC3339), req.WindowEnd.UTC().Format(time.RFC3339))
	}
	keys := make(map[string]struct{}, len(req.Groups))
	seen := make(map[int64]struct{})
	for gi, g := range req.Groups {
		if g.Key == "" {
			return fmt.Errorf("%w: group %d has an empty key", ErrInvalidRequest, gi)
		}
		if _, dup := keys[g.Key]; dup {
			return fmt.Errorf("%w: group key %q appears twice", ErrInvalidRequest, bounded(g.Key, 64))
		}
		keys[g.Key] = struct{}{}
		for _, m := range g.Messages {
			if m.EvidenceID <= 0 {
				return fmt.Errorf("%w: group %q has a message with evidence id %d", ErrInvalidRequest, bounded(g.Key, 64), m.EvidenceID)
			}
			if _, dup := seen[m.EvidenceID]; dup {
				return fmt.Errorf("%w: evidence id %d appears twice", ErrInvalidRequest, m.EvidenceID)
			}
			seen[m.EvidenceID] = struct{}{}
			if _, err := ids.ParseMessageID(string(m.MessageID)); err != nil {
				return fmt.Errorf("%w: evidence %d: %w", ErrInvalidRequest, m.EvidenceID, err)
			}
			switch {
			case m.Context && !m.OccurredAt.Before(req.WindowEnd):
				return fmt.Errorf("%w: context evidence %d is at or after window end", ErrInvalidRequest, m.EvidenceID)
			case !m.Context && !inWindow(req, m.OccurredAt):
				return fmt.Errorf("%w: primary evidence %d at %s is outside the window", ErrInvalidRequest,
					m.EvidenceID, m.OccurredAt.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	for i, e := range req.Existing {
		if !e.Kind.Valid() {
			return fmt.Errorf("%w: existing entry %d has unknown kind %q", ErrInvalidRequest, i, bounded(string(e.Kind), 32))
		}
	}
	return nil
}

// CitableIDs returns the evidence ids a draft of req may cite (see [Message.Citable]).
func CitableIDs(req Request) map[int64]struct{} {
	out := make(map[int64]struct{})
	for _, g := range req.Groups {
		for _, m := range g.Messages {
			if m.Citable() {
				out[m.EvidenceID] = struct{}{}
			}
		}
	}
	return out
}

// Validate checks one draft against its request and returns a wrapped
// [ErrInvalidOutput] naming the first problem:
//
//   - the kind is unknown;
//   - the title is empty, longer than [MaxTitleRunes], not valid UTF-8, or contains a
//     control character (a title is one line);
//   - the body is longer than [MaxBodyRunes], not valid UTF-8, or contains a control
//     character other than newline and tab;
//   - OccurredAt lies outside [WindowStart, WindowEnd);
//   - EvidenceIDs is empty, repeats an id, or names an id that is not a citable
//     message of the request.
//
// The error text names ids, kinds and lengths, never text, so it can be fed back to a
// model, logged, and stored as window diagnostics.
func Validate(req Request, d Draft) error {
	return validate(req, CitableIDs(req), d)
}

// ValidateAll validates every draft against req, computing the citable set once. The
// error names the index of the first invalid draft.
func ValidateAll(req Request, drafts []Draft) error {
	citable := CitableIDs(req)
	for i, d := range drafts {
		if err := validate(req, citable, d); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
	}
	return nil
}

func validate(req Request, citable map[int64]struct{}, d Draft) error {
	if !d.Kind.Valid() {
		// Not quoted: model output stays out of errors, hence logs (issue #29).
		return fmt.Errorf("%w: unknown kind (%d bytes; want one of %s)", ErrInvalidOutput, len(d.Kind), fmt.Sprint(kinds))
	}
	if err := checkText("title", d.Title, MaxTitleRunes, false); err != nil {
		return err
	}
	if strings.TrimSpace(d.Title) == "" {
		return fmt.Errorf("%w: empty title", ErrInvalidOutput)
	}
	if err := checkText("body", d.Body, MaxBodyRunes, true); err != nil {
		return err
	}
	if !inWindow(req, d.OccurredAt) {
		return fmt.Errorf("%w: occurred_at %s is outside the window [%s, %s)", ErrInvalidOutput,
			d.OccurredAt.UTC().Format(time.RFC3339), req.WindowStart.UTC().Format(time.RFC3339),
			req.WindowEnd.UTC().Format(time.RFC3339))
	}
	if len(d.EvidenceIDs) == 0 {
		return fmt.Errorf("%w: no evidence ids", ErrInvalidOutput)
	}
	seen := make(map[int64]struct{}, len(d.EvidenceIDs))
	for _, id := range d.EvidenceIDs {
		if _, dup := seen[id]; dup {
			return fmt.Errorf("%w: evidence id %d repeated", ErrInvalidOutput, id)
		}
		seen[id] = struct{}{}
		if _, ok := citable[id]; !ok {
			return fmt.Errorf("%w: evidence id %d is not a citable (primary, not deleted, not bot) message of this request", ErrInvalidOutput, id)
		}
	}
	return nil
}

// ValidateSummaryRequest checks a summary request: a valid workspace id and at least
// one visible entry of a known kind. It returns a wrapped [ErrInvalidRequest].
func ValidateSummaryRequest(req SummaryRequest) error {
	if _, err := ids.ParseWorkspaceID(string(req.Workspace)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if len(req.Entries) == 0 {
		return fmt.Errorf("%w: no visible entries to summarize", ErrInvalidRequest)
	}
	for i, e := range req.Entries {
		if !e.Kind.Valid() {
			return fmt.Errorf("%w: entry %d has unknown kind %q", ErrInvalidRequest, i, bounded(string(e.Kind), 32))
		}
		if e.Status != StatusDraft && e.Status != StatusConfirmed {
			return fmt.Errorf("%w: entry %d has status %q (visible entries are draft or confirmed)", ErrInvalidRequest, i, bounded(e.Status, 32))
		}
	}
	return nil
}

// ValidateSummary checks a summary text: non-empty, valid UTF-8, at most
// [MaxSummaryRunes] runes, no control characters but newline and tab. It returns a
// wrapped [ErrInvalidOutput].
func ValidateSummary(text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%w: empty summary", ErrInvalidOutput)
	}
	return checkText("summary", text, MaxSummaryRunes, true)
}

func checkText(field, s string, maxRunes int, multiline bool) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidOutput, field)
	}
	if n := utf8.RuneCountInString(s); n > maxRunes {
		return fmt.Errorf("%w: %s has %d runes, more than %d", ErrInvalidOutput, field, n, maxRunes)
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) {
			return fmt.Errorf("%w: %s contains control character %U", ErrInvalidOutput, field, r)
		}
	}
	return nil
}

func inWindow(req Request, t time.Time) bool {
	return !t.Before(req.WindowStart) && t.Before(req.WindowEnd)
}

// bounded returns at most n runes of s, for quoting untrusted identifiers in errors.
func bounded(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
