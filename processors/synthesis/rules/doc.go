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
// recovery ("still not recovered", "还没恢复") is ongoing impact; a recovery sentence
// mentioning the error rate is not impact. A message supports a kind when one of its
// sentences reaches the threshold (one strong phrase, or two weak ones).
//
// # What yields nothing
//
// Context messages (they are never cited), deleted and bot messages, images, files
// and cards, acknowledgements ("+1", "ok", "thanks", "on it", "收到", "好的"), questions
// ("is the DB down?", "要不要回滚"), emoji or punctuation alone, links without at least
// a few words of explanation, and chatter no pattern recognises. A draft whose kind
// and title repeat an existing entry (with a different fingerprint) is dropped as
// repeated status.
//
// # Drafting
//
// One draft per (group, kind): its evidence is every supporting message of the group;
// its title is the strongest supporting message whole when it fits the title bound, or
// its strongest sentence cut to the bound; its time is that message's; its body lists
// the supporting messages as "15:04 Sender: text", bounded by synth.MaxBodyRunes.
// Ties go to the earlier message. Drafts are sorted by time, kind order and lowest
// evidence id, so the same request always gives the same drafts and fingerprints,
// whatever the order of its groups.
//
// # Bounds
//
// Cost is linear in the request's text (a fixed set of compiled patterns per
// sentence); nothing is kept between calls. Phrase rules miss paraphrase and irony a
// model would catch; they never invent a fact that no message states.
package rules
