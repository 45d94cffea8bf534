// Package provision selects, starts and stops the Kafka broker and PostgreSQL
// server that larkline's integration tests run against.
//
// It is the process-level half of the test harness: [StartKafka] and
// [StartPostgres] each return a [Service] (what was chosen, where it listens,
// and how to stop it). Package testenv builds its per-test helpers on top of
// it, and the runner in internal/testenv/cmd/testenv uses it to start each
// service once for every test binary of a `go test ./...` run.
//
// Each service is taken from the first kind that works (external, docker, then jvm
// or local, then embedded), or from the one kind forced by LARKLINE_TEST_KAFKA /
// LARKLINE_TEST_PG, never falling back from it. A kind whose prerequisites are missing
// is [ErrUnavailable]; the kfake broker under LARKLINE_TEST_REQUIRE_REAL=1 is
// [ErrNotReal]; when nothing works the error lists every attempt ([ErrNoService]).
// A detached reaper stops what a dead owner started. docs/testing.md ("How the
// harness chooses", "Bounds of the harness") has the order, the variables and the
// limits.
package provision
