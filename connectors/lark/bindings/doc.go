// Package bindings answers, for one Lark chat and one message time, the question the
// event path asks for every message: into which workspaces must this message go
// (design §6, §6.1)?
//
// A chat may be bound to several workspaces; a message is evidence in every bound
// workspace that is eligible, and in no other. A bound workspace is eligible for a
// message when all of these hold (design §6, in this order of checking):
//
//   - its type is in the configured allow-list (Options.WorkspaceTypes): ingestion is
//     enabled for that workspace type. Whether ingestion is enabled for the
//     environment at all is the deployment's switch (config EventIngestionActive):
//     a disabled environment does not run the event path;
//   - its status is firing;
//   - it was created within Options.Lookback (72 hours by default) of now;
//   - the message was created no earlier than the workspace.
//
// The chat type (group or topic group, never p2p) is the normalizer's check, made
// before a resolver is asked.
//
// # Cache
//
// Bindings are read from Postgres (store.BindingsForChat) through a bounded LRU cache
// of Options.CacheSize chats, including chats with no binding (a negative entry), so an
// unbound chat costs one query per TTL, not one per message. Eligibility is computed
// on every call from the cached rows and the current clock, so a workspace ages out
// of the lookback without any invalidation. Concurrent misses for one chat share one
// query.
//
// Run keeps the cache coherent: it LISTENs on store.BindingsChannel, on which the
// store announces every change of a binding or of a bound workspace in the
// transaction that makes it. A notification drops that chat's entry, so a binding
// added or removed at run time is seen by the next message, without a restart. While
// listening, an entry lives Options.CacheTTL (a safety net); whenever the LISTEN
// session is down (not yet started, dropped, reconnecting) entries live only
// Options.FallbackTTL, and Run reconnects with capped exponential backoff. When a
// session (re)starts the whole cache is dropped, since changes made meanwhile were not
// heard. A query that raced an invalidation is answered but not cached.
//
// Remaining race: a message handled between a binding's commit and the arrival of its
// notification (milliseconds) still sees the old bindings. Reconciliation (design
// §8) recovers such a message from history; the event path does not try to.
//
// # Bounds
//
// Memory is bounded by CacheSize entries of a chat's bindings. The package issues one
// query per miss, on a goroutine of its own so that it is never cancelled by one
// waiting caller on behalf of the others; it ends within Options.QueryTimeout. Run
// holds one Postgres connection (the LISTEN session) while it runs. It does not write to the database, does not log
// message content (it never sees any), and keeps metrics with bounded labels
// (larkline_lark_binding_*).
package bindings
