// Package configtest asserts the problems a configuration error lists, for the
// tests of config and of the commands that load configurations. It does no I/O.
package configtest
