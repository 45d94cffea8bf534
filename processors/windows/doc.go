// Package windows is larkline's window processor: a Goka group per processor version
// (larkline-windows-<version>) that consumes the evidence topic, keeps the evidence of
// every open fixed UTC window per chat in its group table, and emits one record per
// window to the closed-window topic once the window is due.
//
// # State
//
// The group table holds a chat value under <workspace>/<chat> (its open windows and its
// collection coverage) and a window value under <workspace>/<chat>/window/<start> (the
// ordered (message, content_hash) versions it holds, or, once closed, a small marker).
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
// # Delivery
//
// Kafka gives at-least-once: a redelivered evidence version changes nothing, an edit
// updates the window, and a redelivered close is ignored. A crash between emitting a
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
package windows
