// Package synthesis is larkline's synthesis worker: a franz-go consumer-group member that
// reads the closed-window topic (larkline.windows.closed.v1, key <workspace>/<chat>,
// Avro ClosedWindow values) and turns each closed window into draft timeline entries
// bound to their evidence, then makes the window's one summary attempt (design §10.2,
// §11, §12, §13, §14).
//
// The synthesizers themselves live in the subpackages: synth (the contract), rules
// (deterministic, the default) and openai (any OpenAI-compatible endpoint). This
// package drives them.
//
// # One window
//
//  1. A duplicate record of a window already terminal (completed, ignored,
//     needs_attention, or failed with its attempts spent) is skipped at once.
//  2. The worker waits until the window's evidence is in the table, holding no claim
//     and spending no attempt. A closed record names its evidence as an offset range
//     of the chat's evidence partition: the worker waits until the evidence sink's
//     group has committed the range's end (SinkProgress; each EvidenceWait without it
//     is counted in _sink_wait_timeouts_total and the wait goes on). A window is never
//     processed with evidence missing: after MaxAttempts claims finding no evidence of
//     the window in the table, it ends in the terminal
//     needs_attention state with diagnostics (store.MarkWindowNeedsAttention), which an
//     operator finds by status and alert.
//  3. The window's sync-state row is claimed by compare-and-set (store.ClaimWindow):
//     created or retried in processing, or taken over when stale (no write for
//     StaleTimeout, on the database clock); a window another worker holds is polled
//     until it is terminal or stale. Whole-window attempts are bounded by MaxAttempts;
//     then the window stays failed with bounded diagnostics (ids, counts, error kinds).
//     While an attempt runs, a heartbeat (store.HeartbeatWindow, every StaleTimeout/3)
//     keeps its claim fresh, so a window is taken over only when its holder is gone,
//     however long its chunks take; a heartbeat that finds the lease gone stops the
//     attempt.
//  4. Chunks (§12.1): the window's eligible evidence is read in (occurred_at, id) order,
//     at most EvidenceBatchLimit rows and MaxEstimatedTokensPerChunk estimated tokens
//     per chunk, shared by the existing entries given to the synthesizer (at most an
//     eighth), the read-only context (a quarter is kept for it) and the chunk's
//     messages (the rest); a message alone over the budget still forms a chunk, it
//     cannot be split. After each chunk's drafts are
//     written the window cursor advances under the attempt's lease, together with the
//     chunk's draft count and whether it changed a visible draft. A retried, refunded
//     or taken-over window resumes at its next undone chunk (the store keeps the
//     cursor; under another prompt version it restarts as a whole): a committed chunk
//     is not sent to the model again. Only the chunk in flight when an attempt died is
//     redone, and its re-written drafts land on the same entries through their
//     fingerprints.
//  5. Grouping (§12.2): a chunk's messages and its read-only context are grouped by
//     thread_id, root_id, parent and replies, then proximity (ProximityGap); order is
//     kept inside a group. Context is marked synth.Message.Context and is never cited
//     and never part of the cursor or the aggregate: the roots and parents of the
//     chunk's replies, earlier messages of its threads from the attempt's previous
//     chunks, and the ContextLookback before the window, in that priority, within the
//     token budget. Later messages of a thread reach the model as primary evidence of
//     a later chunk, with the earlier ones as their context.
//  6. Entries (§12.4): every validated draft is upserted as source=ai, status=draft,
//     deduplicated by synth.Fingerprint and bound to all its evidence, with AI metadata:
//     processor and prompt version, synthesizer and model, batch id
//     (<window source key>#<chunk index>), window key and bounds, chat, thread and root
//     ids, and every evidence id with the content hash it had as input. Confirmed,
//     hidden and human entries keep their text and only gain evidence (the store
//     enforces it; counted as protected).
//  7. A window that produced no draft ends ignored, otherwise completed; the state row
//     records the aggregate hash (AggregateHash: SHA-256 over the ordered evidence id
//     and content hash pairs included), the evidence and chunk counts and the prompt
//     version.
//  8. Summary (§13): after a completed window that created or materially updated a
//     visible draft (on a retried or taken-over attempt a draft found already written
//     counts too: the attempt that wrote it may have died before its summary), when no
//     human summary exists and summary_attempted was not set yet: summary_attempted is set, then the summarizer runs once over the visible
//     entries and the text is stored unless a human summary appeared meanwhile. A
//     failing summary never fails the window and is not retried.
//
// Model failures: a model outage (errors synth.IsRetryable calls retryable apart from
// invalid output: unavailable, timeouts, 429 and 5xx) retries the chunk up to
// ChunkRetries times with exponential backoff and jitter. When they are used up, the
// worker-wide model gate opens: the attempt is recorded failed (model_unavailable,
// with diagnostics) and its attempt given back in the same compare-and-set on the
// lease (store.RefundWindowAttempt), so an outage never spends a window's bounded
// attempts. While the gate is open no window claims: windows that need the model wait
// for it holding nothing (no claim whose lease could go stale, no slot), attempts in
// progress make no further call, and consumer lag grows. The gate stays open for an
// exponentially growing period with jitter (RetryBackoffMin doubling up to
// ModelOutageBackoffMax); then a single window claims as the probe and makes one call.
// Any answer closes the gate and the waiting windows claim again, each chat oldest
// first; an outage error opens it for a longer period. Invalid output (after the model
// client's own bounded retries, or failing synth.ValidateAll here) and rejected
// requests are the window's own failures: they fail the attempt at once, it is
// recorded (FinishWindow failed with diagnostics) and the window is claimed again
// after a backoff until MaxAttempts.
//
// # Processor versions with their own synthesis
//
// Options.Versions, when set, is asked before each claim for the window's processor
// version's own Settings (decisions D31): its synthesizer, summarizer, prompt version
// (recorded at the claim), chunk budget and chunk timeout replace the Options' for
// that window. A version it has no settings for uses the Options'. A failed lookup
// fails the claimed attempt (reason version_settings, counted against MaxAttempts),
// so a misconfigured version's window ends failed with diagnostics rather than
// holding back its partition's commits. The model gate stays one per worker.
//
// # Offsets, ordering and concurrency
//
// Autocommit commits only marked records (kgo.AutoCommitMarks), and a record is
// marked (MarkCommitRecords, then an immediate commit) only once its window is
// terminal in the store and every earlier record of its partition is too: a partition's
// committed offset advances over a contiguous prefix of finished windows only. A
// worker that stops or crashes therefore has every unfinished window delivered again,
// and a finished one is not. Records of one chat are processed one at a time, oldest
// first; different chats and partitions concurrently, at most MaxConcurrentSynthesis
// windows in the process and at most one per workspace. MaxInFlightRecords bounds the
// records held. Undecodable records, and records whose key does not match their
// value, are parked in the dead-letter topic and committed.
//
// Every ScanInterval a sweep lists processing windows that went stale
// (store.StaleProcessing) and takes them over, so a window whose worker died is
// finished even when no record names it again.
//
// # Lifecycle
//
// New validates the options; nothing connects until Run. Run consumes until its
// context ends or Close is called; then no new window starts, windows waiting (for
// evidence, another worker or the model gate) stop without a claim, windows in
// progress run for at most DrainTimeout (an attempt still running then is released
// with its attempt refunded, so its next owner resumes it at once at its next undone
// chunk), finished windows are committed and
// the worker leaves the group. The store and its pool belong to the caller.
//
// # Observability
//
// Metrics (registered on the injected registry, no workspace or chat labels):
// larkline_synthesis_windows_total{outcome}, _claims_total{outcome},
// _attempt_failures_total{reason}, _window_retries_total, _stale_processing,
// _windows_in_flight, _window_duration_seconds, _evidence_wait_seconds, _chunks_total,
// _chunk_evidence, _chunk_context_messages, _chunk_estimated_tokens,
// _chunk_model_tokens_total{type}, _chunk_synthesize_seconds{outcome},
// _chunk_retries_total{reason}, _validation_errors_total, _drafts_total{outcome},
// _draft_evidence_bound_total, _records_total{result}, _offset_commits_total{result},
// _store_retries_total{operation}, _model_available, _model_outage_seconds_total,
// _model_gate_opens_total{cause}, _model_probes_total{outcome}, _model_gate_waiting,
// _attempts_refunded_total, _heartbeats_total{outcome}, _sink_wait_timeouts_total,
// _sink_progress_errors_total; larkline_synthesis_summary_attempts_total{outcome},
// larkline_synthesis_summary_skipped_total{reason} and larkline_synthesis_summary_lag_seconds (window close
// to summary). Logs carry workspace, chat and message ids, window keys, batch ids,
// fingerprints, hashes and counts, never message text, prompts or summaries.
//
// # Bounds
//
// The worker writes window states, entries, their evidence bindings and the summary;
// it never writes evidence. Memory per window is one chunk, its context and a bounded
// memory of recent messages; a window's named evidence is checked in batches of 1000
// keys. It does not create topics or migrate the schema.
package synthesis
