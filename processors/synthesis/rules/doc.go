// Package rules is larkline's default synthesizer: deterministic, rule-based, with no
// network and no model. It implements synth.Synthesizer and synth.Summarizer.
//
// Each citable text or post message is split into sentences scored per kind against
// English and Chinese phrase patterns (patterns.go), with modifiers for plans,
// negations and hedges; a labelled message ("Impact:", "根因") is classified by its
// labels only. One draft per (group, kind) cites every supporting message and takes
// its title from the strongest; acknowledgements, questions, context and chatter yield
// nothing. The same request always gives the same drafts and fingerprints. Summarize
// states status, impact, mitigation, root cause, owner, decision, blocker and next
// steps from the visible entries.
//
// Cost is linear in the request's text (a pattern is skipped when the sentence holds
// none of the literals it requires, all found in one pass: decisions D37) and nothing
// is kept between calls; phrase rules miss paraphrase and irony but never invent a
// fact. docs/operations.md ("How the rule synthesizer drafts entries") has every
// rule: what yields a draft, labels, what yields nothing, drafting and the summary.
package rules
