// Package opsserver is the small HTTP server every larkline role runs: it serves
// operational endpoints and lets the role mount its own handlers (the Lark webhook,
// the timeline API, the web page) on the same listener.
//
// Endpoints it owns:
//
//   - GET /metrics — the Prometheus exposition of an injected *prometheus.Registry
//     (never the global one). Without a registry the endpoint is not mounted.
//   - GET /healthz — liveness: 200 while the process serves requests.
//   - GET /readyz — readiness: runs every registered check concurrently, each under its
//     own timeout, and answers 200 when all pass or 503 with a JSON body naming the
//     failing checks. The body carries check names and a failure class only, never the
//     error text (which may name hosts or credentials); errors go to the log. While the
//     server drains after Run's context is cancelled, /readyz answers 503 so a load
//     balancer stops routing to it. An answer is reused for ReadinessCacheTTL and
//     concurrent requests share one run (issue #29).
//   - Options.Bare serves none of these: only what is mounted (the webhook's public
//     listener, the API's).
//
// Lifecycle: [New] validates options and binds the listener (so [Server.Addr] is known
// at once, which tests listening on 127.0.0.1:0 need); [Server.Run] serves until its
// context is cancelled and then shuts down gracefully, letting in-flight requests
// finish within a bounded timeout; [Server.Close] releases the listener and stops
// serving at once.
//
// Bounds: no TLS termination, no authentication, no request body limits — handlers
// mounted with [Server.Handle] own those. Request metrics use the mounted pattern as
// the only label besides the status code, so cardinality is bounded by code.
package opsserver
