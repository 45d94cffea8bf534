// Package windows is larkline's window processor: a Goka group per processor version
// (<prefix>-windows-<version>) that consumes the evidence topic, keeps every chat's
// open fixed UTC windows in its group table, and has one closed-window record
// (schema version 3) emitted per window once the window is due.
//
// # State
//
// The group table holds one value per chat under <workspace>/<chat> (chatValue): the
// highest evidence offset applied (so a redelivered record changes nothing), the
// chat's history coverage and the checkpoints held behind the evidence barrier, a
// bitmap of the windows closed within Options.Retention, and per open window a few
// counters: status (open or closing), evidence version count, lowest and highest
// evidence offset, first and last occurred_at, close time, oversized flag. No message
// ids, pages or window keys: a value grows with the chat's open windows only (at most
// Retention/Window of them), an idle chat costs nothing, and a window's size costs
// nothing but its counter. Evidence for a window that is closing or closed is counted
// as late (larkline_windows_late_records_total) and never reopens or re-emits it; a
// recall alone never opens a window; only synthesis-eligible evidence does.
//
// # Crash safety
//
// What Goka v1.1.14 guarantees, and nothing more, is relied on (docs/decisions.md
// D8): a callback's table write reaches local storage first and the changelog
// asynchronously, its produces are independent, an input offset is marked when that
// message's own produces are acknowledged (marks only move forward), and a visit has
// no offset. So:
//
//   - every evidence record sends exactly one loopback (a note) to its chat key, and
//     every loop, checkpoint and read-back callback makes exactly one table write, even
//     when nothing changed (callbacks.go);
//   - an undecodable record is parked in the dead-letter topic synchronously before its
//     note (DeadLetterWriter);
//   - the scan (VisitAll, every ScanInterval and when a window becomes due) writes
//     nothing: it loops a close decision per due window, oldest first per chat;
//   - a close callback freezes the window's fields in its table write and announces
//     it with a header; no callback emits a closed record. The publisher (publisher.go)
//     reads the table's changelog and emits the record of every announced window, so
//     every copy is byte-identical (a frozen window reaches the changelog once);
//   - the closed-window topic is read back (it is co-partitioned) to move a window from
//     closing to closed; one not read back within Options.ReemitAfter is announced
//     again.
//
// machine.go holds the logic as pure functions; sim_test.go runs it under a model of
// those guarantees and crashes it after every effect.
//
// # Closing
//
// A window is due when window_end + Grace has passed on the wall clock, when its
// evidence partition has applied every record that was in it at that moment (the
// input barrier, barrier.go, docs/decisions.md D23: a processor behind its input
// closes later, never with less) and, with RequireCoverage, when the chat's
// collection checkpoint covers window_end. A
// checkpoint names one past the highest offset of the evidence the reconciler
// produced before it (schemas.CollectionCheckpoint.EvidenceEndOffset); its coverage
// is held until the chat has applied its evidence up to there (read-your-writes
// between the two topics, which Goka reads independently).
//
// # Records and bounds
//
// A closed record of version 3 names the window's evidence as the offset range
// [low, end) of the chat's evidence partition and carries the version count, the
// first and last occurred_at and an oversized flag: under 1 KiB whatever the window's
// size. Synthesis waits until the evidence sink has committed the range's end, then
// reads the window from the evidence table. A window with more than
// Options.OversizedVersions versions is flagged (counted, logged, alerted on), never
// failed. State of a state format this binary does not read is refused with
// ErrStateFormat: replay under a new processor version (larkline replay).
// docs/perf.md records throughput and memory.
package windows
