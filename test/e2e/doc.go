// Package e2e proves larkline end to end: the design's integration tests (§20), its
// acceptance criteria (§21, each named in a test) and the fault tests of issue #9, run
// against the real `larkline` binary, a real Kafka broker and a real PostgreSQL, with
// larktest as Lark.
//
// # What a test runs
//
// TestMain builds cmd/larkline once. Each test starts its own pipeline: fresh topics and
// consumer groups under a unique kafka.groupPrefix, a fresh database, its own larktest
// server playing a scenario, and the pipeline's stages as separate `larkline run
// --roles …` processes (edge: ingest+api, sink: workspaces+sink, windows, synthesis,
// reconcile), each with its own ops port. A small supervisor restarts a process that
// exits, as Kubernetes would; a test can kill a process (SIGKILL) and keep it down, or
// let it come back. Setup goes through the operator commands (`topics ensure`,
// `migrate`, `workspaces put`, `bind add`), so they are exercised too.
//
// Faults are real: the broker-restart test runs a private JVM broker it stops and
// starts; the Postgres outage is a TCP proxy in front of the database that resets
// every connection and refuses new ones; kills are SIGKILL.
//
// # What every test asserts
//
// The invariants of issue #9: every eligible message is in evidence exactly once per
// bound workspace; every non-empty window reaches exactly one terminal state
// (completed or ignored); no duplicate entries; human entries and the human summary
// are untouched; and the system got there without a person (only the supervisor's
// restarts). Logs of every process are JSON at debug level and are scanned for the
// scenario's message text.
//
// # Bounds
//
// Tests run in parallel, go test's -parallel at a time (make test gives E2E_PARALLEL,
// 4; go test's default is GOMAXPROCS): each is its own
// deployment (topics, groups, database, ports, private brokers), and most of a test's
// time is waiting on window clocks, leases and faults, not CPU. A test takes 5–220 s.
// Nothing here is timed as an assertion: waits have generous deadlines and fail with
// the pipeline's state and log tails.
package e2e
