// Package normalize turns one Lark (Feishu) group-chat message into larkline's
// normalized evidence form (design §7.3, §7.4, §9). It is pure: no I/O, no clock, no
// logging, no metrics; the event handler and the history reconciler both call it, so a
// message read from either transport normalizes to the same text and the same hash.
//
// FromReceiveEvent and FromHistoryMessage adapt the two transports' shapes; Normalize
// validates the ids (typed sentinels, Reason maps them to a bounded label), renders
// every documented message type to bounded plain text, keeps only whitelisted
// metadata, computes ContentHash over the semantic content only (an edit or a recall
// changes it, a redelivery does not) and flags what synthesis must not read with an
// Ineligible* reason. Redact produces a recalled message's version.
//
// docs/operations.md ("How a Lark message becomes evidence") has every rule: the
// inputs, each step of Normalize, the eligibility list and the bounds.
package normalize
