// Package reconcile is larkline's Lark reconciliation path (design §8, §10.1, §14,
// §16): it reads the message history of every chat bound to an eligible workspace,
// page by page through the official SDK, turns it into the same evidence records
// the event path produces (IngestPath reconcile, refresh or manual) and keeps one
// durable collection checkpoint per workspace and chat. It recovers events Lark
// never delivered or larkline lost, backfills a workspace's chats when they are
// first bound, refreshes edited and recalled messages, and tells the window
// processor how far history is complete.
//
// # Runs
//
// A Reconciler runs one chat of one workspace at a time per slot; each run reads
// one range [start, end) of creation times, where end is now − Settle in whole
// seconds and nothing before the bound max(workspace.created_at,
// now − IngestionLookback, now − Retention) is ever requested:
//
//	backfill     no checkpoint yet          start = bound (design §8.1)
//	incremental  every ReconcileInterval    start = checkpoint − ReconcileOverlap (§8.2)
//	refresh      every EvidenceRefreshInterval per chat (LastFullScanAt in the
//	             checkpoint's metadata): start = now − EvidenceRefreshLookback, or
//	             the incremental start when that is earlier
//	manual       Refresh(ws)                start = bound, whatever the workspace's
//	             status or age (design §6 "Refresh from sources")
//
// The chat container is read oldest first (ByCreateTimeAsc, start_time/end_time in
// seconds, page_size ≤ 50), following every page_token until has_more is false.
// Lark shows only the root of a thread in the chat container, so the replies are
// read from each thread's container too: newest first (thread containers take no
// time range), stopping at the first page that reaches before the range; the
// older items that page carries are dropped. A thread Lark refuses to list (a
// non-retryable answer: deleted, not visible to the bot) does not fail the run: it is
// kept in the chat's checkpoint (store.CheckpointMeta.RefusedThreads, with where it is
// unread from) and later runs read it again from there, with backoff and at most
// maxThreadAttempts times (threads.go, larkline_reconcile_refused_threads_total).
// A run reads the threads whose roots
// are on its pages, and the threads the chat is known to have (at most the
// MaxThreadsPerChat most recently active), learnt from earlier pages and from the
// thread ids of the chat's stored evidence (read once per chat and process, and at
// every refresh or manual run): a reply to a thread whose root lies before the
// range is visible nowhere else. Runs that continue from a checkpoint re-read only
// the known threads active within ThreadActiveWindow (one call each); refresh,
// manual and first backfill runs re-read them all, so a lost reply to a thread quiet for longer is recovered by the next
// refresh — after the coverage of its window may already have been published
// (the window processor then counts it as late evidence).
//
// Every message is normalized (package normalize) and compared with the version
// the store holds (EvidenceByKeys): only a new or changed version is produced, a
// stored recall is never replaced by a history copy that does not show it yet, and
// an older version never replaces a newer one. An edit therefore becomes a new
// version (new content_hash) and a recall a redacted one (deleted, no text).
//
// # Checkpoints and coverage
//
// After each chat page, with the replies of the threads it roots, the page's
// records are produced and Kafka acknowledged every one of them; only then does the
// checkpoint (store.AdvanceCheckpoint: cursor create_time_ms + message_id, never
// backwards) move to the page's last message, and to (end, no message) after the
// last page. After the database commit the checkpoint is published to the
// compacted checkpoint topic (key <workspace>/<chat>, CoveredUntil = the
// checkpoint time: every message created before it is collected), which the window
// processor waits for before closing a window. The published checkpoint also
// carries one past the highest offset of the evidence this reconciler produced for
// the chat so far (EvidenceEndOffset, from the produce acknowledgements; every
// record of a chat lands on the chat's partition): the window processor counts the
// coverage only once it has processed the evidence topic up to there, so a window
// never closes ahead of the evidence collected for it. The offsets are kept in
// memory, one per chat reconciled since the process started; after a restart a
// checkpoint carries 0 until the chat's first produce, and the window processor
// keeps the barriers of earlier checkpoints. A failed page, produce or commit
// keeps the previous checkpoint (its diagnostics go into the checkpoint's
// metadata); a failed publish is retried by the chat's next advance or run. A run
// killed between pages resumes from its checkpoint minus the overlap: nothing is
// lost and nothing before the overlap is read again. An incremental or continued
// backfill run spends at most half its page budget re-reading the overlap: past that
// it continues from the checkpoint (larkline_reconcile_overlap_skips_total), so a
// burst larger than the budget inside the overlap cannot stall coverage.
//
// # API budget
//
// Every history call waits on the app's Limiter (a token bucket,
// RequestsPerSecond/Burst, shareable with other users of the app's quota), and is
// retried at most MaxRetries times when IsRetryable says so, after exponential
// backoff with equal jitter between MinBackoff and MaxBackoff. A rate-limit answer
// (HTTP 429 or code 99991400) waits at least x-ogw-ratelimit-reset and pauses the
// limiter for every chat; the SDK itself never retries. At most MaxConcurrentChats
// chat runs (automatic and manual together) run at once, and one run reads at most
// MaxPagesPerRun pages (MaxPagesPerManualRefresh for Refresh), chat and thread
// containers together; a run that uses its budget stops after its last committed
// page (ErrPageBudget) and the next one continues.
//
// # Defaults
//
//	IngestionLookback         72h      ReconcileInterval       5m
//	ReconcileOverlap          10m      EvidenceRefreshInterval 1h
//	EvidenceRefreshLookback   24h      Settle                  5s
//	Retention                 none     RequestsPerSecond       10 (≤ 50), Burst 10
//	MaxConcurrentChats        4        MaxPagesPerRun          100
//	MaxPagesPerManualRefresh  1000     PageSize                50
//	MaxRetries                5        MinBackoff … MaxBackoff 500ms … 30s
//	RequestTimeout            10s      MaxThreadsPerChat       50
//	ThreadActiveWindow        30m      DrainTimeout            30s
//
// # Eligibility
//
// An automatic pass lists the bindings of firing workspaces created within the
// lookback; before every page a run asks Eligibility (the event path's resolver)
// whether its workspace is still eligible, so a workspace that left firing, aged
// out or lost its binding stops being read — also when its job was already queued
// (ErrIneligible). Refresh skips that check but refuses a workspace whose type
// ingestion is not enabled for (ErrNotEnabled).
//
// # Running
//
// Run is the scheduler: a pass at start and every ReconcileInterval and, when
// Window is set, a coverage pass CoverageDelay (Settle + 0.1 s) after every window end
// for the chats with evidence in the window that just ended (schedule.go,
// docs/decisions.md D15): they get the chat-run slots first, three for every one an
// interval-pass run waiting beside them gets, and an interval-pass run of a chat a
// coverage run just read makes no call. On ctx's end or Close it drains (runs end
// after their current page, within DrainTimeout) and returns. RunOnce is one pass; Refresh serves the CLI and the API. Runs of the
// same workspace/chat never overlap in one process; several processes may run
// reconcilers at once (checkpoints never move back, evidence is idempotent), at
// the cost of duplicate API calls.
//
// # Observability and bounds
//
// Metrics (nil Registry: none): larkline_reconcile_duration_seconds{kind},
// _runs_total{kind,result}, _pages_total{container}, _messages_total{outcome},
// _failures_total{reason}, _lag_seconds (now − the oldest checkpoint of the
// eligible chats), _api_retries_total{outcome}, _api_backoff_seconds_total,
// _checkpoints_published_total{result}, _coverage_passes_total, _coverage_chats,
// _window_coverage_seconds, and larkline_lark_api_calls_total{endpoint, outcome}. Logs carry workspace, chat, message and thread ids, counts and times;
// never message text. Memory is bounded by one page batch per running chat (a page
// plus the in-range replies of its threads) and MaxThreadsPerChat thread ids per
// scanned chat. The package does not write Postgres evidence (the sink does), does
// not decide synthesis, and does not read a chat before its workspace existed.
package reconcile
