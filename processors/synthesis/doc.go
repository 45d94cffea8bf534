// Package synthesis is larkline's synthesis worker: a franz-go consumer-group member
// that reads the closed-window topic (key <workspace>/<chat>, Avro ClosedWindow) and
// turns each closed window into draft timeline entries bound to their evidence, then
// makes the window's one summary attempt (design §10.2, §11–§14). The synthesizers
// live in the subpackages: synth (the contract), rules (deterministic, the default)
// and openai (any OpenAI-compatible endpoint).
//
// A window waits, holding nothing, until the evidence sink has committed the
// evidence range its record names; it is then claimed by compare-and-set on its
// state row (store.ClaimWindow) with a heartbeat, synthesized chunk by chunk with a
// cursor that a retried or taken-over attempt resumes from, and ends completed,
// ignored, failed (after MaxAttempts) or needs_attention, with ids-only diagnostics.
// A model outage opens a worker-wide gate and refunds the attempt, so an outage never
// spends a window's bounded attempts. A processor version may bring its own
// synthesizer and prompt (Options.Versions, decisions D31). docs/operations.md ("How
// synthesis handles a window") walks through every step.
//
// Offsets: a record is marked for commit only once its window is terminal and every
// earlier record of its partition is too, so a crash redelivers exactly the
// unfinished windows. Records of one chat run one at a time, oldest first; at most
// MaxConcurrentSynthesis windows per process and one per workspace. Undecodable
// records, and records whose key does not match their value, are parked in the
// dead-letter topic. A sweep every ScanInterval takes over stale processing windows.
//
// Lifecycle: New validates the options; Run consumes until its context ends or Close
// is called, then drains (windows in progress get DrainTimeout, then are released
// with their attempt refunded), commits and leaves the group (decisions D29).
//
// Metrics are larkline_synthesis_* (docs/operations.md lists them), without
// workspace or chat labels. Logs carry ids, keys, fingerprints, hashes and counts,
// never message text, prompts or summaries. The worker never writes evidence, creates
// topics or migrates the schema.
package synthesis
