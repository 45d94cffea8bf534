// Command testreport reads `go test -json` on standard input, prints the tests'
// output as plain `go test` would, and at the end a report in Markdown: the total
// time, the slowest packages and tests, and, for repeated runs (-count N), every
// test's failures out of its runs.
//
//	go test -json -count 10 ./... | go run ./internal/testenv/cmd/testreport -runs
//
// It exits 1 when a test, a package or a build failed, 2 on input that is not
// test2json, and 0 otherwise. `make test` and `make flakes` use it.
package main
