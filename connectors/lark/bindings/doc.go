// Package bindings answers, for one Lark chat and one message time, the question the
// event path asks for every message: into which workspaces must this message go
// (design §6, §6.1)?
//
// A message is evidence in every bound workspace that is eligible (type allowed,
// firing, created within the lookback, not newer than the message), and in no other;
// eligibility is computed on every call from cached bindings and the current clock.
// The bindings come from Postgres through a bounded LRU cache (negative entries too,
// one shared query per miss); Run LISTENs on store.BindingsChannel and drops a chat's
// entry on each notification, so a binding change is seen by the next message without
// a restart, with a short fallback TTL whenever the LISTEN session is down.
//
// The package never writes to the database or sees message content. docs/operations.md
// ("How ingestion resolves a chat's workspaces") has the eligibility rules in their
// order, the cache's rules, the remaining race and the bounds.
package bindings
