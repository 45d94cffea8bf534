// Package conformance is the one delivery-guarantee suite that every Kafka-facing
// stage of larkline passes: the window processor (evidence → closed windows), the
// workspace feed consumer (workspaces → Postgres), the evidence sink (evidence →
// Postgres) and the synthesis worker (closed windows → timeline entries). It is a
// test-support package: only _test files import it.
//
// A stage is adapted once, in a few dozen lines of a *_conformance_test.go file in
// its own package, as a [Stage]; then
//
//	func TestConformance(t *testing.T) { conformance.Run(t, myStage{}) }
//
// runs three properties as subtests named redelivery, ordering_per_key and restart,
// on the real broker (and the real Postgres where the stage writes there) that
// package testenv provides. The package's TestMain must call testenv.Main.
//
// # Model
//
// The suite speaks of entities and versions ([Record]): version v+1 of an entity
// supersedes version v (an evidence message edited, a workspace re-published). The
// adapter turns a Record into the stage's domain record, encoded with the schemas
// codecs and keyed as the pipeline keys it ([Deployment.Message]); the suite
// produces it with larkline's producer settings and partitioner (package kafka).
// The adapter renders the stage's externally visible effect (rows in Postgres,
// records on its output topic) as an [Observation], a multiset of canonical lines
// without the parts that legitimately differ between runs (surrogate ids, wall
// clock stamps), and says what a correct stage shows after receiving given records
// once each ([Deployment.Expect]). Equivalence is equality of the two multisets: a
// duplicated row or a window emitted twice is a line too many.
//
// The entity histories the suite produces interleave keys: entity e has
// 1 + e mod V versions (V = [Stage.Versions], at most 3), produced version round by
// version round, so the last versions differ across entities and any cross-talk
// between keys shows.
//
// # Properties
//
//   - redelivery: a deployment receives a history once; a second, fresh deployment
//     receives every record twice in a row and then the whole history again; then
//     its group's committed offsets are rewound to the start of the input topic and
//     a new instance replays everything. After each step the second deployment's
//     effect must equal the first one's, which must equal Expect.
//   - ordering_per_key: a backlog produced before the stage starts (versions of a
//     key inside one poll) and a live history produced round by round (versions
//     across polls), over an input topic with several partitions. The effect must be
//     Expect of all records: every entity shows its last version, and only its own.
//   - restart: an instance consumes a first part and is stopped; a second part is
//     produced while no instance runs; a new instance in the same group starts, a
//     third part is produced, and the instance is stopped as soon as it committed
//     some progress, without waiting for it to catch up (mid-stream); a last
//     instance takes the rest. Every record's effect must be present exactly once.
//
// Before a deployment is used the suite checks that the adapter's Expect can fail:
// it must show something, show every entity, and show each entity's last version.
// A lazy adapter is a failed test, not a vacuous pass.
//
// # Waiting
//
// The suite never sleeps for a fixed time. Before it observes, it waits until the
// stage's consumer group has committed the end offset of every partition of every
// topic the group consumes ([CaughtUp]); a stage that commits before its effect is
// durable fails, rightly. Waits are bounded (WaitLimit) only so that a broken stage
// fails instead of hanging; nothing asserts on speed.
//
// # Bounds
//
// The suite does not test dead letters, tombstones, outages or rebalances between
// live members; the stages' own tests do. It creates no topics or databases itself:
// adapters do, through testenv, so every deployment is isolated and removed when its
// test ends. It assumes the stage's instances leave their group when stopped.
package conformance
