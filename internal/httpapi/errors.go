package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/larkline/larkline/internal/store"
)

// Error codes. Every API error is answered as
//
//	{"error":{"code":"<code>","message":"<text for people>"}}
//
// The code is stable and meant for programs; the message may change.
const (
	// 400
	codeInvalidWorkspaceID = "invalid_workspace_id"
	codeInvalidEntryID     = "invalid_entry_id"
	codeInvalidLimit       = "invalid_limit"
	codeInvalidCursor      = "invalid_cursor"
	codeInvalidSince       = "invalid_since"
	codeInvalidBody        = "invalid_body"
	codeInvalidField       = "invalid_field"
	codeEmptyPatch         = "empty_patch"
	codeInvalidVersion     = "invalid_version"
	// 401
	codeMissingToken = "missing_token"
	codeInvalidToken = "invalid_token"
	// 403
	codeAPIDisabled        = "api_disabled"
	codeForbiddenWorkspace = "forbidden_workspace"
	codeForbiddenScope     = "forbidden_scope"
	// 404
	codeNotFound                = "not_found"
	codeWorkspaceNotFound       = "workspace_not_found"
	codeEntryNotFound           = "entry_not_found"
	codeSummaryNotFound         = "summary_not_found"
	codeEvidenceListingDisabled = "evidence_listing_disabled"
	codeVersionNotFound         = "version_not_found"
	// 405, 413, 415
	codeMethodNotAllowed     = "method_not_allowed"
	codeBodyTooLarge         = "body_too_large"
	codeUnsupportedMediaType = "unsupported_media_type"
	// 500, 503
	codeInternal         = "internal"
	codeStoreUnavailable = "store_unavailable"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: message}})
}

// writeJSON answers v as JSON. API answers hold incident data: never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		// Only a programming error (an unencodable type) gets here.
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"response encoding failed"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// storeFailure answers an unexpected store error: 503 store_unavailable when
// store.IsRetryable says a retry may succeed (with Retry-After), 500 internal
// otherwise. The log line carries the route, ids and the error's class, never the
// error text, which for a rejected statement may quote the values written.
func (s *Server) storeFailure(w http.ResponseWriter, r *http.Request, op string, err error, attrs ...slog.Attr) {
	if r.Context().Err() != nil {
		// The client went away; nobody reads an answer.
		return
	}
	status, code, msg := http.StatusInternalServerError, codeInternal, "internal error"
	retryable := store.IsRetryable(err)
	if retryable {
		status, code, msg = http.StatusServiceUnavailable, codeStoreUnavailable, "the database is unavailable; retry later"
		w.Header().Set("Retry-After", "1")
	}
	attrs = append(attrs, slog.String("op", op), slog.String("route", r.Pattern),
		slog.Int("status", status), slog.Bool("retryable", retryable), slog.String("cause", errorClass(err)))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		attrs = append(attrs, slog.String("sqlstate", pgErr.Code))
	}
	s.log.LogAttrs(r.Context(), slog.LevelError, "timeline API store call failed", attrs...)
	writeError(w, status, code, msg)
}

// errorClass names the kind of a store error for logs without its text.
func errorClass(err error) string {
	var (
		pgErr   *pgconn.PgError
		connErr *pgconn.ConnectError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &pgErr):
		return "postgres"
	case errors.As(err, &connErr) || errors.As(err, &netErr):
		return "connection"
	case errors.Is(err, store.ErrTooMany):
		return "too_many_rows"
	case errors.Is(err, store.ErrInvalid):
		return "invalid"
	}
	return "other"
}
