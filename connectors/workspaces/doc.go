// Package workspaces brings workspaces (incidents of a ticket system) and their Lark
// chat bindings into larkline, in the two ways a ticket system integrates, and keeps
// them valid: a Kafka feed and an administrative API.
//
// # The feed
//
// A ticket system publishes each workspace to the compacted topic
// larkline.workspaces.v1: key = workspace id, value = an Avro
// schemas.WorkspaceRecord carrying type, status, creation time, a version and the
// complete list of bound chats. [Publisher] writes such records (acks=all,
// idempotent producer) for `larkline workspaces publish` and scripts;
// [DecodeRecordJSON] reads the JSON form they use.
//
// [Consumer] applies the topic to the workspaces and workspace_chat_bindings tables:
//
//   - Each record is applied by the [Applier] in one transaction: the workspace row is
//     written only if the record's version is strictly newer than the stored one, and
//     then the record's chats become the workspace's exact set of bindings. An older
//     or equal version changes nothing (counted as ignored_older), so reordered,
//     redelivered and replayed records are harmless.
//   - A tombstone (null value) means the ticket system deleted the workspace: its
//     bindings are removed and it is marked archived, in one transaction. The row is
//     kept, with its version, rather than deleted: the workspace's timeline, evidence
//     and entries stay readable, an archived workspace is ineligible everywhere
//     (design §6), and a late record of an older version is still recognised as older
//     and ignored instead of resurrecting the workspace. A ticket system that
//     re-creates a deleted workspace publishes it with a newer version.
//   - Offsets are committed only after the database transaction committed (manual
//     commits, rebalances blocked while a batch is applied), so a crash replays
//     records rather than losing them.
//   - A record that cannot be applied — undecodable, of an unknown or newer schema,
//     whose key is not its workspace id, or that fails validation (ValidateRecord) —
//     is parked in the dead-letter topic with a reason code and the consumer moves on.
//     So is a record the database rejects as data (store.ErrInvalid, a constraint),
//     with reason rejected_by_store. A replay parks such records again. The
//     future-creation-time rule is judged by the consumer's clock when the record is
//     applied, so a record parked for it would be accepted by a much later replay.
//   - A database outage is retried with exponential backoff capped at MaxBackoff,
//     indefinitely: the feed stalls, in order, rather than skip. Any other failure
//     (the dead-letter topic cannot be written, a permission error) stops Run with the
//     error, leaving the record uncommitted.
//   - A restart resumes from the committed offsets; a new consumer group reads the
//     compacted topic from the start and converges to the same tables.
//
// The feed is authoritative for the workspaces it carries: the next version of a
// workspace replaces the bindings an administrator made by hand.
//
// # Administration
//
// [Admin] creates or replaces a workspace, changes its status, binds and unbinds a
// chat, and lists the bindings of a chat, directly on Postgres; the CLI calls it.
// [Handler] serves the same operations as JSON under /api/v1/admin, behind its own
// admin token (HandlerOptions.AdminTokenSHA256: the SHA-256 is compared in constant
// time; without a configured token every request is refused with 403
// admin_disabled; a missing token is 401 missing_token, a wrong one 403
// invalid_token).
// Errors are {"error":{"code":"…","message":"…"}} with the stable Code* values.
//
// An administrator's create or update bumps the workspace's feed version by one;
// a status change keeps it (a newer feed record still wins).
//
// # Changes take effect without restarts
//
// Every path — feed, admin function, admin API — commits its change together with
// a NOTIFY on store.BindingsChannel for each chat whose bindings or bound workspace
// changed. Ingestion's binding resolver listens there (store.ListenBindings), so a
// new binding is honoured by the event path as soon as the notification arrives, and
// a workspace that leaves firing (recovered, archived, or deleted by a tombstone)
// fails the eligibility checks (design §6) of ingestion and reconciliation from then
// on. Those checks belong to the ingestion and reconciliation packages; this package
// guarantees that the change is committed and announced in one transaction. A
// workspace with no bound chats has nothing to announce and needs nothing.
//
// # Validation
//
// Input is checked before anything is written, on every path, with errors wrapping
// [ErrInvalid] (a [*FieldError] naming the field): an unknown status (firing,
// recovered, archived), a chat id that is not a Lark chat id (oc_…), a binding to a
// missing workspace (also [ErrWorkspaceNotFound]), a creation time later than now
// plus a clock-skew allowance (DefaultClockSkew), an empty or malformed type, more
// than MaxChats chats, a duplicate chat, a non-positive version.
//
// # Bounds
//
// The package decides no eligibility and keeps no cache: resolvers read the store.
// The Postgres Applier writes the store's tables itself, because the store has no
// single-transaction "update workspace and replace its bindings" operation; it keeps
// the store's version rule and NOTIFY contract. Logs carry workspace and chat ids,
// versions, offsets and reason codes, never tokens or raw records. Metrics:
// larkline_workspaces_feed_records_total{outcome}, _feed_dead_lettered_total{reason},
// _feed_retries_total{operation}, _feed_fetch_errors_total, _feed_commit_errors_total,
// larkline_workspaces_published_total{result} and
// larkline_admin_requests_total{route,code}.
package workspaces
