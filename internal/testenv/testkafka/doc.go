// Package testkafka gives a test a franz-go client with larkline's production
// settings (kafka.NewClientOptions: acks=all, idempotent, the shared partitioner)
// on the test broker, closed at the test's cleanup, and a produce that fails the test
// rather than hang it when the broker is gone.
//
//	cl := testkafka.Client(t, kafka.Options{})                  // testenv's broker
//	cl := testkafka.Client(t, kafka.Options{Brokers: brokers})  // another one
//	res := testkafka.Produce(t, cl, records...)                 // acknowledged, with offsets
//
// It is a package of its own, not part of testenv, because internal/kafka's own
// tests use testenv: testenv importing internal/kafka would make an import cycle.
package testkafka
