// Package rules is larkline's default synthesizer: deterministic, rule-based, with no
// network and no model. It implements synth.Synthesizer and synth.Summarizer.
//
// # What yields a draft
//
// Each citable message (primary, not deleted, not from a bot) of type text or post is
// split into sentences, and every sentence is scored per kind against English and
// Chinese phrase patterns (patterns.go): impact ("error rate", "customers can't pay",
// "影响", "报错率", "不可用"), finding ("logs show", "looks like", "发现", "定位到"),
// decision ("we decided", "let's roll back", "决定", "先回滚"), ownership ("I'll take IC",
// "Bob owns", "负责", "接手"), mitigation ("rolled back", "failed over", "scaled",
// "restarted", "回滚", "切流", "扩容", "重启"), root cause ("root cause", "caused by",
// "根因", "原因是"), recovery ("recovered", "back to normal", "恢复", "已解决"), next step
// ("next steps", "follow-up", "postmortem", "后续", "待办", "复盘") and blocker
// ("blocked on", "need approval", "阻塞", "没有权限"). Modifiers adjust a sentence:
// a plan ("we'll", "准备") is a decision, not yet a mitigation or recovery; a negated
// recovery ("still not recovered", "还没恢复") is ongoing impact; a negated action
// ("never rolled back", "没有回滚") is no mitigation; a recovery sentence mentioning
// the error rate is not impact. An error signal ("5xx", "errors spiking") is impact
// only with a quantity (a rate, "1 in 3", "46 tickets") or a scope (customers, a
// region), and never when hedged ("the risk is", "expected"). A sentence reaches a
// kind at the threshold (one strong phrase, or two weak ones) and has one kind, its
// strongest; ties go to root cause, decision, mitigation, recovery, blocker, impact,
// ownership, next step, finding, in that order. A message supports the kinds of its
// sentences.
//
// # Labels
//
// A message whose first line starts with a label ("Impact:", "Decision:", "Root
// cause (draft)", "Recovery confirmed:", "Next steps", "Handover:", "影响：", "根因",
// "后续") is classified by its labels only: one kind per labelled section, a section
// running to the next line that starts with a label. Its title is the content after
// the label: the whole content when it is one line that fits, else its first line
// (a list item without its number), else that line's first sentence.
//
// # What yields nothing
//
// Context messages (they are never cited), deleted and bot messages, images, files
// and cards, acknowledgements ("+1", "ok", "thanks", "on it", "收到", "好的"), questions
// ("is the DB down?", "要不要回滚"), emoji or punctuation alone, links without at least
// a few words of explanation, quoted text (a proposed status-page wording), sentences
// about the status page, an action's interim progress ("rollback 60%"), follow-ups
// whose object is a pronoun ("I'll add that"), and chatter no pattern recognises. A
// message with little substance ("继续观察", "一切正常"), a reply that starts with an
// acknowledgement and adds little ("收到，开始切换") and an agreement ("same here",
// "我这边也看到了") support ownership at most. A draft whose kind and title repeat an
// existing entry (with a different fingerprint) is dropped as repeated status.
//
// # Drafting
//
// One draft per (group, kind): its evidence is every supporting message of the group;
// its title comes from the strongest supporting message (a labelled one wins): the
// label's content, or the message without its leading acknowledgement when it has
// one kind and fits the title bound, or else its strongest sentence of the kind, cut
// to the bound, markdown links reduced to their text. Its time is that message's;
// its body lists the supporting messages as "15:04 Sender: text", bounded by
// synth.MaxBodyRunes. Ties go to the earlier message. Drafts are sorted by time, kind
// order and lowest evidence id, so the same request always gives the same drafts and
// fingerprints, whatever the order of its groups.
//
// # Summary
//
// Summarize states the status, the impact, the mitigation, the root cause, the owner,
// the decision, an open blocker and the latest next steps from the visible entries,
// a title's leading label of its own kind removed and bare headings skipped. Once
// the incident is mitigated or recovered, the impact and recovery lines give the
// most quantified entry rather than the last interim reading; the owner line gives
// the latest entry naming the IC, else the latest ownership entry.
//
// # Bounds
//
// Cost is linear in the request's text (a fixed set of compiled patterns per
// sentence, each skipped when the sentence holds none of the literals it requires;
// the literals are found in one pass: decisions D35); nothing is kept between calls. Phrase rules miss paraphrase and irony a
// model would catch; they never invent a fact that no message states.
package rules
