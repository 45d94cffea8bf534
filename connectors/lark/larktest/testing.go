package larktest

import "testing"

// StartForTest builds a server with o, starts it and closes it when tb ends; a
// failure to build or start it fails tb. Like httptest, it is for tests.
func StartForTest(tb testing.TB, o Options) *Server {
	tb.Helper()
	srv, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return srv
}
