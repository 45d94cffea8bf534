// Package chats tells what kind of Lark chat a chat id is, so that larkline keeps to
// group chats (design §6: "the message belongs to a group or topic-group chat").
//
// The event path knows a message's chat type from the event itself
// (normalize.ReasonP2PChat). History items carry no chat type, and neither does a
// binding, so reconciliation and the binding paths (admin API, CLI, workspace feed)
// ask the chat info API (GET /open-apis/im/v1/chats/:chat_id, field chat_mode:
// "group", "topic" or "p2p") through a [Guard]:
//
//   - Check answers nil for a group or topic group, an error wrapping [ErrP2PChat] for
//     a single chat, one wrapping [ErrUnsupportedChat] for any other or missing mode
//     (both wrap [ErrRefused]), and another error when Lark could not be asked; callers
//     fail closed on it (reconciliation reads nothing, the admin API refuses the bind).
//   - Answers are cached per chat for Options.TTL (default 6 h: a chat's mode does not
//     change), in at most Options.MaxEntries chats; failures are not cached.
//   - Refusals are counted in larkline_lark_chat_refusals_total{path,reason} (path:
//     reconcile, admin, feed; reason: p2p_chat, unsupported_chat_type) and lookups in
//     larkline_lark_chat_lookups_total{outcome}; no chat id is a label. A refused chat
//     is logged (ids and modes only) once per lookup, not at every check.
package chats
