package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

// A realistic incident chat: checkout payments fail in the EU after a deploy dropped
// an index. English and Chinese, a thread for the database investigation, bots,
// acknowledgements, links, emoji, questions and social chatter, read-only context
// before the window, a deleted message, an image and a card.

var (
	incidentStart = time.Date(2024, 5, 1, 14, 0, 0, 0, time.UTC)
	incidentEnd   = incidentStart.Add(10 * time.Minute)
)

type chatLine struct {
	id      int64
	at      string // mm:ss after 14:00, or -mm:ss before it (context)
	sender  string
	text    string
	group   string
	bot     bool
	deleted bool
	msgType string
}

const (
	gTriage = "prox:1400"
	gDB     = "thread:omt_db"
	gLater  = "prox:1405"
)

var incidentChat = []chatLine{
	// Read-only context before the window.
	{id: 101, at: "-03:50", sender: "Alertmanager", text: "[FIRING] checkout-api 5xx rate > 5%", group: gTriage, bot: true},
	{id: 102, at: "-01:30", sender: "Alice", text: "Checkout errors are up, customers affected", group: gTriage},
	{id: 103, at: "-01:00", sender: "Bob", text: "payments-db CPU at 90%, looks like the DB is saturated", group: gDB},

	// Triage.
	{id: 1, at: "00:05", sender: "Alice", text: "Checkout error rate is at 12%, customers can't pay. Declaring SEV2.", group: gTriage},
	{id: 45, at: "00:15", sender: "Judy", text: "hi all, joining", group: gTriage},
	{id: 2, at: "00:20", sender: "Bob", text: "+1", group: gTriage},
	{id: 3, at: "00:31", sender: "Carol", text: "looking", group: gTriage},
	{id: 4, at: "00:40", sender: "PagerDuty", text: "Incident #4412 triggered: checkout-api error rate impacted customers", group: gTriage, bot: true},
	{id: 5, at: "00:55", sender: "Alice", text: "I'll take IC. @Bob please own the DB side, @Carol comms.", group: gTriage},
	{id: 46, at: "01:00", sender: "Heidi", text: "here", group: gTriage},
	{id: 6, at: "01:10", sender: "Bob", text: "ok", group: gTriage},
	{id: 7, at: "01:20", sender: "Dave", text: "https://grafana.example.com/d/abc123/checkout", group: gTriage},
	{id: 8, at: "01:30", sender: "Carol", text: "收到", group: gTriage},
	{id: 9, at: "01:45", sender: "Erin", text: "支付服务报错率上升到15%，大量用户反馈无法下单", group: gTriage},
	{id: 47, at: "01:50", sender: "Ivan", text: "same, seeing 502s from checkout in eu-west-1", group: gTriage},
	{id: 10, at: "02:00", sender: "Dave", text: "is it only EU?", group: gTriage},
	{id: 11, at: "02:10", sender: "Alice", text: "@Dave yes, looks like EU only so far", group: gTriage},
	{id: 12, at: "02:20", sender: "Frank", text: "🙏", group: gTriage},
	{id: 13, at: "02:30", sender: "Frank", text: "lunch anyone? 😂", group: gTriage},
	{id: 14, at: "02:40", sender: "Carol", text: "Posted status page update", group: gTriage},
	{id: 48, at: "02:50", sender: "Grace", text: "Is this related to the CDN change yesterday?", group: gTriage},
	{id: 49, at: "03:10", sender: "Judy", text: "Checked the CDN, nothing there", group: gTriage},
	{id: 50, at: "03:30", sender: "Alice", text: "@Bob 有进展吗", group: gTriage},
	{id: 51, at: "03:50", sender: "Erin", text: "ok的", group: gTriage},
	{id: 52, at: "04:20", sender: "Heidi", text: "I can scale the read replicas if needed", group: gTriage},

	// The database thread.
	{id: 15, at: "03:00", sender: "Bob", text: "Logs show connection pool exhaustion on payments-db primary", group: gDB},
	{id: 16, at: "03:20", sender: "Bob", text: "发现 payments-db 主库连接数打满，慢查询突增", group: gDB},
	{id: 17, at: "03:40", sender: "Dave", text: "thanks Bob", group: gDB},
	{id: 18, at: "04:00", sender: "Bob", text: "Looks like the 13:50 deploy of payments-api v2.14.0 added a query without an index", group: gDB},
	{id: 19, at: "04:10", sender: "Erin", text: "那要不要先回滚？", group: gDB},
	{id: 20, at: "04:30", sender: "Alice", text: "We decided to roll back payments-api to v2.13.2. Bob owns the rollback.", group: gDB},
	{id: 21, at: "04:45", sender: "Bob", text: "on it", group: gDB},
	{id: 22, at: "05:30", sender: "Bob", text: "Rolling back now, ETA 5 min", group: gDB},
	{id: 23, at: "06:00", sender: "Bob", text: "I can't get into the deploy console, blocked on approval from release-eng", group: gDB},
	{id: 24, at: "06:20", sender: "Grace", text: "approved, go ahead", group: gDB},
	{id: 25, at: "06:40", sender: "Bob", text: "回滚已完成，v2.13.2 全量", group: gDB},
	{id: 26, at: "06:50", sender: "Bob", text: "rolled back the wrong service, ignore", group: gDB, deleted: true},

	// Later: impact from support, mitigation, recovery, root cause, next steps.
	{id: 27, at: "05:00", sender: "Carol", text: "Customer support says ~30% of checkouts failing in EU", group: gLater},
	{id: 28, at: "05:10", sender: "Frank", text: "👍", group: gLater},
	{id: 29, at: "05:20", sender: "Heidi", text: "Scaled payments-db read replicas from 3 to 6 to take load off the primary", group: gLater},
	{id: 30, at: "05:40", sender: "Frank", text: "coffee machine on 3F is broken again lol", group: gLater},
	{id: 53, at: "05:50", sender: "Frank", text: "brb", group: gLater},
	{id: 31, at: "06:05", sender: "Ivan", text: "FYI https://status.example.com/incidents/123", group: gLater},
	{id: 32, at: "06:30", sender: "Carol", text: "Next status update at 14:30", group: gLater},
	{id: 54, at: "06:50", sender: "Judy", text: "👀👀", group: gLater},
	{id: 33, at: "07:10", sender: "Ivan", text: "", group: gLater, msgType: "image"},
	{id: 55, at: "07:20", sender: "Grace", text: "Rollback finished, pods healthy", group: gLater},
	{id: 34, at: "07:30", sender: "Judy", text: "好的", group: gLater},
	{id: 62, at: "07:40", sender: "Dave", text: "Dashboard: https://grafana.example.com/d/abc123/checkout?orgId=1", group: gLater},
	{id: 35, at: "07:50", sender: "Alice", text: "Error rate recovering, down to 4% now", group: gLater},
	{id: 56, at: "08:00", sender: "Heidi", text: "https://grafana.example.com/d/xyz/payments-db", group: gLater},
	{id: 57, at: "08:10", sender: "Ivan", text: "谢谢", group: gLater},
	{id: 58, at: "08:20", sender: "Carol", text: "Updated the status page", group: gLater},
	{id: 36, at: "08:30", sender: "Bob", text: "Error rate back to 0.3%, p99 back to normal. Checkout recovered.", group: gLater},
	{id: 63, at: "08:40", sender: "Alertmanager", text: "[RESOLVED] checkout-api 5xx rate back to normal", group: gLater, bot: true},
	{id: 37, at: "08:45", sender: "Erin", text: "监控显示支付成功率已恢复正常", group: gLater},
	{id: 59, at: "08:50", sender: "Judy", text: "+1 🎉", group: gLater},
	{id: 38, at: "09:00", sender: "Alice", text: "Root cause: the v2.14.0 migration dropped the index on orders.user_id, causing full table scans", group: gLater},
	{id: 60, at: "09:05", sender: "Frank", text: "lol", group: gLater},
	{id: 39, at: "09:10", sender: "Bob", text: "根因是 v2.14.0 的 migration 删除了 orders.user_id 索引，导致全表扫描打满连接池", group: gLater},
	{id: 40, at: "09:20", sender: "Dave", text: "nice", group: gLater},
	{id: 41, at: "09:30", sender: "Alice", text: "Next steps: add an index check to CI, postmortem tomorrow.", group: gLater},
	{id: 42, at: "09:40", sender: "Carol", text: "后续：补充慢查询告警，周五复盘", group: gLater},
	{id: 61, at: "09:45", sender: "Heidi", text: "Will keep the extra replicas until tomorrow", group: gLater},
	{id: 43, at: "09:50", sender: "Frank", text: "thanks all 🙏", group: gLater},
	{id: 44, at: "09:55", sender: "Dave", text: "ok thanks", group: gLater},
	{id: 64, at: "09:58", sender: "Ticket Manager", text: "Incident summary: checkout recovered", group: gLater, msgType: "interactive"},
}

// Messages that must never be cited, by reason.
var incidentNoise = map[string][]int64{
	"acknowledgement": {2, 6, 8, 17, 21, 34, 40, 43, 44, 45, 46, 51, 57, 59, 60},
	"bot":             {4, 63},
	"bare link":       {7, 31, 56, 62},
	"emoji":           {12, 28, 54},
	"question":        {10, 13, 19, 48, 50},
	"chatter":         {3, 14, 30, 32, 49, 52, 53, 58},
	"deleted":         {26},
	"image":           {33},
	"card":            {64},
	"context":         {101, 102, 103},
}

// Facts a responder expects: each evidence set must be bound, together, to one draft
// of the kind.
var incidentFacts = []struct {
	kind     synth.Kind
	evidence []int64
	what     string
}{
	{synth.KindImpact, []int64{1, 9, 47}, "error rate, customers unable to pay (EN + ZH), 502s"},
	{synth.KindImpact, []int64{27}, "support: 30% of EU checkouts failing"},
	{synth.KindFinding, []int64{11}, "EU only"},
	{synth.KindFinding, []int64{15, 16, 18}, "pool exhaustion, slow queries (ZH), the deploy"},
	{synth.KindDecision, []int64{1}, "SEV2 declared"},
	{synth.KindDecision, []int64{20, 24}, "roll back, approval to proceed"},
	{synth.KindOwnership, []int64{5}, "Alice takes IC"},
	{synth.KindOwnership, []int64{20}, "Bob owns the rollback"},
	{synth.KindMitigation, []int64{22, 25}, "rollback started and finished (ZH)"},
	{synth.KindMitigation, []int64{29, 55}, "replicas scaled, rollback finished"},
	{synth.KindBlocker, []int64{23}, "deploy console needs approval"},
	{synth.KindRecovery, []int64{35, 36, 37}, "recovering, recovered, 已恢复正常"},
	{synth.KindRootCause, []int64{38, 39}, "dropped index (EN + ZH)"},
	{synth.KindNextStep, []int64{41, 42, 61}, "CI check and postmortem, 复盘, keep replicas"},
}

func parseOffset(s string) time.Duration {
	sign := time.Duration(1)
	if s[0] == '-' {
		sign, s = -1, s[1:]
	}
	var mm, ss int
	if _, err := fmt.Sscanf(s, "%d:%d", &mm, &ss); err != nil {
		panic(fmt.Sprintf("bad offset %q: %v", s, err))
	}
	return sign * (time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second)
}

// incidentRequest builds the request the worker would send for the chat, groups in
// the given order, messages in time order within each group.
func incidentRequest(groupOrder ...string) synth.Request {
	if len(groupOrder) == 0 {
		groupOrder = []string{gTriage, gDB, gLater}
	}
	byGroup := map[string][]synth.Message{}
	for _, l := range incidentChat {
		at := incidentStart.Add(parseOffset(l.at))
		m := synth.Message{
			EvidenceID:   l.id,
			MessageID:    ids.MessageID(fmt.Sprintf("om_%d", l.id)),
			SenderOpenID: "ou_" + l.sender,
			SenderName:   l.sender,
			OccurredAt:   at,
			Text:         l.text,
			MessageType:  synth.MessageTypeText,
			Context:      at.Before(incidentStart),
			Deleted:      l.deleted,
			FromBot:      l.bot,
		}
		if l.msgType != "" {
			m.MessageType = l.msgType
		}
		if l.group == gDB {
			m.ThreadID = "omt_db"
		}
		byGroup[l.group] = append(byGroup[l.group], m)
	}
	req := synth.Request{
		Workspace:        "inc-2024-0501",
		Chat:             "oc_incident",
		WindowStart:      incidentStart,
		WindowEnd:        incidentEnd,
		ProcessorVersion: "v1",
	}
	for _, key := range groupOrder {
		msgs := byGroup[key]
		slices.SortStableFunc(msgs, func(a, b synth.Message) int { return a.OccurredAt.Compare(b.OccurredAt) })
		req.Groups = append(req.Groups, synth.Group{Key: key, Messages: msgs})
	}
	return req
}
