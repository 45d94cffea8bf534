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
// Both keys hash to the chat's partition. Only windows that received synthesis-eligible
// evidence exist, so an idle chat costs nothing; state is bounded by open windows plus
// one marker per closed window within Options.Retention.
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
// A window value grows with its evidence (each version is ~100 bytes), and every
// update rewrites it; docs/perf.md records what a burst into one window costs.
package windows
