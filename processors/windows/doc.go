// Package windows is larkline's window processor: a Goka group per processor version
// (<prefix>-windows-<version>) that consumes the evidence topic, keeps every chat's
// open fixed UTC windows in its group table, and has one closed-window record
// (schema version 3) emitted per window once the window is due.
//
// The table holds one small value per chat (counters per open window, no message ids),
// so a window's size costs nothing but its counter. It relies on Goka v1.1.14's
// guarantees only (decisions D8): every callback makes exactly one table write, the
// scan writes nothing, a close freezes the window in the table and the publisher emits
// the record from the changelog, so every copy is byte-identical. A window closes
// after its grace, behind the input barrier (decisions D23) and, when required, behind
// the chat's collection checkpoint. machine.go holds the logic as pure functions;
// sim_test.go crashes it after every effect.
//
// docs/operations.md ("How the window processor closes a window") has the state, the
// crash-safety rules, the closing conditions and the records' bounds.
package windows
