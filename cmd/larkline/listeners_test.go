package main

import (
	"net/http"
	"testing"
)

// TestSeparateListeners (issue #29): with its own address the timeline API is served
// there and only there, next to nothing of the ops listener (/metrics, /readyz), and
// the ops listener no longer serves the API.
func TestSeparateListeners(t *testing.T) {
	cfg := roleConfig(t)
	cfg.HTTP.APIListen = "localhost:0" // another address than http.listen: its own listener
	openTestStore(t, cfg)
	r, _ := startTestRoles(t, cfg, "api")
	if r.rt.apiSrv == r.rt.ops {
		t.Fatal("the API shares the ops listener although its address differs")
	}
	ops, api := "http://"+r.rt.ops.Addr().String(), "http://"+r.rt.apiSrv.Addr().String()
	tests := []struct {
		url  string
		want int
	}{
		{api + "/api/v1/workspaces/ws-1/timeline", http.StatusForbidden}, // served: api_disabled, no tokens configured
		{api + "/metrics", http.StatusNotFound},
		{api + "/readyz", http.StatusNotFound},
		{ops + "/api/v1/workspaces/ws-1/timeline", http.StatusNotFound},
		{ops + "/metrics", http.StatusOK},
	}
	for _, tc := range tests {
		resp, err := http.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s = %d, want %d", tc.url, resp.StatusCode, tc.want)
		}
	}
}
