package rules

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// Structural rules applied on top of the phrase scores: explicit labels, leading
// acknowledgements, agreement replies, quoted text, status-page chatter, hedged
// statements and a minimum of substance. See the package documentation.

// labelRE recognises the label of a labelled message or section, per kind: "Impact:",
// "Root cause (draft)", "Recovery confirmed:", "Next steps", "后续：", "根因". The
// candidate (the text before the first colon, or a heading line) is lower-cased and
// stripped of a trailing parenthetical first; one extra English word may precede or
// follow the label word ("customer impact", "recovery confirmed").
var labelRE = func() [numKinds]*regexp.Regexp {
	words := map[synth.Kind]string{
		synth.KindImpact:     `impact|scope|影响|影响范围|用户影响|业务影响`,
		synth.KindFinding:    `findings?|observations?|发现|排查结果|排查结论`,
		synth.KindDecision:   `decisions?|decided|决定|决策`,
		synth.KindOwnership:  `handover|hand-?off|ic|incident commander|owners?|交接|负责人|指挥|指挥官`,
		synth.KindMitigation: `mitigations?|actions? taken|workaround|处置|止血|缓解措施|临时方案`,
		synth.KindRootCause:  `root[- ]?cause|rca|cause|根因|原因|根本原因`,
		synth.KindRecovery:   `recovery|recovered|resolved|resolution|恢复|已恢复`,
		synth.KindNextStep:   `next steps?|follow[- ]?ups?|action items?|todos?|to-?dos?|后续|待办|下一步|后续事项|改进项|行动项`,
		synth.KindBlocker:    `blockers?|blocked|阻塞|卡点`,
	}
	var out [numKinds]*regexp.Regexp
	for k, w := range words {
		out[k.Rank()] = regexp.MustCompile(`^(?:[a-z]+ )?(?:` + w + `)(?: [a-z]+)?(?:分析|说明|更新|确认)?$`)
	}
	return out
}()

var (
	parentheticalRE = regexp.MustCompile(`\s*[(（][^()（）]*[)）]\s*$`)
	listMarkerRE    = regexp.MustCompile(`^\s*(?:[-*•·]|\d{1,2}[.)、]|[(（]\d{1,2}[)）])\s*`)
	markdownLinkRE  = regexp.MustCompile(`\[([^\]\n]{1,200})\]\((?:https?://|www\.)[^)\s]*\)`)
	quotedRE        = mustFilter(`"[^"\n]*"|“[^”\n]*”|「[^」\n]*」|『[^』\n]*』`)
	// Comms about comms: a sentence about the status page or a status update reports
	// no fact of the incident itself ("updating the status page: identified").
	commsRE = mustFilter(`\bstatus ?page\b|\bstatus updates?\b|\bcomms update\b|状态页|对外公告|对外通告`)
	// A hedged or anticipated statement is no impact: "risk is 30s of downtime",
	// "errors spike, expected during the switch".
	hedgeRE = mustFilter(`\b(risks?|expected|expect|acceptable|if|would|could|might|in case)\b|预期|预计|风险|如果|可能会`)
	// Agreement with an earlier message adds no fact: "same here", "我这边也看到了".
	meTooRE = mustFilter(`\b(same here|same for me|same on my side|me too|same issue|see it too|seeing it too|seeing the same|see the same|on my side too)\b|也(看到|遇到|发现|是这样|一样)|(跟|和|与|同).{0,12}(一样|一致|相同)|一致|同上|我这边也`)
	// Quantity or scope that turns an error signal into a customer-impact statement.
	quantRE = mustFilter(`\d(?:[\d.,]*)\s?%|百分之|\b\d+ (?:in|of|out of) \d+\b|\b\d[\d,]* (?:tickets|orders|checkouts|payments|users|customers|merchants|requests|complaints|calls)\b|\d+\s*(?:个|笔|单|位)?(?:用户|订单|客户|商户|工单)`)
	scopeRE = mustFilter(`\b(customers?|users?|merchants?|buyers?|sellers?|clients?|everyone|all regions?|every region|region(al)?)\b|\b[a-z]{2}-(?:west|east|north|south|central|southeast|northeast)(?:-\d)?\b|用户|客户|商户|全部|所有|全量|地区|区域|机房`)
	// Interim progress of an action: "rollback 30% done", "failover 60%", "回滚 50%".
	progressRE = mustFilter(`\b(rollback|roll ?out|failover|fail ?over|migration|restart|deploy(ment)?|switch ?over|backfill)\s+\d{1,2}\s?%|\b\d{1,2}\s?% (done|complete|rolled (back|out))\b|(回滚|切换|扩容|发布|迁移)(进度)?\s*\d{1,2}\s?%`)
	// A follow-up whose object is a pronoun refers to the message it answers.
	deicticRE = mustFilter(`\b(prepare|add|write|fix|file|open|create|update|review|document|do|handle|take) (that|this|it|them|those)\b`)
	// An IC or incident-lead statement, for the summary's owner line.
	icRE = mustFilter(`\bic\b|incident (commander|lead|manager)|\bcommander\b|指挥|值班负责人`)
	// Mitigation verbs negated in place: "never rolled back", "没有回滚".
	negMitigationRE = mustFilter(`\b(never|not|didn't|did not|doesn't|does not|don't|wasn't|weren't)\b (?:\w+ )?(rolled?|rolls|rolling) back\b|(没有|没|未|不会|无法|不能)(回滚|切换|扩容|重启|释放)`)
)

// Kind priority when sentence scores tie: the more specific and the more final
// statement wins (a root cause over a finding, an action over an observation).
var priority = []synth.Kind{
	synth.KindRootCause, synth.KindDecision, synth.KindMitigation, synth.KindRecovery,
	synth.KindBlocker, synth.KindImpact, synth.KindOwnership, synth.KindNextStep, synth.KindFinding,
}

var priorityOf = func() [numKinds]int {
	var out [numKinds]int
	for i, k := range priority {
		out[k.Rank()] = i
	}
	return out
}()

// section is a labelled part of a message: its kind and the content after the label.
type section struct {
	kind    synth.Kind
	content string
	heading bool // the label was a line of its own (a post title, a "Next steps" heading)
}

// labelOf returns the kind a label candidate names.
func labelOf(candidate string) (synth.Kind, bool) {
	c := strings.TrimSpace(normalizeForMatch(candidate))
	c = strings.TrimSpace(parentheticalRE.ReplaceAllString(c, ""))
	c = strings.Join(strings.Fields(strings.Trim(c, "*#_ ")), " ")
	if c == "" || utf8.RuneCountInString(c) > 32 {
		return "", false
	}
	for _, k := range priority {
		if labelRE[k.Rank()].MatchString(c) {
			return k, true
		}
	}
	return "", false
}

// lineLabel reports whether a line starts with a label: "Impact: …" (inline) or is
// one ("Root cause (draft)", a heading followed by more lines).
func lineLabel(line string, more bool) (kind synth.Kind, rest string, heading, ok bool) {
	line = strings.TrimSpace(line)
	if i := strings.IndexAny(line, ":："); i > 0 {
		if k, ok := labelOf(line[:i]); ok {
			_, size := utf8.DecodeRuneInString(line[i:])
			return k, strings.TrimSpace(line[i+size:]), false, true
		}
	}
	if more {
		if k, ok := labelOf(line); ok {
			return k, "", true, true
		}
	}
	return "", "", false, false
}

// sections splits a message whose first line carries a label into its labelled
// sections; a section runs until the next line that starts with a label. A message
// whose first line has no label has no sections and is scored sentence by sentence.
func sections(text string) []section {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	var out []section
	for i, l := range lines {
		k, rest, heading, ok := lineLabel(l, i+1 < len(lines))
		switch {
		case ok:
			out = append(out, section{kind: k, content: rest, heading: heading})
		case i == 0:
			return nil
		default:
			s := &out[len(out)-1]
			if s.content != "" {
				s.content += "\n"
			}
			s.content += l
		}
	}
	return out
}

// sectionTitle is what a labelled section says first: the whole content when it is
// one line that fits, else its first line (a list item without its marker), else
// that line's first sentence.
func sectionTitle(s section, maxTitle int) string {
	content := strings.TrimSpace(s.content)
	lines := strings.Split(content, "\n")
	first := strings.TrimSpace(listMarkerRE.ReplaceAllString(lines[0], ""))
	if len(lines) == 1 && fits(first, maxTitle) {
		return first
	}
	if fits(first, maxTitle) {
		return first
	}
	if ss := sentences(first); len(ss) > 0 {
		return ss[0]
	}
	return first
}

func fits(s string, n int) bool { return utf8.RuneCountInString(cleanTitle(s)) <= n }

// cleanTitle makes one title line: markdown links become their text, whitespace
// collapses.
func cleanTitle(s string) string {
	return collapse(markdownLinkRE.ReplaceAllString(s, "$1"))
}

// stripAckLead removes leading acknowledgement clauses: "ack, I'm on it. taking IC"
// becomes "taking IC", "收到，开始切换" becomes "开始切换". It reports whether any
// clause was removed.
func stripAckLead(text string) (string, bool) {
	stripped := false
	for {
		text = strings.TrimLeftFunc(text, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsPunct(r) && r != '@' && r != '"' && r != '“'
		})
		end := clauseEnd(text)
		if end <= 0 || !isAck(text[:end]) {
			return text, stripped
		}
		text, stripped = text[end:], true
	}
}

// clauseEnd is the end of the first clause of s (at a comma, a sentence terminator
// or a line break), or len(s).
func clauseEnd(s string) int {
	for i, r := range s {
		switch r {
		case ',', '，', '、', '!', '！', '?', '？', ';', '；', '。', '\n', ':', '：':
			return i
		case '.':
			if n := i + 1; n >= len(s) || s[n] == ' ' || s[n] == '\n' {
				return i
			}
		}
	}
	return len(s)
}

// substance measures how much a text says: two units per Latin word, one per Han
// character; a digit anywhere counts as enough.
func substance(text string) (units int, digits bool) {
	words, han, _ := content(text)
	return 2*words + han, hasDigit(withoutURLs(text))
}

// Minimum substance, in substance units: below minSubstance a message ("继续观察",
// "一切正常", "all good") only supports ownership; a reply that starts with an
// acknowledgement needs minAckReply ("收到，开始切换" is an acknowledgement of the
// decision above it, not a new fact); an agreement ("我这边也看到了") needs
// minAgreement.
const (
	minSubstance = 5
	minAckReply  = 8
	minAgreement = 12
)

// primary keeps only the strongest kind of a sentence's scores; ties go to the kind
// earlier in priority.
func primary(sc scores) scores {
	best := -1
	for k, v := range sc {
		if v < threshold {
			continue
		}
		if best < 0 || v > sc[best] || v == sc[best] && priorityOf[k] < priorityOf[best] {
			best = k
		}
	}
	var out scores
	if best >= 0 {
		out[best] = sc[best]
	}
	return out
}
