// Package provision selects, starts and stops the Kafka broker and PostgreSQL
// server that larkline's integration tests run against.
//
// It is the process-level half of the test harness: [StartKafka] and
// [StartPostgres] each return a [Service] (what was chosen, where it listens,
// and how to stop it). Package testenv builds its per-test helpers on top of
// it, and the runner in internal/testenv/cmd/testenv uses it to start each
// service once for every test binary of a `go test ./...` run.
//
// # Selection
//
// Kafka is taken from the first of these that works:
//
//  1. external — LARKLINE_TEST_KAFKA_BROKERS (comma-separated host:port list).
//     LARKLINE_TEST_KAFKA_KIND tells what those brokers really are (the runner
//     exports it); without it they are reported as "external".
//  2. docker — a broker container (image LARKLINE_TEST_KAFKA_IMAGE, default
//     apache/kafka:4.1.1) via testcontainers-go, tried only when a Docker engine
//     answers a ping within a second.
//  3. jvm — a real KRaft broker run from Maven Central jars by
//     deploy/kafka/kafka-jvm.sh on free loopback ports; needs Java 17+ (and
//     Maven once, to fill the jar cache).
//  4. embedded — an in-process kfake cluster. kfake is a fake: a loud warning
//     goes to stderr, and LARKLINE_TEST_REQUIRE_REAL=1 turns this choice into
//     an error ([ErrNotReal]).
//
// PostgreSQL likewise: external (LARKLINE_TEST_PG_DSN, kind in
// LARKLINE_TEST_PG_KIND) → docker (image LARKLINE_TEST_PG_IMAGE, default
// postgres:15-alpine) → local (a throwaway cluster made with the machine's
// initdb and pg_ctl on a free port, fsync off; run as the "postgres" user when
// the caller is root, since initdb refuses root; LARKLINE_TEST_PG_BIN names the
// binaries directory) → embedded (fergusstrange/embedded-postgres, which
// downloads real PostgreSQL binaries; not usable as root).
//
// LARKLINE_TEST_KAFKA=external|docker|jvm|embedded and
// LARKLINE_TEST_PG=external|docker|local|embedded force one kind. A forced kind
// that cannot start is an error: there is never a fallback from a forced kind.
// Without forcing, a kind whose prerequisites are missing ([ErrUnavailable]:
// no engine, no java, no initdb) is skipped quietly and one that fails to
// start is skipped with a warning; when none works the error lists every
// attempt ([ErrNoService]).
//
// # Bounds
//
// Every start is bounded by the caller's context plus internal limits (Docker
// probe 1 s, broker listener 90 s, PostgreSQL start 60 s, readiness checks
// 60 s). Services started here listen on 127.0.0.1 only, keep their data in a
// fresh temporary directory, and are stopped by [Service.Close], which also
// removes that directory. If the owning process dies without calling Close
// (a test binary killed by `go test -timeout`, SIGKILL), a detached reaper
// process notices within a second and stops the broker or cluster and removes
// its data, so nothing outlives the test run. Docker containers are reaped by
// testcontainers' own reaper. Services named by the environment (external)
// are never stopped.
//
// The package runs on Linux and other Unix systems; it is not a production
// component and is imported only by tests and the test runner.
package provision
