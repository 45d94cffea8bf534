package workspaces

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/larkline/larkline/schemas/ids"
)

// TestAdminRefresh covers POST /api/v1/admin/workspaces/{id}/refresh, the API form of
// `larkline refresh`: it runs the configured refresher, maps its errors, and is
// behind the admin token like every admin route.
func TestAdminRefresh(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	var got []ids.WorkspaceID
	refresh := func(_ context.Context, ws ids.WorkspaceID) (any, error) {
		switch ws {
		case "INC-missing":
			return nil, fmt.Errorf("%w: %s", ErrWorkspaceNotFound, ws)
		case "INC-off":
			return nil, fmt.Errorf("%w: reconciliation disabled", ErrRefreshUnavailable)
		}
		got = append(got, ws)
		return map[string]any{"workspace": ws, "chats": 2}, nil
	}
	with, err := NewHandler(newAdmin(t, st), HandlerOptions{AdminTokenSHA256: tokenDigest(adminToken), Refresh: refresh})
	if err != nil {
		t.Fatal(err)
	}
	without := newHandler(t, st, tokenDigest(adminToken), nil)
	tests := []struct {
		name   string
		h      http.Handler
		token  string
		method string
		path   string
		status int
		code   string
	}{
		{"runs the refresh", with, adminToken, http.MethodPost, "/api/v1/admin/workspaces/INC-1/refresh", http.StatusOK, ""},
		{"unknown workspace", with, adminToken, http.MethodPost, "/api/v1/admin/workspaces/INC-missing/refresh", http.StatusNotFound, CodeWorkspaceNotFound},
		{"reconciliation off", with, adminToken, http.MethodPost, "/api/v1/admin/workspaces/INC-off/refresh", http.StatusServiceUnavailable, CodeRefreshUnavailable},
		{"no reconciler in the process", without, adminToken, http.MethodPost, "/api/v1/admin/workspaces/INC-1/refresh", http.StatusServiceUnavailable, CodeRefreshUnavailable},
		{"bad workspace id", with, adminToken, http.MethodPost, "/api/v1/admin/workspaces/bad%20id/refresh", http.StatusBadRequest, CodeInvalidField},
		{"GET is not allowed", with, adminToken, http.MethodGet, "/api/v1/admin/workspaces/INC-1/refresh", http.StatusMethodNotAllowed, CodeMethodNotAllowed},
		{"needs the admin token", with, "", http.MethodPost, "/api/v1/admin/workspaces/INC-1/refresh", http.StatusUnauthorized, CodeMissingToken},
		{"wrong token", with, "nope", http.MethodPost, "/api/v1/admin/workspaces/INC-1/refresh", http.StatusForbidden, CodeInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := apiClient{t: t, h: tt.h, token: tt.token}.do(tt.method, tt.path, "")
			if r.code != tt.status {
				t.Fatalf("status %d, want %d: %s", r.code, tt.status, r.body)
			}
			if tt.code != "" {
				if c := r.errorCode(t); c != tt.code {
					t.Fatalf("code %q, want %q", c, tt.code)
				}
			}
		})
	}
	if len(got) != 1 || got[0] != "INC-1" {
		t.Fatalf("refresher ran for %v, want exactly INC-1 once", got)
	}
}
