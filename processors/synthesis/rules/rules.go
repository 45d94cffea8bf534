package rules

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// Name is the Result.Synthesizer of this package.
const Name = "rules"

// Version identifies the rule set; it is recorded as Result.PromptVersion and must
// change whenever the patterns or the drafting change what a window yields.
const Version = "rules-v2"

// Defaults and bounds of [Options].
const (
	DefaultMaxTitleRunes   = 160
	DefaultMaxSummaryRunes = 1500
	minTitleRunes          = 40
	minSummaryRunes        = 200
	maxLineRunes           = 300 // one supporting message in a body
)

// ErrInvalidOptions is returned (wrapped) by [New] for out-of-range options.
var ErrInvalidOptions = errors.New("invalid rules options")

// Options configures the rule-based synthesizer. The zero value is valid.
type Options struct {
	// MaxTitleRunes bounds titles: 40..synth.MaxTitleRunes, 0 means DefaultMaxTitleRunes.
	MaxTitleRunes int
	// MaxSummaryRunes bounds summaries: 200..synth.MaxSummaryRunes, 0 means
	// DefaultMaxSummaryRunes.
	MaxSummaryRunes int
}

// Synthesizer is the deterministic rule-based [synth.Synthesizer] and
// [synth.Summarizer]. It is immutable and safe for concurrent use.
type Synthesizer struct {
	maxTitle   int
	maxSummary int
}

var (
	_ synth.Synthesizer = (*Synthesizer)(nil)
	_ synth.Summarizer  = (*Synthesizer)(nil)
)

// New validates o and returns a synthesizer.
func New(o Options) (*Synthesizer, error) {
	if o.MaxTitleRunes == 0 {
		o.MaxTitleRunes = DefaultMaxTitleRunes
	}
	if o.MaxSummaryRunes == 0 {
		o.MaxSummaryRunes = DefaultMaxSummaryRunes
	}
	if o.MaxTitleRunes < minTitleRunes || o.MaxTitleRunes > synth.MaxTitleRunes {
		return nil, fmt.Errorf("%w: MaxTitleRunes %d not in %d..%d", ErrInvalidOptions, o.MaxTitleRunes, minTitleRunes, synth.MaxTitleRunes)
	}
	if o.MaxSummaryRunes < minSummaryRunes || o.MaxSummaryRunes > synth.MaxSummaryRunes {
		return nil, fmt.Errorf("%w: MaxSummaryRunes %d not in %d..%d", ErrInvalidOptions, o.MaxSummaryRunes, minSummaryRunes, synth.MaxSummaryRunes)
	}
	return &Synthesizer{maxTitle: o.MaxTitleRunes, maxSummary: o.MaxSummaryRunes}, nil
}

// analysed is one eligible message with its per-kind evidence.
type analysed struct {
	msg   synth.Message
	score scores
	title [numKinds]string // what a draft of the kind is titled after, uncut
}

// Synthesize drafts at most one entry per (group, kind). See the package
// documentation for what counts. It fails only for an invalid request
// ([synth.ErrInvalidRequest]) or an ended context.
func (s *Synthesizer) Synthesize(ctx context.Context, req synth.Request) (synth.Result, error) {
	res := synth.Result{Synthesizer: Name, PromptVersion: Version}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := synth.ValidateRequest(req); err != nil {
		return res, err
	}
	existing := make(map[string]synth.ExistingEntry, len(req.Existing))
	for _, e := range req.Existing {
		existing[string(e.Kind)+"\x00"+normTitle(e.Title)] = e
	}
	for _, g := range req.Groups {
		var msgs []analysed
		for _, m := range g.Messages {
			if a, ok := s.analyse(m); ok {
				msgs = append(msgs, a)
			}
		}
		for _, kind := range synth.Kinds() {
			d, ok := s.draft(kind, msgs)
			if !ok {
				continue
			}
			if e, dup := existing[string(kind)+"\x00"+normTitle(d.Title)]; dup && e.Fingerprint != synth.Fingerprint(req.Workspace, d) {
				continue // the same status again: §12.3 "repeated status" yields nothing
			}
			res.Drafts = append(res.Drafts, d)
		}
	}
	slices.SortFunc(res.Drafts, func(a, b synth.Draft) int {
		if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
			return c
		}
		if c := a.Kind.Rank() - b.Kind.Rank(); c != 0 {
			return c
		}
		return cmp.Compare(a.EvidenceIDs[0], b.EvidenceIDs[0])
	})
	return res, nil
}

// analyse decides whether a message can support a draft, of which kinds, and what
// each draft would be titled after.
func (s *Synthesizer) analyse(m synth.Message) (analysed, bool) {
	text, ok := statement(m)
	if !ok {
		return analysed{}, false
	}
	// A labelled message ("Impact: …", "Root cause" heading, "Next steps" list) is
	// classified by its labels only, one draft kind per labelled section.
	if secs := sections(text); len(secs) > 0 {
		return s.analyseSections(m, secs)
	}
	return s.analyseSentences(m, text)
}

// statement is the trimmed text of a message that can state something: ok is false
// for one that is not citable, not text, empty, an acknowledgement, or without words.
func statement(m synth.Message) (string, bool) {
	if !m.Citable() {
		return "", false // context, deleted, bot
	}
	switch m.MessageType {
	case synth.MessageTypeText, synth.MessageTypePost, "":
	default:
		return "", false // images, files, cards, system messages
	}
	text := strings.TrimSpace(m.Text)
	if text == "" || isAck(text) {
		return "", false
	}
	words, han, hadLink := content(text)
	if words+han == 0 {
		return "", false // emoji, punctuation or a link alone
	}
	if hadLink && words < 4 && han < 6 {
		return "", false // a link without explanation
	}
	return text, true
}

// analyseSections classifies a labelled message by its sections.
func (s *Synthesizer) analyseSections(m synth.Message, secs []section) (analysed, bool) {
	a := analysed{msg: m}
	ok := false
	for _, sec := range secs {
		k := sec.kind.Rank()
		if a.score[k] > 0 {
			continue // the first section of a kind titles it
		}
		if w, h, _ := content(sec.content); w+h == 0 {
			continue // a heading without content
		}
		a.score[k] = maxScore
		a.title[k] = sectionTitle(sec, s.maxTitle)
		ok = true
	}
	return a, ok
}

// analyseSentences classifies a message without labels: every sentence has at most
// one kind, its strongest; a message supports the kinds of its sentences. Quoted text
// is someone's words, not a statement; a leading acknowledgement is dropped before
// scoring.
func (s *Synthesizer) analyseSentences(m synth.Message, text string) (analysed, bool) {
	a := analysed{msg: m}
	ok := false
	whole, acked := stripAckLead(text)
	allowed := allowedKinds(whole, acked)
	var best [numKinds]string
	for _, sentence := range sentences(whole) {
		sc := primary(scoreSentence(normalizeForMatch(quotedRE.ReplaceAllString(sentence, " "))))
		for k, v := range sc {
			if v > a.score[k] && allowed(synth.Kinds()[k]) {
				a.score[k] = v
				best[k] = sentence
				ok = true
			}
		}
	}
	if !ok {
		return a, false
	}
	s.sentenceTitles(&a, whole, best)
	return a, true
}

// allowedKinds is the kinds a message without labels may support: only ownership when
// it adds no new fact.
func allowedKinds(whole string, acked bool) func(synth.Kind) bool {
	unquoted := quotedRE.ReplaceAllString(whole, " ")
	units, digits := substance(unquoted)
	switch {
	case acked && !digits && units < minAckReply,
		meTooRE.MatchString(normalizeForMatch(unquoted)) && !digits && units < minAgreement,
		!digits && units < minSubstance:
		// "收到，开始切换", "我这边也看到了", "继续观察": no new fact; only a
		// statement of who owns what ("ack, taking IC") survives.
		return func(k synth.Kind) bool { return k == synth.KindOwnership }
	}
	return func(synth.Kind) bool { return true }
}

// sentenceTitles titles each kind a's message supports, from the message without its
// leading acknowledgement (whole) or its strongest sentence of the kind (best).
func (s *Synthesizer) sentenceTitles(a *analysed, whole string, best [numKinds]string) {
	kinds := 0
	for _, v := range a.score {
		if v > 0 {
			kinds++
		}
	}
	// One kind: the message is the title, without its leading acknowledgement,
	// when it fits; several kinds, or too long: each kind's strongest sentence.
	for k, v := range a.score {
		if v == 0 {
			continue
		}
		if kinds == 1 && fits(whole, s.maxTitle) {
			a.title[k] = whole
		} else {
			a.title[k] = best[k]
		}
	}
}

// draft combines the messages of one group that support kind.
func (s *Synthesizer) draft(kind synth.Kind, msgs []analysed) (synth.Draft, bool) {
	k := kind.Rank()
	var support []analysed
	bestIdx := -1
	for _, a := range msgs {
		if a.score[k] < threshold {
			continue
		}
		support = append(support, a)
		if bestIdx < 0 || a.score[k] > support[bestIdx].score[k] {
			bestIdx = len(support) - 1 // ties keep the earliest
		}
	}
	if len(support) == 0 {
		return synth.Draft{}, false
	}
	best := support[bestIdx]
	d := synth.Draft{
		Kind:       kind,
		Title:      truncate(cleanTitle(best.title[k]), s.maxTitle),
		Body:       body(support),
		OccurredAt: best.msg.OccurredAt,
	}
	for _, a := range support {
		d.EvidenceIDs = append(d.EvidenceIDs, a.msg.EvidenceID)
	}
	slices.Sort(d.EvidenceIDs)
	return d, true
}

// body lists the supporting messages, "15:04 Sender: text", within synth.MaxBodyRunes.
func body(support []analysed) string {
	const reserve = 32 // room for the "… N more" line
	var b strings.Builder
	runes := 0
	for i, a := range support {
		line := a.msg.OccurredAt.UTC().Format("15:04") + " " + sender(a.msg) + ": " + truncate(collapse(a.msg.Text), maxLineRunes)
		n := utf8.RuneCountInString(line) + 1
		if i > 0 {
			b.WriteByte('\n')
		}
		if runes+n > synth.MaxBodyRunes-reserve {
			fmt.Fprintf(&b, "… %d more message(s)", len(support)-i)
			break
		}
		b.WriteString(line)
		runes += n
	}
	return b.String()
}

func sender(m synth.Message) string {
	for _, name := range []string{m.SenderName, m.SenderOpenID} {
		if name = collapse(name); name != "" {
			return truncate(name, 64)
		}
	}
	return "unknown"
}
