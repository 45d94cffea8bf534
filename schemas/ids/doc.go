// Package ids defines larkline's typed identifiers and the keys built from them.
//
// Every key that crosses a stage boundary is built here and only here:
//
//   - the evidence record key     <workspace>/<chat>/<message>
//   - the partition key            <workspace>/<chat> (what the partitioner hashes)
//   - the evidence source_key      chat/<chat>/message/<message>
//   - the checkpoint source_key    chat/<chat>
//   - the window source_key        chat/<chat>/window/<start RFC 3339>, or
//     chat/<chat>/processor/<version>/window/<start> for a versioned rerun.
//
// Typed ids (WorkspaceID, ChatID, MessageID) make it a compile error to pass a chat
// where a workspace belongs. Parse functions validate external input: ids are bounded in
// length and never contain '/', so keys split back unambiguously.
package ids
