// Package evidence is the one evidence producer of the Lark connectors: the event path
// (ingest) and history reconciliation (reconcile) both turn a normalized message into
// evidence records and produce them through a [Writer], and both resolve a chat to the
// workspaces that may receive it through the one [Eligibility] seam.
//
// A Writer builds one record per target workspace (normalize.Message.Evidence, the
// schema's codec, the key <workspace>/<chat>/<message>), stamps it with the observed
// time (franz-go measures a delivery timeout from the record timestamp, and a message
// read from history may be days old). Two waits, one for each caller's guarantee:
//   - [ProduceAll] returns once Kafka answered every record, so the results are
//     complete: reconciliation takes its read-your-writes barrier (the evidence end
//     offset its next checkpoint carries) from them.
//   - [Writer.Produce] (the event path) also stops waiting when ctx ends. franz-go's
//     idempotent producer does not give up a request already sent (that would break
//     its sequence numbers), so the produce may outlive ctx; the wait does not, and
//     the records are reported abandoned ([ErrAbandoned]): the event is not
//     acknowledged to Lark, which delivers it again as the same version.
//
// Bounds: one batch in flight per call; no retries (callers decide with
// kafka.IsRetryable); no logging; names are read from the cache, never looked up.
package evidence
