// Command crashchild runs one window processor from its environment until SIGTERM,
// for the window processor's SIGKILL test (processors/windows, sigkill_test.go): the
// test starts two of them on the real broker and kills them at random.
package main
