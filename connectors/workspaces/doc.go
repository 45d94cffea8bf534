// Package workspaces brings workspaces (incidents of a ticket system) and their Lark
// chat bindings into larkline, in the two ways a ticket system integrates, and keeps
// them valid: a Kafka feed and an administrative API.
//
// [Consumer] applies the compacted feed (larkline.workspaces.v1, Avro
// schemas.WorkspaceRecord) through the [Applier], one transaction per record, newer
// versions only, committing offsets after the transaction; [Publisher] writes the
// feed. [Admin] and its HTTP [Handler] (under /api/v1/admin, behind an admin token)
// make the same changes directly on Postgres. Every path validates its input first
// (errors wrap [ErrInvalid]) and commits its change together with a NOTIFY on
// store.BindingsChannel, so ingestion and reconciliation see it without a restart.
//
// The package decides no eligibility and keeps no cache. Logs carry ids, versions,
// offsets and reason codes, never tokens or raw records. docs/operations.md ("How
// workspaces and their bindings come in") has the feed's rules, the admin API's
// answers, the validation rules and the bounds.
package workspaces
