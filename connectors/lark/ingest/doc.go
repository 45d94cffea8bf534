// Package ingest is larkline's Lark event path (design §6, §6.1, §7, §9): it turns
// im.message.receive_v1 and im.message.recalled_v1 callbacks into evidence records on
// the evidence topic and acknowledges a callback only after Kafka acknowledged every
// record of it.
//
// # Pieces
//
//   - Ingester: the path shared by both transports. normalize (package normalize) →
//     resolve the eligible bound workspaces (package bindings) → one Avro
//     schemas.EvidenceRecord per workspace, keyed <workspace>/<chat>/<message> and
//     placed by the shared partitioner of the producer's client → ProduceSync, which
//     waits for acks=all → an optional in-process wakeup (Options.Notify). A recall
//     becomes the redacted version of the message (normalize.Redact: no text,
//     deleted, a new hash) in every eligible workspace. The message a recall names is
//     taken from a bounded index of recently ingested messages or, failing that, from
//     Lark's get-message API (MessageLookup), bounded by RecallLookupTimeout; a recall
//     that overtakes its message is remembered, so the late delivery is stored
//     redacted. The callback never calls a model, never fetches attachments and never
//     calls the contact API.
//   - Webhook: the http.Handler Lark posts to, on the SDK's pieces (EventDecrypt,
//     Signature, the typed P2MessageReceiveV1 and P2MessageRecalledV1) without its
//     dispatcher, which formats every body into a debug line and parses it four
//     times. It adds what the SDK lacks: the body is bounded; a signature, when present, is checked in constant
//     time before anything is decrypted, and with an encrypt key an unsigned body is
//     never decrypted (refused at once) unless WebhookOptions.URLVerification is on
//     to answer Lark's unsigned url_verification; header.token must equal the verification token for events
//     too (the SDK checks it for url_verification only); X-Lark-Request-Timestamp
//     must lie within MaxTimestampSkew; an event id acknowledged within that window
//     (a replayed request, or Lark redelivering an answered event) is answered 200
//     without producing anything (a bounded set of seen ids, MaxSeenEvents, kept per
//     process until each request's timestamp would be refused; ignored/replayed_event);
//     unknown event types are counted; the answer is JSON; every rejected request gets
//     the same answer (400, {"msg":"rejected"}) whichever check refused it.
//   - LongConn: the SDK's long-connection client (larkws.Client) wrapped so that it
//     can be watched and stopped: see its documentation for the liveness watchdog,
//     the reconnect backoff, the drain on shutdown and the goroutines the SDK leaks.
//   - Contacts: a bounded cache of sender names filled in the background by
//     rate-limited batch lookups (larkapi.Client.Names: contact/v3/users/batch, 50 ids per
//     call), consulted without blocking when a record is built.
//
// # Answers
//
// Every callback ends in one outcome, counted in larkline_lark_events_total{outcome,
// reason}:
//
//	outcome   acknowledged  webhook status  when
//	accepted  yes           200             evidence produced and acknowledged by Kafka
//	ignored   yes           200             retrying cannot help: unbound chat, workspace
//	                                        not firing / too old / type not enabled /
//	                                        newer than the message, p2p chat, unsupported
//	                                        message or event type, recall of a message
//	                                        no workspace holds
//	rejected  no            400, always     forged or missing signature, wrong token,
//	                        {"msg":         stale or malformed timestamp, undecryptable or
//	                        "rejected"}     malformed body, missing or invalid ids,
//	                                        malformed content, body or content too large,
//	                                        not a POST: the reason is in the metric and
//	                                        the log only (issue #29)
//	failed    no            503             Kafka, Postgres or the Lark API unavailable, or
//	                                        out of time (Timeout, below Lark's 3 s)
//	                        500             an internal error
//
// A rejected callback is not acknowledged: Lark's console then shows the failing
// deliveries, and the few redeliveries are rejected again at no cost. Over the long
// connection every unacknowledged outcome makes the SDK answer code 500. Nothing is
// produced for an ignored or rejected callback; a failed one may have produced some
// of its records, which the redelivery produces again with the same key and content
// hash (idempotent downstream).
//
// # Bounds
//
// One event produces one record per eligible workspace and holds no more than its
// body (at most MaxBodyBytes). The recent-message index holds RecentMessages redacted
// skeletons (no text). Logs carry event, message, chat and workspace ids, outcomes
// and content hashes — never message text, tokens, keys or raw payloads (the SDK's
// own log is filtered: sdklog.go). Metrics are prefixed larkline_lark_ and labelled
// only by bounded values.
//
// One process-wide side effect: the first NewLongConn installs a dial function on
// gorilla/websocket's DefaultDialer (the only way to own the socket the SDK's client
// opens; see wsDial). Dials that no LongConn is waiting for pass through unchanged.
package ingest
