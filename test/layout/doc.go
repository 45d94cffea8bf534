// Package layout holds the test of the project's shape (issue #22, decisions D16):
// imports run one way, cmd → connectors/processors → internal → schemas, with no
// arrow back up and none between connectors and processors, and every package says
// its job in a doc.go. It reads the tree with go list; it starts nothing.
package layout
