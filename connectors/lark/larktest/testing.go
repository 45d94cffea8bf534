package larktest

import (
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

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

// IncidentForTest returns a scenario of app with one incident workspace ws,
// firing since created and bound to chats: the start most connector tests
// need. A failure fails tb.
func IncidentForTest(tb testing.TB, app App, ws ids.WorkspaceID, created time.Time, chats ...ids.ChatID) *Scenario {
	tb.Helper()
	sc, err := NewScenario(app)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sc.AddWorkspace(Workspace{ID: ws, Type: "incident", Status: "firing", CreatedAt: created}); err != nil {
		tb.Fatal(err)
	}
	for _, c := range chats {
		if err := sc.AddBinding(ws, c); err != nil {
			tb.Fatal(err)
		}
	}
	return sc
}
