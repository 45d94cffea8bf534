package rules

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// Weights of a pattern: a (message, kind) pair supports a draft when one of its
// sentences scores at least threshold, so a weak pattern counts only together with
// another pattern of the same kind in the same sentence.
const (
	weak      = 1
	medium    = 2
	strong    = 3
	threshold = 2
	maxScore  = 6
)

type pattern struct {
	kind   synth.Kind
	weight int
	filtered
}

// filtered is a regular expression with a literal prefilter: anyOf lists literals of
// which every match contains at least one (derived from the expression's syntax by
// requiredLiterals); a text containing none of them cannot match, so the regular
// expression is not run on it. Nil anyOf when no such list could be derived. Every
// method answers exactly what the same method of re answers.
type filtered struct {
	re    *regexp.Regexp
	anyOf []string
	ids   []int32 // the literal ids of anyOf, for matchIn
}

// mustFilter compiles expr and derives its prefilter.
func mustFilter(expr string) filtered {
	re := regexp.MustCompile(expr)
	syn, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		panic(err) // unreachable: MustCompile accepted it
	}
	f := filtered{re: re, anyOf: requiredLiterals(syn.Simplify())}
	for _, l := range f.anyOf {
		f.ids = append(f.ids, literalID(l))
	}
	return f
}

// matchIn is MatchString(s) for a text s whose literals (or those of a text that
// holds s) are in p: the prefilter looks them up instead of searching s.
func (f filtered) matchIn(p present, s string) bool {
	if f.anyOf != nil && !slices.ContainsFunc(f.ids, p.has) {
		return false
	}
	return f.re.MatchString(s)
}

// mayMatch is false when s holds none of the required literals.
func (f filtered) mayMatch(s string) bool { return f.anyOf == nil || containsAny(s, f.anyOf) }

func (f filtered) MatchString(s string) bool { return f.mayMatch(s) && f.re.MatchString(s) }

func (f filtered) ReplaceAllString(s, repl string) string {
	if !f.mayMatch(s) {
		return s
	}
	return f.re.ReplaceAllString(s, repl)
}

func (f filtered) FindAllStringIndex(s string, n int) [][]int {
	if !f.mayMatch(s) {
		return nil
	}
	return f.re.FindAllStringIndex(s, n)
}

// Patterns match lower-cased text. English patterns use ASCII word boundaries; Chinese
// patterns are plain phrases (there are no word boundaries in Chinese text).
var patterns = compile([]struct {
	kind   synth.Kind
	weight int
	expr   string
}{
	// Customer impact or affected scope.
	{synth.KindImpact, strong, `\boutage\b|\bunavailable\b|\bdegraded\b|\bdegradation\b`},
	{synth.KindImpact, strong, `\b(customers?|users?|merchants?|clients?|buyers?|sellers?|partners?)\b.*\b(affected|impacted|unable|can't|cannot|can not|seeing|getting|get|see|reporting|complaining|hitting|failing)\b`},
	{synth.KindImpact, strong, `\b(is|are|was|were|went|goes|going) down\b|\bdown for (all|some|many|most|every|\d+%)`},
	{synth.KindImpact, strong, `\bimpact(ed|ing|s)?\b|\baffect(ed|ing|s)\b`},
	{synth.KindImpact, strong, `\b\d+(\.\d+)?\s?% of (requests|users|customers|traffic|orders|calls|payments|checkouts|logins|merchants|sessions)\b`},
	{synth.KindImpact, strong, `\b(can't|cannot|can not|unable to) (log ?in|sign ?in|check ?out|pay|place orders?|order|load|open the app|access the (site|app|page))\b`},
	{synth.KindImpact, medium, `\berror rates?\b|\b5xx\b|\b50[0234]s\b|\bsuccess rate\b|\bfailing\b`},
	{synth.KindImpact, medium, `\b(errors?|failures?|timeouts?|5xx|tickets|complaints) (spiked?|spiking|are up|is up|increased|jumped|climbing)\b`},
	{synth.KindImpact, medium, `\blatency\b.*\b(up|spiked?|high|increased|elevated)\b|\bsev ?[0-3]\b|\bp[0-2] incident\b`},
	{synth.KindImpact, weak, `\btimeouts?\b|\btiming out\b|\bp99\b|\bp95\b|\berrors\b|\bslow\b`},
	{synth.KindImpact, strong, `影响|报错率|错误率|失败率|成功率下降|不可用|用户反馈|客诉|投诉|用户报障|挂了|宕机|瘫痪`},
	{synth.KindImpact, medium, `故障|降级|无法(下单|支付|登录|访问|使用|打开|加载)|延迟(升高|上升|飙升|增加)|大量(报错|失败|超时)|报错`},
	{synth.KindImpact, weak, `超时|慢`},

	// Investigation findings.
	{synth.KindFinding, strong, `\bfound\b|\bidentified\b|\bturns out\b|\bconfirmed\b|\bthe (issue|problem|bug) is\b`},
	{synth.KindFinding, strong, `\b(logs?|dashboards?|metrics|graphs?|traces?|grafana|datadog|kibana|profiles?|heap dumps?|explain plan)\b.*\b(shows?|showed|showing|says?|indicates?|reveals?|points? to|pointed to)\b`},
	{synth.KindFinding, strong, `\btraced\b.*\bto\b|\bnarrowed\b.*\bdown\b`},
	{synth.KindFinding, medium, `\blooks like\b|\bseems (like|to)\b|\bappears to\b|\bnoticed\b|\bsuspect\b|\bpointing (to|at)\b|\b(i|we) (see|saw)\b`},
	{synth.KindFinding, medium, `\bcorrelat(es|ed|ion)\b|\bspike in\b|\bonly (affects?|happens|on)\b|\bstarted (at|after|right after)\b|\blines? up with\b|\bcoincides? with\b`},
	{synth.KindFinding, medium, `\b(jump|spik|rose|rise|rising|increas|grew|grow|climb|doubl|tripl)\w*\b.*\bfrom \S*\d\S* to \S*\d`},
	{synth.KindFinding, medium, `\bwent (out|live)\b|\b(was|were|got|been) (deployed|released|shipped|rolled out)\b`},
	{synth.KindFinding, medium, `\b(exhausted|saturated|oom(killed)?|out of memory|deadlock(ed)?|leak(ing)?|crash ?loop(ing)?)\b|\bslow quer(y|ies)\b`},
	{synth.KindFinding, weak, `\bseeing\b|\bcheck(ed|ing)\b|\binvestigat(ing|ed)\b`},
	{synth.KindFinding, strong, `发现|定位到|定位为|日志(显示|里|中|看到)|监控(显示|上看)|链路(显示|追踪)|确认是|确认为|确认了|初步判断|初步定位|初步怀疑|查到`},
	{synth.KindFinding, medium, `看起来|看上去|似乎|怀疑|看到|打满|耗尽|泄漏|泄露|死锁|慢查询|突增|飙升|激增|只影响|仅影响`},
	{synth.KindFinding, weak, `排查|在查|查看`},

	// Decisions.
	{synth.KindDecision, strong, `\bdecided\b|\bdecision\b|\bagreed\b|\b(the )?plan is\b|\bgoing with\b|\bcode freeze\b|\bfreeze deploys?\b`},
	{synth.KindDecision, strong, `\b(we('ll| will| are going to|'re going to)|let's) (roll ?back|revert|fail ?over|failover|scale|restart|disable|enable|switch|shift|drain|block|pause|freeze|hotfix|deploy|ship|escalate|declare|go with|hold)\b`},
	{synth.KindDecision, strong, `\bescalat(e|ed|ing) to\b|\bdeclar(e|ed|ing) (a |an )?(sev ?[0-4]|sev|incident|p[0-4])\b`},
	{synth.KindDecision, medium, `\bgo ahead\b|\bapproved?\b`},
	{synth.KindDecision, weak, `\bwe('ll| will)\b|\blet's\b|\bwe should\b|\bi('ll| will)\b`},
	{synth.KindDecision, strong, `决定|决策|拍板|方案是|同意(回滚|切换|扩容|重启|降级|限流|发布)|(先|准备|立即|马上)(回滚|切换|切流|扩容|重启|降级|限流|熔断|摘除|止血|发布)|升级(为|到)(p[0-3]|s[0-3])`},
	{synth.KindDecision, medium, `我们(会|将|要)|封版|冻结发布`},

	// Ownership.
	{synth.KindOwnership, strong, `\b(i'm|i am|\w+ is|\w+ will be) (the )?(ic|incident commander|incident lead|owner|comms lead|on ?call)\b|\bas ic\b`},
	{synth.KindOwnership, strong, `\b(ic|incident commander|owner|comms lead)\b\s*(is|=|:)\s*\S`},
	{synth.KindOwnership, strong, `\btaking (over|point|ic|lead|ownership)\b|\b(take|took) (over|ownership)\b|\bhand(ing|ed)? (over|off)\b|\bhandover\b|\bhandoff\b`},
	{synth.KindOwnership, medium, `\bi('ll| will|'m| am) (take|taking|own|owning|drive|driving|lead|leading|handle|handling|coordinate|coordinating)\b|\bassign(ed|ing)?\b.*\bto\b|\bowner\b|\bowns\b`},
	{synth.KindOwnership, strong, `负责|接手|接管|交接|指挥(官)?是|担任指挥|我来指挥|ic是`},
	{synth.KindOwnership, medium, `我来(处理|跟|看|负责|协调|回滚|操作)|协调`},

	// Mitigations carried out (planned ones are decisions: see future markers).
	{synth.KindMitigation, strong, `\brolled back\b|\brolling back\b|\brollback (is |was )?(done|complete|completed|finished|in progress|started|underway)\b|\brevert(ed|ing)\b`},
	{synth.KindMitigation, strong, `\bfail(ed|ing) over\b|\bfailover (is |was )?(done|complete|completed|in progress|started)\b|\bscal(ed|ing) (up|out|down)\b|\bscaled\b`},
	{synth.KindMitigation, strong, `\brestart(ed|ing)\b|\bbounced\b|\brecycled\b|\bdrain(ed|ing)\b|\b(disabled|turned off|switched off|flipped off)\b|\bfeature flag\b`},
	{synth.KindMitigation, strong, `\brate[- ]limit(ed|ing)\b|\bthrottl(ed|ing) (traffic|requests|the)\b|\b(shift|mov|divert|redirect|rerout)(ed|ing) (the )?traffic\b`},
	{synth.KindMitigation, strong, `\bhotfix\b.*\b(deployed|out|rolled out|shipped|live)\b|\b(deployed|deploying|shipped|shipping|rolled out|rolling out|pushed|pushing) (a |the )?(fix|hotfix|patch)\b|\bmitigat(ed|ing)\b`},
	{synth.KindMitigation, strong, `\b(increased|bumped|raised) (the )?[a-z ]*(pool|limit|timeout|replicas|capacity|memory|connections)\b|\bblocked (the )?(traffic|ip|requests|client)\b|\bpaused\b|\badded (more )?(replicas|capacity|nodes)\b`},
	{synth.KindMitigation, medium, `\bkilled\b|\bmitigation\b|\bworkaround\b`},
	{synth.KindMitigation, strong, `回滚|切流|切换(到|至)|已切换|主备切换|扩容|重启|限流|摘除|下线了|隔离了|止血|开启降级|降级开关|已降级|熔断|(修复|热修复|补丁)已?(上线|发布|部署)|(上线|发布|部署)了?(修复|热修复|补丁)|关闭了?(开关|功能|入口)`},
	{synth.KindMitigation, medium, `切换|隔离|调大|调高|加大`},

	// Root cause.
	{synth.KindRootCause, strong, `\broot[- ]?caus(e|ed)\b|\brca\b|\bcaused by\b|\bthe (cause|reason|trigger) (is|was)\b|\bculprit\b`},
	{synth.KindRootCause, strong, `\bintroduced (by|in)\b|\bregression (from|in|introduced)\b|\b(bad|faulty|broken) (deploy|config|release|migration|change|commit|query)\b`},
	{synth.KindRootCause, medium, `\btriggered by\b|\bcame from\b|\bresult(ed)? of\b`},
	{synth.KindRootCause, weak, `\bbecause\b`},
	{synth.KindRootCause, weak, `\bdue to\b`},
	{synth.KindRootCause, strong, `根因|根本原因|原因是|原因为|原因[:：]|罪魁|是由于?.*(导致|引起|造成)`},
	{synth.KindRootCause, medium, `引入`},
	{synth.KindRootCause, weak, `导致|引起|造成`}, // effect and cause together ("由于…导致") reach the threshold
	{synth.KindRootCause, weak, `因为|由于`},

	// Recovery and verification.
	{synth.KindRecovery, strong, `\b(fully )?recovered\b|\bback to (normal|baseline|green|healthy)\b|\breturned to (normal|baseline)\b|\bresolved\b|\brestored\b`},
	{synth.KindRecovery, strong, `\b(is|are|looks?|seems?) (back|healthy|stable|normal|green|good) (now|again)\b|\b(back|healthy|stable|normal|working) again\b|\bback (up|online)\b|\bstabili[sz]ed\b|\ball green\b`},
	{synth.KindRecovery, strong, `\bno (more|new) (errors|5xx|failures|alerts|timeouts)\b|\b(error rates?|latency|errors|5xx|p99|success rate)\b.*\bback to\b`},
	{synth.KindRecovery, medium, `\b(error rates?|latency|errors|5xx|p99|success rate)\b.*\b(dropped|down) to\b`},
	{synth.KindRecovery, strong, `\b(verified|confirmed) (fixed|recovered|working|resolved|healthy)\b|\balerts? (cleared|resolved|recovered)\b`},
	{synth.KindRecovery, medium, `\brecovering\b|\bverified\b`},
	{synth.KindRecovery, weak, `\b(looks?|seems?) (good|healthy|normal|fine)\b|\bhealthy\b`},
	{synth.KindRecovery, strong, `恢复|已解决|解决了|正常了|已正常|回落|验证通过|验证没问题|已修复|修复了|告警已?(恢复|消除|解除)|(报错|错误|超时)已?(消失|清零|归零)`},
	{synth.KindRecovery, medium, `稳定|好转|正常`},

	// Next steps and follow-ups.
	{synth.KindNextStep, strong, `\bnext steps?\b|\bfollow[- ]?ups?\b|\btodo\b|\bto-do\b|\baction items?\b|\bpost[- ]?mortem\b|\bpir\b|\bretro(spective)?\b|\bincident review\b`},
	{synth.KindNextStep, strong, `\b(will|'ll|need to|needs to|should|must|have to) (prepare|add|write|fix|file|open|create|update|review|audit|investigate|backfill|reconcile|refund|notify|communicate|improve|document|decommission|clean ?up)\b`},
	{synth.KindNextStep, strong, `\b(ticket|jira|issue)\b.*\b(to track|filed|created|opened)\b`},
	{synth.KindNextStep, medium, `\bneeds? to\b|\bafter (the incident|this)\b|\btomorrow\b|\blater today\b|\bthis week\b|\badd (an? )?(alert|alarm|monitor|test|dashboard|runbook)\b`},
	{synth.KindNextStep, strong, `后续|待办|下一步|复盘|改进项|(需要|要|得)(补充|增加|加上|修复|排查|跟进|复盘|通知|回溯|补偿|优化)`},
	{synth.KindNextStep, medium, `跟进|明天|本周|之后`},

	// Blockers.
	{synth.KindBlocker, strong, `\bblocked (on|by)\b|\bblocker\b|\bblocking\b|\b(no|without) (access|permission|permissions|credentials|approval)\b|\bneeds? (access|approval|permission|sign-?off)\b`},
	{synth.KindBlocker, strong, `\b(i|we) (can't|cannot|can not|am unable to|are unable to|don't have|do not have|have no|lack)\b`},
	{synth.KindBlocker, medium, `\bwaiting (on|for)\b|\bstuck\b|\bpending (approval|review)\b`},
	{synth.KindBlocker, strong, `阻塞|卡在|被卡住|没有权限|无权限|权限不足|需要审批|等审批|申请权限`},
	{synth.KindBlocker, medium, `等待|卡住|无法(回滚|发布|执行|操作|连接)`},
})

// Sentence modifiers.
var (
	// A sentence about the future turns a mitigation or recovery term into a plan:
	// "we'll roll back" is a decision, "should recover soon" is no recovery.
	futureRE = mustFilter(`\b(will|we'll|i'll|going to|gonna|plan(ning)? to|let's|should|shall|about to|want to|propose|suggest|might|may need to|expect(ed)? to)\b|准备|计划|打算|即将|稍后|马上|建议|决定|预计|等待|应该|^先|，先|,先`)
	// ...unless it also says the thing is done.
	doneRE = mustFilter(`\b(done|completed?|finished|already)\b|已|完成|完毕`)
	// A negated recovery term is ongoing impact: "still not recovered", "还没恢复".
	negationRE = mustFilter(`\b(not|never|no sign|yet to)\b|n't\b|未|还没|没有恢复|没恢复|不稳定`)
	// Questions carry no facts: "is the DB down?", "要不要回滚".
	questionStartRE = mustFilter(`^(any (update|news|idea|ideas)|anyone|anybody|what|why|how|when|who|where|which|is (there|it|the|this|that)|are (there|we|the|you)|did (we|you|anyone|someone)|do (we|you)|does (anyone|someone)|can (we|you|someone)|could (we|you|someone)|should we|shall we|has (anyone|someone)|have (we|you))\b`)
	questionZHRE    = mustFilter(`(吗|呢|么)$|是不是|有没有|为什么|要不要|能不能|可不可以|怎么回事|什么原因|谁来`)
)

func compile(defs []struct {
	kind   synth.Kind
	weight int
	expr   string
}) []pattern {
	out := make([]pattern, len(defs))
	for i, d := range defs {
		out[i] = pattern{kind: d.kind, weight: d.weight, filtered: mustFilter(d.expr)}
	}
	return out
}

const numKinds = 9

// scores holds a score per kind, indexed by synth.Kind.Rank.
type scores [numKinds]int

// scoreSentence scores one sentence (already lower-cased and trimmed).
func scoreSentence(s string) scores {
	var sc scores
	lits := literalsIn(s)
	if isQuestion(lits, s) || commsRE.matchIn(lits, s) || progressRE.matchIn(lits, s) {
		// Questions carry no facts; status-page chatter reports none; an action's
		// interim progress ("rollback 60%") is followed by its completion.
		return sc
	}
	rImpact, rMitigation, rRecovery := synth.KindImpact.Rank(), synth.KindMitigation.Rank(), synth.KindRecovery.Rank()
	strongImpact := false
	for _, p := range patterns {
		if p.matchIn(lits, s) {
			sc[p.kind.Rank()] += p.weight
			if p.kind == synth.KindImpact && p.weight >= strong {
				strongImpact = true
			}
		}
	}
	if !strongImpact && !quantRE.matchIn(lits, s) && !scopeRE.matchIn(lits, s) {
		// "still seeing 5xx", "errors spiking": an error signal becomes customer
		// impact only with a quantity (a rate, "1 in 3", "46 tickets") or a scope
		// (customers, a region).
		sc[rImpact] = 0
	}
	if hedgeRE.matchIn(lits, s) {
		// "the risk is 30s of write errors", "errors spike, expected": anticipated.
		sc[rImpact] = 0
	}
	if futureRE.matchIn(lits, s) && !doneRE.matchIn(lits, s) {
		sc[rMitigation], sc[rRecovery] = 0, 0
	}
	if deicticRE.matchIn(lits, s) {
		sc[synth.KindNextStep.Rank()] = 0 // "I'll add that to the doc": a reply, no item of its own
	}
	if negMitigationRE.matchIn(lits, s) {
		sc[rMitigation] = 0 // "never rolled back on timeout", "没有回滚": no action taken
	}
	if sc[rRecovery] > 0 && negationRE.matchIn(lits, s) {
		sc[rRecovery] = 0
		sc[rImpact] = max(sc[rImpact], medium)
	}
	if sc[rRecovery] >= threshold {
		// "error rate back to 0.1%" reports recovery, not impact.
		sc[rImpact] = 0
	}
	if sc[rRecovery] >= threshold || sc[synth.KindRootCause.Rank()] >= threshold || sc[synth.KindNextStep.Rank()] >= threshold {
		// "monitoring shows success rate recovered", "root cause: the pool was
		// exhausted", "follow-up: alert on slow queries": the sentence states the
		// conclusion or the plan; its investigation words are not a new finding.
		sc[synth.KindFinding.Rank()] = 0
	}
	for i := range sc {
		sc[i] = min(sc[i], maxScore)
	}
	return sc
}

// isQuestion reports whether sentence s, whose literals are lits, is a question.
func isQuestion(lits present, s string) bool {
	return strings.HasSuffix(s, "?") || strings.HasSuffix(s, "？") ||
		questionStartRE.matchIn(lits, s) || questionZHRE.matchIn(lits, strings.TrimRight(s, "。.!！~ "))
}

func containsAny(s string, lits []string) bool {
	for _, l := range lits {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// maxExact bounds the strings an exact set may hold before it is given up.
const maxExact = 64

// requiredLiterals returns literals of which every match of re contains at least
// one, or nil when it cannot tell. Parts that match a small finite set of strings
// (literals, small classes, alternations of those, word boundaries) are expanded
// exactly, so "回(滚|落)" requires "回滚" or "回落"; of a concatenation's parts the most
// selective is taken; an alternation requires what one of its branches requires;
// optional parts, wide classes and case-folded literals require nothing known.
func requiredLiterals(re *syntax.Regexp) []string {
	if set := exact(re); set != nil {
		if slices.Contains(set, "") {
			return nil
		}
		return minimal(set)
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			lits := requiredLiterals(sub)
			if lits == nil {
				return nil
			}
			out = append(out, lits...)
		}
		return out
	case syntax.OpConcat:
		var best []string
		consider := func(lits []string) {
			if lits == nil || slices.Contains(lits, "") {
				return
			}
			if best == nil || shortest(lits) > shortest(best) {
				best = lits
			}
		}
		run := []string{""} // cross product of the current run of exact parts
		for _, sub := range re.Sub {
			if set := exact(sub); set != nil {
				if run = product(run, set); run != nil {
					continue
				}
			}
			consider(run)
			run = []string{""}
			consider(requiredLiterals(sub))
		}
		consider(run)
		return minimal(best)
	}
	return nil
}

// minimal drops every literal that contains another one: finding the shorter suffices.
func minimal(lits []string) []string {
	var out []string
	for i, l := range lits {
		redundant := false
		for j, o := range lits {
			if i != j && strings.Contains(l, o) && (len(o) < len(l) || j < i) {
				redundant = true
				break
			}
		}
		if !redundant {
			out = append(out, l)
		}
	}
	return out
}

// exact returns every string re can match when that is a small finite set.
func exact(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpEmptyMatch, syntax.OpWordBoundary, syntax.OpNoWordBoundary,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return []string{""}
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(out) == 8 {
					return nil
				}
				out = append(out, string(r))
			}
		}
		return out
	case syntax.OpCapture:
		return exact(re.Sub[0])
	case syntax.OpQuest:
		if set := exact(re.Sub[0]); set != nil && len(set) < maxExact {
			return append(set, "")
		}
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			set := exact(sub)
			if set == nil || len(out)+len(set) > maxExact {
				return nil
			}
			out = append(out, set...)
		}
		return out
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			set := exact(sub)
			if set == nil {
				return nil
			}
			if out = product(out, set); out == nil {
				return nil
			}
		}
		return out
	case syntax.OpRepeat:
		set := exact(re.Sub[0])
		if set == nil || re.Min != re.Max {
			return nil
		}
		out := []string{""}
		for range re.Min {
			if out = product(out, set); out == nil {
				return nil
			}
		}
		return out
	}
	return nil
}

// product is every a+b, or nil when there would be more than maxExact.
func product(as, bs []string) []string {
	if len(as)*len(bs) > maxExact {
		return nil
	}
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			out = append(out, a+b)
		}
	}
	return out
}

func shortest(lits []string) int {
	n := len(lits[0])
	for _, l := range lits[1:] {
		n = min(n, len(l))
	}
	return n
}
