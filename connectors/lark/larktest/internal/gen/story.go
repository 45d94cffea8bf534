package main

import (
	lt "github.com/larkline/larkline/connectors/lark/larktest"
)

// The story of INC-4821: checkout-api v2.31.0 raised the ledger-db pool size
// per pod tenfold; the connection storm saturated the ledger-db primary and
// payments timed out for about a third of checkouts in eu-west. Rollback, a
// database failover, root cause, recovery and next steps follow over about
// four hours. Offsets are minutes:seconds after 14:00 UTC.

const (
	wsID       = "ws-inc-4821"
	chatTitle  = "INC-4821 checkout 5xx eu-west"
	grafana    = "https://grafana.example.com/d/checkout-overview?orgId=1&var-region=eu-west-1"
	grafanaDB  = "https://grafana.example.com/d/ledger-db?orgId=1&var-instance=ledger-db-1a&from=now-1h"
	deployRun  = "https://deploy.example.com/pipelines/checkout-api/runs/88213"
	statusPage = "https://status.example.com/incidents/k2m9x4"
	bridge     = "https://meet.example.com/inc-4821"
	logsLink   = "https://logs.example.com/app/discover#/?q=service:payments-gateway%20AND%20level:error"
	prLink     = "https://git.example.com/shop/checkout-api/pull/4471"
)

// people of the chat; the bot is the scenario's own app.
var people = []person{
	{key: "maya", name: "Maya Chen", from: 0, to: 112},
	{key: "lukas", name: "Lukas Weber", from: 0, to: 240},
	{key: "wang", name: "王磊", enName: "Wang Lei", zh: true, from: 4, to: 240},
	{key: "priya", name: "Priya Nair", from: 2, to: 240},
	{key: "lina", name: "李娜", enName: "Li Na", zh: true, from: 16, to: 240},
	{key: "tom", name: "Tom Okafor", from: 1, to: 240},
	{key: "sofia", name: "Sofia Rossi", from: 3, to: 230},
}

// beats is the generated incident's script. Long on purpose: it is the story,
// one call per message in chat order, read top to bottom like the chat itself.
func beats() ([]*plan, []editPlan, []recallPlan) {
	ps := []*plan{
		card(-0, 20, "alert", "🔴 Alert firing: checkout_5xx_ratio > 5% (eu-west-1)",
			row(lt.TextElem("checkout-api 5xx ratio is 35.2% (threshold 5%) for 7 minutes")),
			row(lt.TextElem("Region: eu-west-1 · Service: checkout-api · Since 13:52 UTC")),
			row(lt.LinkElem("Open dashboard", grafana)),
			row(lt.ButtonElem("Acknowledge", "primary"), lt.ButtonElem("Escalate", "default")),
		),
		card(0, 35, "overview", "INC-4821 · SEV2 · firing",
			row(lt.TextElem("Workspace ws-inc-4821 created 13:57 UTC from alert checkout_5xx_ratio")),
			row(lt.TextElem("Owner: unassigned · Severity: SEV2 · Status: firing")),
			row(lt.HRElem()),
			row(lt.ButtonElem("Open workspace", "primary"), lt.ButtonElem("Set owner", "default")),
			row(lt.NoteElem(lt.TextElem("Ticket Manager keeps this card up to date"))),
		),
		text(0, 52, "maya", "ack, I'm on it. taking IC"),
		text(1, 14, "lukas", "looking"),
		text(1, 40, "tom", "+1 joining"),
		text(2, 5, "maya", "Impact: checkout error rate 35% in eu-west, roughly 1 in 3 orders failing since ~13:52 UTC. us-east and ap-south look normal.").as("impact"),
		text(2, 48, "priya", "Support confirms: tickets spiking from DE, FR and NL, customers get \"Payment could not be processed\" on the last checkout step. 46 tickets in 10 min"),
		text(3, 31, "sofia", "Do we want a status page post? I can draft one"),
		text(3, 55, "maya", "yes please, \"investigating degraded checkout in Europe\"").reply(""),
		text(4, 36, "lukas", "checkout-api pods are healthy but p99 to payments-gateway jumped from 180ms to 4.2s, lots of `upstream connect timeout` in the gateway logs").as("gwfinding"),
		image(5, 9, "lukas").as("shot1"),
		text(5, 20, "lukas", logsLink),
		text(5, 44, "wang", "我看了一下 ledger-db，主库连接数已经打满了：1998/2000，大量连接处于 idle in transaction").as("dbfull"),
		text(6, 2, "maya", "@_user_1 thanks, that would explain the gateway timeouts").mention("wang").reply("dbfull"),
		image(6, 30, "wang"),
		text(6, 41, "tom", "anything deployed recently in eu-west?"),
		text(7, 15, "lukas", "checkout-api v2.31.0 went out to eu-west at 13:45, us-east is still on v2.30.4").as("deploy"),
		text(7, 52, "maya", "that lines up with the start of the errors at 13:52").in("deploy"),
		text(8, 21, "wang", "v2.31.0 改了连接池配置吗？").in("deploy"),
		text(9, 6, "lukas", "checking the diff now").in("deploy"),
		post(10, 41, "lukas", "v2.31.0 config diff",
			row(lt.TextElem("The release bumped the ledger-db pool for every pod:")),
			row(lt.CodeElem("YAML", "ledger:\n  pool:\n-   max_open_conns: 20\n+   max_open_conns: 200\n    max_idle_conns: 10\n    conn_max_lifetime: 30m")),
			row(lt.TextElem("PR: "), lt.LinkElem("#4471", prLink)),
		).in("deploy").as("diff"),
		text(11, 12, "maya", "200 per pod × 60 pods = 12k possible connections against a 2000 limit. that's it").in("deploy").under("diff"),
		text(11, 34, "wang", "对，和我看到的一致").in("deploy"),
		text(12, 3, "sofia", "status page is up: "+statusPage),
		text(12, 41, "maya", "Decision: roll back checkout-api to v2.30.4 in eu-west now. @_user_1 please drive the rollback, I keep IC.").mention("lukas").as("decision").deliver(lt.DeliverTwice),
		text(13, 0, "lukas", "on it").reply("decision"),
		card(13, 22, "task1", "Task assigned",
			row(lt.TextElem("Roll back checkout-api to v2.30.4 (eu-west-1)")),
			row(lt.TextElem("Owner: Lukas Weber · Due: 14:45 UTC")),
			row(lt.ButtonElem("Mark done", "primary")),
		),
		text(14, 10, "lukas", deployRun),
		text(15, 33, "tom", "should we also scale ledger-db read replicas?"),
		text(16, 2, "wang", "不建议，现在是主库写连接的问题，加只读副本没用").reply(""),
		text(16, 40, "lina", "joining, reading back"),
		text(18, 1, "lukas", "rollback 30% done"),
		text(21, 32, "lukas", "rollback 60%, error rate down to 18%"),
		text(24, 5, "priya", "still getting complaints but fewer, 12 new tickets in the last 10 min"),
		text(26, 40, "lukas", "rollback complete, all eu-west pods on v2.30.4").as("rollbackdone"),
		text(27, 31, "maya", "error rate still 9%, better but not recovered").as("still9"),
		text(28, 12, "wang", "主库上还有 1700 多个旧连接没释放，都是 v2.31.0 留下的 idle in transaction，不会自己回收").as("leaked"),
		text(29, 3, "wang", "我先 kill 掉 idle 超过 5 分钟的连接"),
		text(30, 31, "tom", "go"),
		text(33, 2, "wang", "kill 了 600 多个，但是新连接还在进来，主库 CPU 95%"),
		text(34, 30, "wang", "@_user_1 建议把 ledger-db 主库切到 eu-west-1b 的备库，备库是干净的").mention("maya").as("failoverq"),
		text(35, 11, "maya", "what's the replication lag on the 1b replica?").in("failoverq"),
		text(35, 44, "wang", "lag 0.3s，可以切").in("failoverq"),
		text(36, 20, "tom", "risk is ~30s of write unavailability during the switch, acceptable given we're failing 9% anyway").in("failoverq"),
		text(37, 2, "maya", "agreed").in("failoverq"),
		text(38, 4, "maya", "Decision: fail over the ledger-db primary to eu-west-1b. 王磊 drives the failover, ETA 15 min.").as("decision2"),
		card(38, 31, "task2", "Task assigned",
			row(lt.TextElem("Fail over ledger-db primary to eu-west-1b")),
			row(lt.TextElem("Owner: 王磊 · Due: 14:55 UTC")),
			row(lt.ButtonElem("Mark done", "primary")),
		),
		text(39, 1, "wang", "收到，开始切换"),
		text(40, 12, "sofia", "updating the status page: identified, mitigation in progress"),
		text(45, 3, "wang", "切换中，预计 5 分钟"),
		text(48, 15, "lukas", "seeing write errors spike, expected during the switch"),
		text(52, 33, "wang", "切换完成，新主库 ledger-db-1b 连接数 140/2000").as("failoverdone"),
		text(54, 0, "maya", "checkout error rate down to 0.8% after the failover, watching").as("recovering").deliver(lt.DeliverDrop),
		text(55, 6, "priya", "support queue: new tickets have basically stopped"),
		text(56, 20, "tom", "nice work everyone"),
		image(58, 2, "wang"),
		text(60, 40, "sofia", "status page moved to monitoring"),
		text(68, 5, "lukas", "I'll prepare a fix for the pool config: cap max_open_conns at 20 and make it a per-region setting"),
		text(75, 1, "priya", "Customer escalation: order 7731-2201, jan.kowalski@example.com, charged twice?").as("pii"),
		text(76, 2, "priya", "sorry, wrong chat for the details, moved them to the support ticket. question stands: are there double charges?"),
		text(80, 14, "lukas", "checked the ledger: no duplicate captures, failed payments were never captured, so no double charges").as("nodouble"),
		text(90, 3, "maya", "I go off shift in about 15 min, 李娜 will take over as IC"),
		text(105, 0, "maya", "Handover: @_user_1 is IC from now. State: rollback done, ledger-db failed over to 1b, error rate 0.3%, monitoring. Open: root cause write-up, pool config fix, old primary cleanup.").mention("lina").as("handover"),
		text(106, 2, "lina", "收到，我接手 IC。").reply("handover"),
		card(106, 31, "ownercard", "Incident owner changed",
			row(lt.TextElem("Maya Chen → 李娜")),
			row(lt.NoteElem(lt.TextElem("INC-4821 · SEV2 · firing"))),
		),
		text(110, 5, "tom", "thanks Maya, good call on the failover"),
		post(120, 4, "lina", "Root cause (draft)",
			row(lt.TextElem("checkout-api v2.31.0 raised the ledger-db pool size per pod from 20 to 200 (commit 4f9c2e1). With 60 pods in eu-west that allows 12,000 connections against max_connections=2000.")),
			row(lt.TextElem("The pool filled the primary within minutes; payment writes waited for a connection and payments-gateway timed out after 4s, failing about 35% of checkouts.")),
			row(lt.CodeElem("SQL", "SELECT state, count(*) FROM pg_stat_activity GROUP BY state;\n-- idle in transaction | 1712\n-- active              |  286")),
			row(lt.TextElem("The rollback stopped new connections, but leaked sessions kept the primary saturated until the failover to eu-west-1b.")),
		).as("rootcause"),
		text(125, 2, "wang", "补充一下：旧主库上 idle in transaction 的连接，是因为 v2.31.0 里事务在超时后没有回滚").as("rcextra"),
		text(126, 8, "lukas", "confirmed, the new retry wrapper opens a transaction before it takes the idempotency lock and never rolls back on timeout").in("rootcause"),
		text(127, 10, "lina", "I'll add that to the write-up").in("rootcause"),
		text(131, 0, "tom", "+1").in("rootcause"),
		text(140, 2, "lina", "Recovery confirmed: checkout error rate at the 0.2% baseline for 45 min, p99 to payments-gateway 190ms, support queue back to normal.").as("recovered"),
		card(141, 0, "statuscard", "Status update posted",
			row(lt.TextElem("INC-4821 status page: Monitoring")),
			row(lt.LinkElem("View status page", statusPage)),
		),
		text(150, 20, "priya", "support confirms no new checkout complaints since 15:10"),
		image(160, 3, "lukas").as("shot2"),
		text(160, 30, "lukas", "p99 back to normal, screenshot above"),
		post(170, 1, "lina", "Next steps",
			row(lt.TextElem("1. Add a max-connections budget check to the deploy pipeline (owner: Lukas)")),
			row(lt.TextElem("2. Put PgBouncer in front of ledger-db (owner: 王磊)")),
			row(lt.TextElem("3. Decommission the old primary ledger-db-1a after the data check (owner: 王磊)")),
			row(lt.TextElem("4. Postmortem on Thursday 10:00 UTC (owner: Tom)")),
		).as("nextsteps"),
		text(175, 3, "tom", "postmortem invite sent for Thursday"),
		file(180, 2, "lukas", "checkout-api-v2.31.0-pool-fix.patch"),
		file(190, 40, "tom", "INC-4821-postmortem-draft.docx"),
		text(200, 1, "wang", "旧主库数据校验完成，没有丢数据"),
		text(215, 12, "sofia", "resolve the status page now or wait?"),
		text(216, 0, "lina", "wait until 18:00, then resolve").reply(""),
		text(230, 4, "lina", "keeping the incident open until 18:00 for monitoring, then I'll resolve it"),
		card(238, 0, "reminder", "Reminder: INC-4821 is still firing",
			row(lt.TextElem("Open for 4h · Owner: 李娜 · Severity: SEV2")),
			row(lt.ButtonElem("Resolve", "primary"), lt.ButtonElem("Snooze 1h", "default")),
		),
	}
	edits := []editPlan{
		{at: at(7, 40), handle: "deploy", text: "checkout-api v2.31.0 went out to eu-west at 13:44, us-east is still on v2.30.4 (the canary step was skipped)"},
		{at: at(20, 11), handle: "impact", text: "Impact: checkout error rate 35% in eu-west (peaked at 41% at 14:08), roughly 1 in 3 orders failing since ~13:52 UTC. us-east and ap-south look normal."},
		{at: at(106, 30), handle: "overview", title: "INC-4821 · SEV2 · firing", rows: [][]lt.Elem{
			row(lt.TextElem("Workspace ws-inc-4821 created 13:57 UTC from alert checkout_5xx_ratio")),
			row(lt.TextElem("Owner: 李娜 · Severity: SEV2 · Status: firing")),
			row(lt.HRElem()),
			row(lt.ButtonElem("Open workspace", "primary"), lt.ButtonElem("Set owner", "default")),
			row(lt.NoteElem(lt.TextElem("Ticket Manager keeps this card up to date"))),
		}},
		{at: at(128, 15), handle: "rootcause", title: "Root cause", paras: [][]lt.Elem{
			row(lt.TextElem("checkout-api v2.31.0 raised the ledger-db pool size per pod from 20 to 200 ("), lt.LinkElem("PR #4471", prLink), lt.TextElem("). With 60 pods in eu-west that allows 12,000 connections against max_connections=2000.")),
			row(lt.TextElem("The pool filled the primary within minutes; payment writes waited for a connection and payments-gateway timed out after 4s, failing about 35% of checkouts.")),
			row(lt.CodeElem("SQL", "SELECT state, count(*) FROM pg_stat_activity GROUP BY state;\n-- idle in transaction | 1712\n-- active              |  286")),
			row(lt.TextElem("A new retry wrapper opened a transaction before taking the idempotency lock and never rolled back on timeout, so sessions leaked. The rollback stopped new connections, but leaked sessions kept the primary saturated until the failover to eu-west-1b.")),
		}},
		{at: at(185, 9), handle: "nextsteps", title: "Next steps", paras: [][]lt.Elem{
			row(lt.TextElem("1. Add a max-connections budget check to the deploy pipeline (owner: Lukas)")),
			row(lt.TextElem("2. Put PgBouncer in front of ledger-db (owner: 王磊)")),
			row(lt.TextElem("3. Decommission the old primary ledger-db-1a after the data check (owner: 王磊)")),
			row(lt.TextElem("4. Postmortem on Thursday 10:00 UTC (owner: Tom)")),
			row(lt.TextElem("5. Alert when ledger-db connections exceed 80% of max_connections (owner: 李娜)")),
		}},
	}
	recalls := []recallPlan{{at: at(75, 38), handle: "pii"}}
	return ps, edits, recalls
}

// Chatter pools. Acks and chatter are most of a real incident chat.
var (
	ackEN = []string{
		"+1", "ok", "ack", "looking", "on it", "thanks", "👍", "got it", "same here", "ty", "noted", "👀",
		"ok thanks", "makes sense", "agree", "sounds good", "checking", "one sec", "yep", "👌",
	}
	ackZH  = []string{"收到", "好的", "我看一下", "+1", "了解", "辛苦了", "👍", "OK", "在看", "同意", "好"}
	busyEN = []string{
		"anyone on the bridge?", "refreshing the dashboard", "is the grafana link working for others?",
		"brb 2 min", "back", "who's looking at the gateway logs?", "dashboard is slow to load for me",
		"joining the bridge", "muted on the bridge, typing here", "still seeing 5xx in my test orders",
		"can someone share the current error rate?", "let's keep the chat for updates, discussion on the bridge",
		"I can take notes", "taking notes in the doc", "is us-east really fine?", "looks the same on my side",
	}
	busyZH = []string{"我这边也看到了", "会议链接是哪个？", "我在会议里", "稍等", "正在看日志", "我这边网络有点慢", "我记一下时间线"}
	calmEN = []string{
		"graphs look flat now", "nothing new on my side", "quiet on support", "still green",
		"grabbing coffee, ping me if needed", "thanks all", "nice", "good work", "all quiet",
		"dashboard still green", "I'll check again in 15 min",
	}
	calmZH = []string{"一切正常", "监控平稳", "我这边没问题", "继续观察", "谢谢大家"}
	links  = []string{grafana, grafanaDB, logsLink, bridge, "https://status.example.com", "https://runbooks.example.com/ledger-db/connection-saturation"}
	pings  = []string{"@_user_1 can you join the bridge?", "@_user_1 are you seeing this too?", "@_user_1 ping", "@_user_1 fyi"}
)
