package rules

import (
	"cmp"
	"context"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

const (
	summaryTitleRunes = 160
	summaryNextSteps  = 3
	timeLayout        = "2006-01-02 15:04 UTC"
)

type labels struct {
	status, recovered, mitigated, investigating, impact, mitigation, rootCause,
	unknownCause, latestFinding, owner, decision, blocker, nextSteps, sep string
}

var (
	labelsEN = labels{
		status: "Status", recovered: "recovered", mitigated: "mitigated, monitoring",
		investigating: "investigating", impact: "Impact", mitigation: "Mitigation",
		rootCause: "Root cause", unknownCause: "not yet determined", latestFinding: "latest finding",
		owner: "Owner", decision: "Decision", blocker: "Blocker", nextSteps: "Next steps", sep: ": ",
	}
	labelsZH = labels{
		status: "状态", recovered: "已恢复", mitigated: "已止血，观察中", investigating: "处理中",
		impact: "影响", mitigation: "处置", rootCause: "根因", unknownCause: "尚未确定",
		latestFinding: "最新发现", owner: "负责人", decision: "决策", blocker: "阻塞",
		nextSteps: "后续事项", sep: "：",
	}
)

// Summarize writes a deterministic summary of the visible entries (design §13):
// the current status (recovered, mitigated or investigating, judged by whether the
// latest recovery or mitigation follows the latest impact), the impact (the latest
// while ongoing, the most quantified once mitigated), the latest mitigation, the root
// cause (or that it is not yet determined, with the latest finding), the current IC
// (else the latest owner), the latest decision, an open blocker, and up to three next
// steps. A title's leading label of its own kind is dropped; a bare heading is skipped. Labels are Chinese when most entry titles are. Previous is not used: the
// entries are the summary's only input, so the same entries give the same text. The
// text is bounded by Options.MaxSummaryRunes; lines of least importance are dropped
// first. Usage is always zero.
func (s *Synthesizer) Summarize(ctx context.Context, req synth.SummaryRequest) (string, synth.Usage, error) {
	if err := ctx.Err(); err != nil {
		return "", synth.Usage{}, err
	}
	if err := synth.ValidateSummaryRequest(req); err != nil {
		return "", synth.Usage{}, err
	}
	sm := newSummary(req.Entries)
	recovered := sm.status()
	sm.facts(recovered)
	sm.nextSteps()
	return sm.text(s.maxSummary), synth.Usage{}, nil
}

// summary is a summary being written: what the entries say, and its lines so far.
type summary struct {
	entries    []synth.VisibleEntry // chronological, titles without their own kind's label
	l          labels
	latest     map[synth.Kind]*synth.VisibleEntry
	steps      []synth.VisibleEntry // the next steps
	ic         *synth.VisibleEntry  // the latest ownership entry naming the IC
	mostImpact *synth.VisibleEntry  // the most quantified and scoped impact
	impact     *synth.VisibleEntry  // the impact the summary states
	lines      []string             // in order of importance; the tail is dropped first
}

// newSummary reads the entries in chronological order.
func newSummary(visible []synth.VisibleEntry) *summary {
	sm := &summary{entries: chronological(visible), l: labelsEN, latest: map[synth.Kind]*synth.VisibleEntry{}}
	han := 0
	for i := range sm.entries {
		e := &sm.entries[i]
		e.Title = slotTitle(*e)
		if e.Title == "" {
			continue // a bare heading ("Root cause") says nothing
		}
		sm.latest[e.Kind] = e
		switch e.Kind {
		case synth.KindNextStep:
			sm.steps = append(sm.steps, *e)
		case synth.KindOwnership:
			if icRE.MatchString(normalizeForMatch(e.Title)) {
				sm.ic = e
			}
		case synth.KindImpact:
			if sm.mostImpact == nil || informative(e.Title) >= informative(sm.mostImpact.Title) {
				sm.mostImpact = e
			}
		}
		if hasHan(e.Title) {
			han++
		}
	}
	if han*2 > len(sm.entries) {
		sm.l = labelsZH
	}
	sm.impact = sm.latest[synth.KindImpact]
	return sm
}

// chronological is a copy of entries in time order; at the same instant a confirmed
// entry counts as the later one.
func chronological(entries []synth.VisibleEntry) []synth.VisibleEntry {
	entries = slices.Clone(entries)
	slices.SortStableFunc(entries, func(a, b synth.VisibleEntry) int {
		if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
			return c
		}
		if c := cmp.Compare(statusRank(a.Status), statusRank(b.Status)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Kind.Rank(), b.Kind.Rank()); c != 0 {
			return c
		}
		return strings.Compare(a.Title, b.Title)
	})
	return entries
}

// entryText is an entry's title with its time.
func entryText(e *synth.VisibleEntry) string {
	return truncate(collapse(e.Title), summaryTitleRunes) + " (" + e.OccurredAt.UTC().Format(timeLayout) + ")"
}

// add adds the line "label: e".
func (sm *summary) add(label string, e *synth.VisibleEntry) {
	sm.lines = append(sm.lines, label+sm.l.sep+entryText(e))
}

// after reports whether e is at or after the impact the summary states.
func (sm *summary) after(e *synth.VisibleEntry) bool {
	return e != nil && (sm.impact == nil || !e.OccurredAt.Before(sm.impact.OccurredAt))
}

// status adds the status line: recovered, mitigated or investigating, judged by
// whether the latest recovery or mitigation follows the latest impact.
func (sm *summary) status() (recovered bool) {
	l := sm.l
	mitigation, recovery := sm.latest[synth.KindMitigation], sm.latest[synth.KindRecovery]
	recovered = sm.after(recovery)
	switch {
	case recovered:
		// The fullest confirmation since the latest impact, not merely the last word.
		for i := range sm.entries {
			if e := &sm.entries[i]; e.Kind == synth.KindRecovery && e.Title != "" && sm.after(e) && informative(e.Title) > informative(recovery.Title) {
				recovery = e
			}
		}
		sm.lines = append(sm.lines, l.status+l.sep+l.recovered+" — "+entryText(recovery))
	case sm.after(mitigation):
		sm.lines = append(sm.lines, l.status+l.sep+l.mitigated+" — "+entryText(mitigation))
	default:
		sm.lines = append(sm.lines, l.status+l.sep+l.investigating)
	}
	return recovered
}

// facts adds the lines after the status: impact, mitigation, root cause, owner,
// blocker and decision.
func (sm *summary) facts(recovered bool) {
	l := sm.l
	mitigation := sm.latest[synth.KindMitigation]
	if sm.impact != nil {
		if recovered || sm.after(mitigation) {
			// Once it is over, the impact worth stating is the fullest one, not the
			// last interim reading.
			sm.impact = sm.mostImpact
		}
		sm.add(l.impact, sm.impact)
	}
	if mitigation != nil && !(sm.after(mitigation) && !recovered) { // not already the status line
		sm.add(l.mitigation, mitigation)
	}
	if rc := sm.latest[synth.KindRootCause]; rc != nil {
		sm.add(l.rootCause, rc)
	} else if f := sm.latest[synth.KindFinding]; f != nil {
		sm.add(l.rootCause+l.sep+l.unknownCause+"; "+l.latestFinding, f)
	} else {
		sm.lines = append(sm.lines, l.rootCause+l.sep+l.unknownCause)
	}
	if o := cmp.Or(sm.ic, sm.latest[synth.KindOwnership]); o != nil {
		sm.add(l.owner, o)
	}
	if b := sm.latest[synth.KindBlocker]; b != nil && !recovered {
		sm.add(l.blocker, b)
	}
	if d := sm.latest[synth.KindDecision]; d != nil {
		sm.add(l.decision, d)
	}
}

// nextSteps adds a heading and up to summaryNextSteps of the latest next steps.
func (sm *summary) nextSteps() {
	if n := len(sm.steps); n > 0 {
		sm.lines = append(sm.lines, sm.l.nextSteps+strings.TrimSpace(sm.l.sep))
		for _, e := range sm.steps[max(0, n-summaryNextSteps):] {
			sm.lines = append(sm.lines, "- "+truncate(collapse(e.Title), summaryTitleRunes))
		}
	}
}

// text joins the lines, dropping the tail beyond maxRunes (the first line alone is
// cut), and a next-steps heading left without items.
func (sm *summary) text(maxRunes int) string {
	var b strings.Builder
	runes := 0
	for i, ln := range sm.lines {
		n := utf8.RuneCountInString(ln) + 1
		if runes+n > maxRunes {
			if i == 0 {
				b.WriteString(truncate(ln, maxRunes))
			}
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(ln)
		runes += n
	}
	return strings.TrimSuffix(b.String(), "\n"+sm.l.nextSteps+strings.TrimSpace(sm.l.sep)) // a heading without items
}

// slotTitle is an entry's title without a leading label of its own kind ("Root
// cause: x" is x under the root-cause line), or "" when the title is only a label.
func slotTitle(e synth.VisibleEntry) string {
	title := collapse(e.Title)
	if k, rest, _, ok := lineLabel(title, false); ok && k == e.Kind {
		return rest
	}
	if k, ok := labelOf(title); ok && k == e.Kind {
		return ""
	}
	return title
}

var numberRE = regexp.MustCompile(`\d+(?:[.,]\d+)*`)

// informative counts the quantities and scopes an impact statement gives.
func informative(title string) int {
	t := normalizeForMatch(title)
	return len(numberRE.FindAllStringIndex(t, -1)) + len(scopeRE.FindAllStringIndex(t, -1)) + 2*len(quantRE.FindAllStringIndex(t, -1))
}

func statusRank(status string) int {
	if status == synth.StatusConfirmed {
		return 1
	}
	return 0
}
