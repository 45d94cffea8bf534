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
	entries := slices.Clone(req.Entries)
	// Chronological; at the same instant a confirmed entry counts as the later one.
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
	latest := map[synth.Kind]*synth.VisibleEntry{}
	var (
		nextSteps  []synth.VisibleEntry
		ic         *synth.VisibleEntry // the latest ownership entry naming the IC
		mostImpact *synth.VisibleEntry // the most quantified and scoped impact
		han        int
	)
	for i := range entries {
		e := &entries[i]
		e.Title = slotTitle(*e)
		if e.Title == "" {
			continue // a bare heading ("Root cause") says nothing
		}
		latest[e.Kind] = e
		switch e.Kind {
		case synth.KindNextStep:
			nextSteps = append(nextSteps, *e)
		case synth.KindOwnership:
			if icRE.MatchString(normalizeForMatch(e.Title)) {
				ic = e
			}
		case synth.KindImpact:
			if mostImpact == nil || informative(e.Title) >= informative(mostImpact.Title) {
				mostImpact = e
			}
		}
		if hasHan(e.Title) {
			han++
		}
	}
	l := labelsEN
	if han*2 > len(entries) {
		l = labelsZH
	}
	entry := func(e *synth.VisibleEntry) string {
		return truncate(collapse(e.Title), summaryTitleRunes) + " (" + e.OccurredAt.UTC().Format(timeLayout) + ")"
	}
	line := func(label string, e *synth.VisibleEntry) string { return label + l.sep + entry(e) }

	impact, mitigation, recovery := latest[synth.KindImpact], latest[synth.KindMitigation], latest[synth.KindRecovery]
	after := func(e *synth.VisibleEntry) bool {
		return e != nil && (impact == nil || !e.OccurredAt.Before(impact.OccurredAt))
	}
	var lines []string // in order of importance; the tail is dropped first
	recovered := after(recovery)
	switch {
	case recovered:
		// The fullest confirmation since the latest impact, not merely the last word.
		for i := range entries {
			if e := &entries[i]; e.Kind == synth.KindRecovery && e.Title != "" && after(e) && informative(e.Title) > informative(recovery.Title) {
				recovery = e
			}
		}
		lines = append(lines, l.status+l.sep+l.recovered+" — "+entry(recovery))
	case after(mitigation):
		lines = append(lines, l.status+l.sep+l.mitigated+" — "+entry(mitigation))
	default:
		lines = append(lines, l.status+l.sep+l.investigating)
	}
	if impact != nil {
		if recovered || after(mitigation) {
			// Once it is over, the impact worth stating is the fullest one, not the
			// last interim reading.
			impact = mostImpact
		}
		lines = append(lines, line(l.impact, impact))
	}
	if mitigation != nil && !(after(mitigation) && !recovered) { // not already the status line
		lines = append(lines, line(l.mitigation, mitigation))
	}
	if rc := latest[synth.KindRootCause]; rc != nil {
		lines = append(lines, line(l.rootCause, rc))
	} else if f := latest[synth.KindFinding]; f != nil {
		lines = append(lines, line(l.rootCause+l.sep+l.unknownCause+"; "+l.latestFinding, f))
	} else {
		lines = append(lines, l.rootCause+l.sep+l.unknownCause)
	}
	if o := cmp.Or(ic, latest[synth.KindOwnership]); o != nil {
		lines = append(lines, line(l.owner, o))
	}
	if b := latest[synth.KindBlocker]; b != nil && !recovered {
		lines = append(lines, line(l.blocker, b))
	}
	if d := latest[synth.KindDecision]; d != nil {
		lines = append(lines, line(l.decision, d))
	}
	if n := len(nextSteps); n > 0 {
		lines = append(lines, l.nextSteps+strings.TrimSpace(l.sep))
		for _, e := range nextSteps[max(0, n-summaryNextSteps):] {
			lines = append(lines, "- "+truncate(collapse(e.Title), summaryTitleRunes))
		}
	}

	var b strings.Builder
	runes := 0
	for i, ln := range lines {
		n := utf8.RuneCountInString(ln) + 1
		if runes+n > s.maxSummary {
			if i == 0 {
				b.WriteString(truncate(ln, s.maxSummary))
			}
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(ln)
		runes += n
	}
	text := strings.TrimSuffix(b.String(), "\n"+l.nextSteps+strings.TrimSpace(l.sep)) // a heading without items
	return text, synth.Usage{}, nil
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
