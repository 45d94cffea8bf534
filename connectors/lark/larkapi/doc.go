// Package larkapi is larkline's one client of the Lark (Feishu) Open API: the calls
// the pipeline makes, the error they fail with and the one rule that says whether a
// failure may pass when repeated.
//
//   - [Client] wraps the official SDK client (lark.Client, which fetches and renews the
//     tenant access token itself): [Client.Names] (contact users batch),
//     [Client.GetMessage] (one message), [Client.ListMessages] (the message history
//     API, one page per call) and [Client.GetChat] (the chat info API). Each sends one
//     request and never retries: the callers (ingest's contacts cache, the
//     reconciler, the chat-type guard) rate-limit, retry and count.
//   - [APIError] is every failed call: no answer (Err set), or Lark's HTTP status,
//     code and message (bounded to 200 bytes) with its x-ogw-ratelimit-reset as
//     RetryAfter (at most [MaxRetryAfter]). [IsRetryable] is the retry decision of
//     this I/O boundary, [IsRateLimited] the frequency-limit test.
//   - [NewSDK] builds the SDK client with larkline's settings; [SDKLogger] is the
//     sanitizing logger every SDK component gets: payloads, bodies and URL queries
//     never reach the logs, Lark's codes do.
//
// Bounds: one request per call; the page size is at most [MaxPageSize] and a
// contacts batch at most [MaxDirectoryBatch]; error messages are cut to 200 bytes.
// The package keeps no state beyond the SDK client and logs nothing itself.
package larkapi
