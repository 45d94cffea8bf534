// Package windows is larkline's window processor: a Goka group per processor version
// (larkline-windows-<version>) that consumes the evidence topic, keeps the evidence of
// every open fixed UTC window per chat in its group table, and emits one record per
// window to the closed-window topic once the window is due.
//
// # State
//
// The group table holds a chat value under <workspace>/<chat> (its open windows and its
// collection coverage) and a window value under <workspace>/<chat>/window/<start> (the
// ordered (message, content_hash, source_updated_at, deleted) versions it holds, or,
// once closed, a small marker).
// Large windows also have page keys (see Bounds). All keys hash to the chat's
// partition. Only windows that received synthesis-eligible evidence exist, so an idle
// chat costs nothing; state is bounded by open windows plus one marker (and, for a
// large window, its pages) per closed window within Options.Retention.
//
// # Closing
//
// A window is due when window_end + Grace has passed on the wall clock and, with
// RequireCoverage, when the chat collection checkpoint (read from the compacted
// checkpoint topic, co-partitioned with the evidence topic) covers window_end. A watcher
// visits the whole state every ScanInterval, and earlier when a callback learns of an
// earlier due time or Wakeup is called, so quiet chats close too. Windows of one chat
// close oldest first. A close emits the record and replaces the window with its marker
// in the same callback; evidence for a closed window is counted as late and never
// reopens it.
//
// # Evidence barrier
//
// Goka reads the checkpoint and evidence topics independently, so a processor that
// lags on evidence could see a checkpoint before the evidence reconciliation
// produced ahead of it, and close a window without a recovered message. A
// checkpoint carries one past the highest offset of that evidence on the chat's
// partition (schemas.CollectionCheckpoint.EvidenceEndOffset); its coverage is held
// in the chat state until the processor has processed the evidence partition up to
// there, by this life's own count (kept in memory by the evidence callback: no
// state write per record) or by the group's committed offset, which the watcher
// reads through Options.CommittedOffsets at most once per ScanInterval and only
// while some coverage is held (no I/O in callbacks). A later checkpoint's barrier
// includes the earlier ones; at most 8 held checkpoints per chat are kept apart,
// more are merged. Held coverage is re-checked on every checkpoint and at every
// scan; larkline_windows_barrier_held counts the windows it holds.
//
// # Delivery
//
// Kafka gives at-least-once: a redelivered evidence version changes nothing, an edit
// updates the window, and a redelivered close is ignored. Of the versions of one
// message a window keeps the newest by the evidence table's version rule
// (schemas.EvidenceRank: a recall outranks a live version, then the later
// source_updated_at; equal ranks go by arrival), so a late redelivery of an original
// never replaces the edit the evidence sink keeps, and the closed record names each
// version with its rank for the synthesis evidence wait. State written before format
// 3 has no ranks; its versions replace by arrival as before. A crash between emitting a
// closed record and storing the marker re-emits the same record after recovery;
// consumers deduplicate by window key. Records that cannot be decoded are parked in the
// dead-letter topic and the processor keeps going.
//
// # Bounds
//
// One update reads and rewrites at most two pages of evidence refs (~100 bytes
// each), whatever the size of the window: a window keeps up to a page (64 refs) in
// its own value and seals each full page into a key of its own
// (<window key>/page/<n>). After the first acknowledged page, a version that is not
// in the window's own value is logged rather than classified (metric outcome
// "logged"), and the versions are folded in arrival order when the window closes,
// which gives the same closed record as an unpaged window. A paged window's close
// walks its pages in order, one loop record each; pages are dropped with the
// window's marker after Options.Retention. docs/perf.md records the throughput.
//
// The page bound holds while a sealed page's acknowledgement comes back before the
// window takes in much more evidence. Under a burst into one chat, the evidence
// loopbacks of the whole burst queue on the loop topic ahead of the acknowledgement,
// and the window's own value grows until it arrives: a 3,000-message burst produced
// at once grew it to ~2,900 refs, so updates cost O(window) and the burst is taken in
// in quadratic time. Records are bounded all the same (below).
//
// Record sizes: a closed-window record carries one entry per message, the fold's last
// loop record nearly all of the window's refs, and under a burst a window value holds
// up to all of them; the last two take fewer bytes per message than the first. The
// closed record is bounded by Options.MaxRecordBytes (kafka.MaxRecordBytes, 16 MiB:
// every window of up to 50,000 Lark messages; package kafka derives the figures);
// one above it stops the processor with ErrRecordTooLarge. The
// producer (kafka.NewGoka), the closed-window and dead-letter topics
// (kafka.DefaultTopicSpecs) and the group's loop and table topics (created or raised
// by kafka.NewGoka's topic manager) accept kafka.MaxBatchBytes.
package windows
