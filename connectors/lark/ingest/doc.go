// Package ingest is larkline's Lark event path (design §6, §6.1, §7, §9): it turns
// im.message.receive_v1 and im.message.recalled_v1 callbacks into evidence records on
// the evidence topic and acknowledges a callback only after Kafka acknowledged every
// record of it.
//
// Ingester is the path both transports share: normalize, resolve the eligible bound
// workspaces, produce one record per workspace and wait for acks=all; a recall becomes
// the redacted version of its message. Webhook is the http.Handler Lark posts to (it
// checks signature, token, timestamp and replays before anything is decrypted or
// produced); LongConn wraps the SDK's long-connection client so it can be watched and
// stopped; Contacts caches sender names filled in the background.
//
// Every callback ends accepted, ignored, rejected or failed, and only the first two
// are acknowledged. Logs carry ids, outcomes and content hashes, never message text,
// tokens, keys or raw payloads. docs/operations.md ("How ingestion handles a Lark
// event") has the pieces in detail, the table of answers and the bounds, including
// the one process-wide side effect (the websocket dial function).
package ingest
