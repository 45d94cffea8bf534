// Package testkafka gives a test a franz-go client with larkline's production
// settings (kafka.NewClientOptions: acks=all, idempotent, the shared partitioner)
// on the test broker, closed at the test's cleanup.
//
//	cl := testkafka.Client(t, kafka.Options{})                  // testenv's broker
//	cl := testkafka.Client(t, kafka.Options{Brokers: brokers})  // another one
//
// It is a package of its own, not part of testenv, because internal/kafka's own
// tests use testenv: testenv importing internal/kafka would make an import cycle.
package testkafka
