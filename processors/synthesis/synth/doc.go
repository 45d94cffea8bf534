// Package synth is the contract between larkline's synthesis worker and the
// synthesizers that turn one chunk of a closed window's chat messages into timeline
// entry drafts (design §12.3) and the visible timeline into a workspace summary (§13).
//
// The worker groups the window's evidence by conversation (thread, root, replies,
// proximity: §12.2) and hands a [Request] to a [Synthesizer]. A synthesizer returns
// [Draft] values; every draft names a known [Kind], stays within the window, and cites
// only citable evidence of the request ([Message.Citable]): messages flagged
// [Message].Context are read-only context, and deleted and bot messages are never
// cited either. [Validate] is that rule, written once; the worker applies it to every
// draft whatever produced it.
//
// Two implementations exist: package rules (deterministic, no network, the default) and
// package openai (any OpenAI-compatible chat-completions endpoint). Both implement
// [Synthesizer] and [Summarizer].
//
// # What this package decides once
//
//   - [Fingerprint]: the deduplication key of a draft. It hashes the workspace, the kind
//     and the lowest cited evidence id (the anchor), so the same window synthesized again
//     yields the same fingerprints even when a model words a title differently or cites
//     one supporting message more or less. The title is deliberately left out.
//   - [IsRetryable]: the one retry decision for errors crossing the synthesizer boundary.
//   - [Redact]: what must be removed from message text before it leaves the process for
//     a model (secrets and contact details).
//   - [EstimateTokens]: the token estimate the worker budgets chunks with.
//
// # Bounds
//
// Titles are at most [MaxTitleRunes] runes, bodies [MaxBodyRunes], summaries
// [MaxSummaryRunes]. The package keeps no state, performs no I/O and is safe for
// concurrent use. Error strings produced here carry ids, kinds, counts and lengths,
// never message text, so they may be logged and stored as window diagnostics.
package synth
