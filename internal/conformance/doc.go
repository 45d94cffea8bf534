// Package conformance is the one delivery-guarantee suite that every Kafka-facing
// stage of larkline passes: the window processor, the workspace feed consumer, the
// evidence sink and the synthesis worker. It is a test-support package: only _test
// files import it.
//
// A stage is adapted once, in a *_conformance_test.go file of its own package, as a
// [Stage]; then
//
//	func TestConformance(t *testing.T) { conformance.Run(t, myStage{}) }
//
// runs the properties redelivery, ordering_per_key and restart on the real broker
// (and Postgres) of package testenv, comparing the stage's observed effect with what
// the adapter expects, as multisets of canonical lines: a duplicate is a line too
// many. The suite first checks that the adapter's Expect can fail, never sleeps
// (it waits for the group's commits, [CaughtUp]) and creates no topics itself. The
// package's TestMain must call testenv.Main.
//
// docs/testing.md ("The delivery-guarantee suite") has the model, each property
// step by step, the waiting rule and what the suite leaves to the stages' own tests.
package conformance
