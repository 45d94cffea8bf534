// Package reconcile is larkline's Lark reconciliation path (design §8, §10.1, §14,
// §16): it reads the message history of every chat bound to an eligible workspace,
// page by page through the official SDK, turns it into the same evidence records
// the event path produces (IngestPath reconcile, refresh or manual) and keeps one
// durable checkpoint per workspace and chat. It recovers events Lark never delivered
// or larkline lost, backfills a workspace's chats when they are first bound,
// refreshes edited and recalled messages, and tells the window processor how far
// history is complete.
//
// A run reads one chat's range of creation times oldest first, and the replies of
// its threads from their own containers; only a new or changed version of a message
// is produced, and a stored recall is never replaced by a history copy that does not
// show it yet. After each page Kafka has acknowledged, the checkpoint advances in
// Postgres and is then published to the compacted checkpoint topic with the
// coverage time and one past the highest evidence offset produced for the chat, so
// the window processor never closes a window ahead of its evidence. A run killed
// between pages resumes from its checkpoint minus the overlap.
//
// Calls are bounded: the app's rate limiter, MaxRetries with backoff (IsRetryable
// decides), Lark's rate-limit reset honoured, MaxConcurrentChats runs at once and
// MaxPagesPerRun pages per run. Run schedules interval passes and, with Window set,
// coverage passes right after each window end (decisions D15); RunOnce is one pass;
// Refresh serves the CLI and the API. Run and Close follow decisions D29.
//
// docs/operations.md ("How reconciliation reads a chat") has the run kinds, the
// checkpoint and coverage rules, the budgets and the defaults in full.
//
// Metrics are larkline_reconcile_* and larkline_lark_api_calls_total
// (docs/operations.md lists them). Logs carry workspace, chat, message and thread
// ids, counts and times; never message text. Memory is one page batch per running
// chat and MaxThreadsPerChat thread ids per scanned chat. The package does not write
// Postgres evidence (the sink does) and does not read a chat before its workspace
// existed.
package reconcile
