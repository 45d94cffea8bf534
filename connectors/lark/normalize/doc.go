// Package normalize turns one Lark (Feishu) group-chat message into larkline's
// normalized evidence form (design §7.3, §7.4, §9). It is pure: no I/O, no clock, no
// logging, no metrics; the event handler and the history reconciler both call it, so a
// message read from either transport normalizes to the same text and the same hash.
//
// # Input
//
// Input is transport-independent. FromReceiveEvent adapts an im.message.receive_v1
// event and FromHistoryMessage an item of the message history API; they absorb the
// differences between the two (millisecond strings, sender id shapes, mention id
// shapes, the history API's missing chat_type, deleted/updated flags).
//
// # What Normalize does
//
//   - validates identifiers (message, chat, thread, root, parent, sender) and rejects
//     single chats, unknown message types, malformed content and implausible times with
//     typed sentinel errors (ErrMissingID, ErrInvalidID, ErrUnsupportedChatType,
//     ErrUnsupportedMessageType, ErrMalformedContent, ErrContentTooLarge,
//     ErrInvalidTimestamp). Reason maps any of them to a bounded metrics label. Error
//     texts carry ids but never message text;
//   - renders every message type Lark documents (text, post in both its received and
//     its locale-wrapped shape, image, file, folder, audio, media/video, sticker,
//     interactive, hongbao, calendar types, share_chat, share_user, system, location,
//     video_chat, todo, vote, merge_forward) to plain text: mention placeholders become
//     "@name", attachments become bracketed markers such as "[file] name", a card
//     keeps its title only. The text is cleaned (no control characters, valid UTF-8, trimmed) and cut at
//     a rune boundary to Options.MaxTextBytes with TruncationMarker;
//   - copies only whitelisted metadata (the Meta* keys: chat, thread, reply, type,
//     attachment keys, file names, mention open_ids) — never tokens, never the envelope;
//   - computes ContentHash over the semantic content only (type, whole text, attachment
//     references, deletion flag), so a redelivery or the history copy of a message hashes
//     the same and an edit or a recall does not;
//   - decides synthesis eligibility (design §7.3): messages of larkline's own app,
//     interactive cards, attachment-only, reference-only, system, merge_forward
//     containers, red packets, deleted and empty messages stay evidence but are flagged
//     with an Ineligible* reason.
//
// Redact produces the recalled version of a message; Normalize returns it directly for
// history items marked deleted.
//
// # Bounds
//
// Content larger than Options.MaxContentBytes is rejected. Memory per call is bounded
// by the content size plus MaxTextBytes; metadata lists hold at most 50 items, names and
// file names are cut to a few hundred bytes. The package does not resolve sender names
// (the contacts cache does), fetch attachments, or interpret cards beyond their title.
package normalize
