// Package testenv gives larkline's integration tests a real Kafka broker and
// a real PostgreSQL server, one of each per test binary, started on first use
// and stopped when the binary ends.
//
// Use it from TestMain and from the tests:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		topic := testenv.NewTopic(t, 3, nil)   // unique, deleted at cleanup
//		brokers := testenv.KafkaBrokers(t)
//		dsn := testenv.PostgresDSN(t)          // a fresh, empty database of its own
//		...
//	}
//
// # Selection order
//
// Kafka: LARKLINE_TEST_KAFKA_BROKERS (an existing broker, e.g. the one the
// runner started) → a Docker container via testcontainers-go, only when a
// Docker engine answers → the "jvm" broker, a real KRaft Apache Kafka run from
// Maven Central jars by deploy/kafka/kafka-jvm.sh on free loopback ports →
// "embedded" kfake, an in-process fake, announced by a loud warning on stderr
// and refused when LARKLINE_TEST_REQUIRE_REAL=1.
//
// PostgreSQL: LARKLINE_TEST_PG_DSN → Docker → "local", a throwaway cluster
// made with the machine's initdb/pg_ctl on a free port (as the postgres user
// when running as root) → "embedded" (embedded-postgres; not as root).
//
// LARKLINE_TEST_KAFKA=external|docker|jvm|embedded and
// LARKLINE_TEST_PG=external|docker|local|embedded force one kind; when the
// forced kind cannot start, every test that asks for the service fails. There
// is never a fallback from a forced kind, and tests never skip for want of a
// service. The selection rules live in package provision; docs/testing.md
// describes them for people.
//
// # Sharing and isolation
//
// Services start lazily: a test binary that never calls KafkaBrokers, NewTopic
// or PostgresDSN starts nothing. Once started, a service is shared by all
// tests of the binary, and tests isolate themselves by name: NewTopic returns
// a topic no other test uses, and PostgresDSN a database (t_<random>) no other
// test uses, both removed at the test's cleanup, so tests may run with
// t.Parallel. To start each service once for many test binaries, run them
// under the runner, internal/testenv/cmd/testenv, which exports the
// LARKLINE_TEST_* variables that make every binary adopt its services.
//
// # Bounds
//
// Starting a service is bounded by five minutes (a first run may fetch the
// broker jars with Maven); a failure is sticky: every later test in the binary
// fails with the same error instead of retrying. Main stops the services after
// the tests; if the binary dies first (go test -timeout, a signal), a reaper
// process started with each service stops it and deletes its data within
// about a second. PostgresDSN needs PostgreSQL 13 or newer (DROP DATABASE ...
// WITH (FORCE)) and a superuser DSN.
package testenv
