// Package logtest holds what tests need to read a component's logs: a buffer that
// the component's goroutines write while the test reads it.
//
// It is test support only and imports nothing of larkline, so every package's tests
// may use it (schemas's tests included).
package logtest
