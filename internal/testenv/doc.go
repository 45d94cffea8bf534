// Package testenv gives larkline's integration tests a real Kafka broker and
// a real PostgreSQL server, one of each per test binary, started on first use
// and stopped when the binary ends.
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
// Tests isolate themselves by name (a topic, a database t_<random>), so they may run
// in parallel; a service that cannot be had fails the test, never skips it. The
// selection rules (external → docker → jvm/local → embedded, or one forced kind with
// no fallback) live in package provision; the runner internal/testenv/cmd/testenv
// starts each service once for many binaries. docs/testing.md ("How a test gets its
// services", "How the harness chooses", "Bounds of the harness") describes them for
// people.
//
// It also holds the helpers tests would otherwise copy: Eventually and EventuallyNil
// (wait on a condition), Clock (time moved by hand), ReadFirst, ReadTopic,
// EndOffsets and WaitCommitted (the shared broker read back), MetricValue.
package testenv
