// Command testenv starts larkline's test services once and runs a command
// (normally `go test`) against them, so every test binary of the run shares
// one Kafka broker and one PostgreSQL server instead of starting its own.
//
//	testenv run [-kafka=true] [-postgres=true] -- go test -race -shuffle=on ./...
//
// It selects and starts each service exactly as package testenv does (see
// internal/testenv/provision: LARKLINE_TEST_KAFKA, LARKLINE_TEST_PG,
// LARKLINE_TEST_REQUIRE_REAL, ...), exports LARKLINE_TEST_KAFKA_BROKERS,
// LARKLINE_TEST_KAFKA_KIND, LARKLINE_TEST_PG_DSN and LARKLINE_TEST_PG_KIND to
// the command, stops the services when the command ends or when testenv gets
// SIGINT or SIGTERM (which it passes on to the command), and exits with the
// command's exit status. If a service cannot be started, the command is not
// run and testenv exits with status 2.
//
// Bounds: starting the services may take up to five minutes (a first run
// fetches the broker jars with Maven), stopping them up to two. If testenv
// itself is killed outright, Linux sends the command SIGTERM, and each
// service's reaper stops it and removes its data.
package main
