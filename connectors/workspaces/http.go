package workspaces

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/httpapi"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// AdminPathPrefix is where the admin API lives; mount the Handler on it unchanged
// (its routes are full paths, no prefix stripping).
const AdminPathPrefix = "/api/v1/admin/"

// DefaultMaxBodyBytes bounds an admin request body.
const DefaultMaxBodyBytes = 64 << 10

// Error codes of the admin API ({"error":{"code":…,"message":…}}, the shape and,
// where they mean the same, the codes of the timeline API). They are stable: clients
// and scripts may branch on them.
const (
	CodeMissingToken         = "missing_token"          // 401: no (or a malformed) bearer token
	CodeInvalidToken         = "invalid_token"          // 403: not the admin token
	CodeAdminDisabled        = "admin_disabled"         // 403: no admin token configured
	CodeInvalidBody          = "invalid_body"           // 400: body is not the expected JSON object
	CodeInvalidField         = "invalid_field"          // 400: a field or path id was rejected
	CodeNotGroupChat         = "not_group_chat"         // 400: the chat is a single (p2p) or unsupported chat; only group chats are bound
	CodeChatCheckUnavailable = "chat_check_unavailable" // 503: Lark could not say whether the chat is a group chat, retry
	CodeBodyTooLarge         = "body_too_large"         // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: body is not application/json
	CodeWorkspaceNotFound    = "workspace_not_found"    // 404
	CodeBindingNotFound      = "binding_not_found"      // 404
	CodeNotFound             = "not_found"              // 404: no such route
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeStaleVersion         = "stale_version"          // 409
	CodeStoreUnavailable     = "store_unavailable"      // 503: database unavailable, retry
	CodeInternal             = "internal"               // 500
	CodeRefreshUnavailable   = "refresh_unavailable"    // 503: no reconciler here, or reconciliation disabled
)

// HandlerOptions configure the admin HTTP API.
type HandlerOptions struct {
	// AdminTokenSHA256 is the lower-case hex SHA-256 of the admin token (config
	// http.adminTokenSHA256). Empty disables the API: every request is refused with
	// 403 admin_disabled.
	AdminTokenSHA256 string
	// AdminScopeTokenSHA256 are the hex SHA-256 of the API tokens of scope admin
	// (http.apiTokens[].scope: admin, issue #29): accepted like the admin token. They
	// do not enable a disabled API.
	AdminScopeTokenSHA256 []string
	// MaxBodyBytes bounds request bodies. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives one line per failed request, with the route and ids only,
	// never the token. Nil discards.
	Logger *slog.Logger
	// Registry receives larkline_admin_requests_total. Nil registers nothing.
	Registry *prometheus.Registry
	// Refresh runs the design's manual "Refresh from sources" for one workspace
	// (POST /api/v1/admin/workspaces/{id}/refresh) and returns a JSON-encodable
	// report. Nil: the route answers 503 refresh_unavailable (no reconciler in this
	// process). It returns ErrWorkspaceNotFound for an unknown workspace and
	// ErrRefreshUnavailable when reconciliation cannot run here.
	Refresh func(ctx context.Context, ws ids.WorkspaceID) (any, error)
}

// ErrRefreshUnavailable means no reconciler can serve a manual refresh in this process.
var ErrRefreshUnavailable = errors.New("workspaces: manual refresh unavailable in this process")

// Handler is the admin HTTP API under AdminPathPrefix:
//
//	PUT    /api/v1/admin/workspaces/{id}                  create or replace: {"type","status","created_at"[,"version"]}
//	PATCH  /api/v1/admin/workspaces/{id}                  change the status: {"status"}
//	GET    /api/v1/admin/workspaces/{id}                  the workspace and its chats
//	PUT    /api/v1/admin/workspaces/{id}/chats/{chat_id}  bind a chat
//	DELETE /api/v1/admin/workspaces/{id}/chats/{chat_id}  unbind a chat
//	POST   /api/v1/admin/workspaces/{id}/refresh          manual refresh from Lark history
//	GET    /api/v1/admin/chats/{chat_id}/bindings         the workspaces a chat is bound to
//
// Every request must carry "Authorization: Bearer <admin token>"; the token's
// SHA-256 is compared in constant time with the configured digest. Errors are JSON
// {"error":{"code":"…","message":"…"}} with the Code* constants.
type Handler struct {
	admin   *Admin
	digest  []byte   // nil: disabled
	extra   [][]byte // admin-scope API token digests
	maxBody int64
	mux     *http.ServeMux
	log     *slog.Logger
	m       *adminMetrics

	refreshFn func(ctx context.Context, ws ids.WorkspaceID) (any, error)
}

// NewHandler returns the admin API over a. A malformed AdminTokenSHA256 is an error;
// an empty one gives a handler that refuses every request.
func NewHandler(a *Admin, opts HandlerOptions) (*Handler, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: admin handler: nil Admin", ErrInvalidOptions)
	}
	h := &Handler{admin: a, maxBody: opts.MaxBodyBytes, log: opts.Logger}
	h.maxBody = cmp.Or(h.maxBody, DefaultMaxBodyBytes)
	if h.maxBody < 0 {
		return nil, fmt.Errorf("%w: admin handler: max body bytes %d is negative", ErrInvalidOptions, h.maxBody)
	}
	if opts.AdminTokenSHA256 != "" {
		d, err := hex.DecodeString(opts.AdminTokenSHA256)
		if err != nil || len(d) != sha256.Size {
			// Say nothing of the value: it is a secret's digest.
			return nil, fmt.Errorf("%w: admin handler: admin token SHA-256 must be 64 hex digits", ErrInvalidOptions)
		}
		h.digest = d
	}
	for _, x := range opts.AdminScopeTokenSHA256 {
		d, err := hex.DecodeString(x)
		if err != nil || len(d) != sha256.Size {
			return nil, fmt.Errorf("%w: admin handler: an admin-scope token SHA-256 must be 64 hex digits", ErrInvalidOptions)
		}
		h.extra = append(h.extra, d)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.log = h.log.With("component", "admin_api")
	m, err := newAdminMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	h.m = m
	if h.digest == nil {
		h.log.Warn("admin API disabled: no admin token configured (http.adminTokenSHA256); every request is refused")
	}

	mux := http.NewServeMux()
	const ws, bind, chat = "/api/v1/admin/workspaces/{id}", "/api/v1/admin/workspaces/{id}/chats/{chat_id}", "/api/v1/admin/chats/{chat_id}/bindings"
	mux.HandleFunc("PUT "+ws, h.putWorkspace)
	mux.HandleFunc("PATCH "+ws, h.patchWorkspace)
	mux.HandleFunc("GET "+ws, h.getWorkspace)
	mux.HandleFunc("PUT "+bind, h.bind)
	mux.HandleFunc("DELETE "+bind, h.unbind)
	mux.HandleFunc("GET "+chat, h.bindingsOfChat)
	mux.HandleFunc("POST "+ws+"/refresh", h.refresh)
	// The same paths without a method catch the other methods, so that they get a JSON
	// 405 rather than the mux's plain-text one.
	mux.Handle(ws, methodNotAllowed("GET, HEAD, PUT, PATCH"))
	mux.Handle(bind, methodNotAllowed("PUT, DELETE"))
	mux.Handle(chat, methodNotAllowed("GET, HEAD"))
	mux.Handle(ws+"/refresh", methodNotAllowed("POST"))
	mux.HandleFunc(AdminPathPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "no admin API route for this path")
	})
	h.mux = mux
	h.refreshFn = opts.Refresh
	return h, nil
}

// refresh reconciles one workspace from Lark history now (design §6: manual refresh
// works even for a workspace no longer eligible for automatic scans).
func (h *Handler) refresh(w http.ResponseWriter, r *http.Request) {
	ws, err := ParseWorkspaceID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.refreshFn == nil {
		writeError(w, http.StatusServiceUnavailable, CodeRefreshUnavailable, "manual refresh needs the reconcile role in this process")
		return
	}
	rep, err := h.refreshFn(r.Context(), ws)
	switch {
	case errors.Is(err, ErrRefreshUnavailable):
		writeError(w, http.StatusServiceUnavailable, CodeRefreshUnavailable, err.Error())
	case err != nil:
		h.fail(w, r, err)
	default:
		h.log.Info("manual refresh", "workspace_id", ws)
		writeJSON(w, http.StatusOK, rep)
	}
}

// ServeHTTP authenticates the request, then routes it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, route := h.mux.Handler(r)
	route = cmp.Or(route, "unmatched")
	sw := &httpapi.StatusRecorder{ResponseWriter: w}
	defer func() { h.m.requests.WithLabelValues(route, strconv.Itoa(sw.Status())).Inc() }()
	if code, msg, ok := h.authenticate(r); !ok {
		if code == CodeMissingToken {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="larkline-admin"`)
			writeError(sw, http.StatusUnauthorized, code, msg)
		} else {
			writeError(sw, http.StatusForbidden, code, msg)
		}
		h.log.Info("admin request refused", "route", route, "code", code)
		return
	}
	h.mux.ServeHTTP(sw, r)
}

// authenticate checks the bearer token. It fails closed: without a configured digest
// nothing is accepted.
func (h *Handler) authenticate(r *http.Request) (code, msg string, ok bool) {
	if h.digest == nil {
		return CodeAdminDisabled, "the admin API is disabled: no admin token is configured (http.adminTokenSHA256)", false
	}
	values := r.Header.Values("Authorization")
	var scheme, token string
	found := false
	if len(values) == 1 {
		scheme, token, found = strings.Cut(values[0], " ")
	}
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return CodeMissingToken, `an admin token is required: "Authorization: Bearer <token>"`, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := subtle.ConstantTimeCompare(sum[:], h.digest)
	for _, d := range h.extra { // every digest compared: timing tells nothing
		match |= subtle.ConstantTimeCompare(sum[:], d)
	}
	if match != 1 {
		return CodeInvalidToken, "the admin token is not valid", false
	}
	return "", "", true
}

type workspaceJSON struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

func toJSON(w store.Workspace) workspaceJSON {
	return workspaceJSON{ID: string(w.ID), Type: w.Type, Status: string(w.Status),
		CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(), Version: w.Version}
}

type workspaceDetailsJSON struct {
	workspaceJSON
	Chats []string `json:"chats"`
}

type putWorkspaceRequest struct {
	Type      *string `json:"type"`
	Status    *string `json:"status"`
	CreatedAt *string `json:"created_at"`
	Version   *int64  `json:"version"`
}

func (h *Handler) putWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := ParseWorkspaceID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req putWorkspaceRequest
	if !h.decode(w, r, &req) {
		return
	}
	spec := WorkspaceSpec{ID: ws}
	switch {
	case req.Type == nil:
		err = fieldErr("type", "is required", nil)
	case req.Status == nil:
		err = fieldErr("status", "is required", nil)
	case req.CreatedAt == nil:
		err = fieldErr("created_at", "is required (RFC 3339, e.g. 2025-01-02T15:04:05Z)", nil)
	}
	if err == nil {
		spec.Type = *req.Type
		spec.Status, err = ParseStatus(*req.Status)
	}
	if err == nil {
		spec.CreatedAt, err = parseTime("created_at", *req.CreatedAt)
	}
	if err == nil && req.Version != nil {
		if *req.Version < 1 {
			err = fieldErr("version", fmt.Sprintf("%d is not positive", *req.Version), nil)
		}
		spec.Version = *req.Version
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	got, outcome, err := h.admin.PutWorkspace(r.Context(), spec)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if outcome == PutCreated {
		status = http.StatusCreated
	}
	writeJSON(w, status, toJSON(got))
}

type patchWorkspaceRequest struct {
	Status *string `json:"status"`
}

func (h *Handler) patchWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := ParseWorkspaceID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req patchWorkspaceRequest
	if !h.decode(w, r, &req) {
		return
	}
	if req.Status == nil {
		h.fail(w, r, fieldErr("status", "is required", nil))
		return
	}
	status, err := ParseStatus(*req.Status)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	got, _, err := h.admin.SetStatus(r.Context(), ws, status)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toJSON(got))
}

func (h *Handler) getWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := ParseWorkspaceID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := h.admin.GetWorkspace(r.Context(), ws)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := workspaceDetailsJSON{workspaceJSON: toJSON(d.Workspace), Chats: make([]string, len(d.Chats))}
	for i, c := range d.Chats {
		out.Chats[i] = string(c)
	}
	writeJSON(w, http.StatusOK, out)
}

type bindingJSON struct {
	WorkspaceID string `json:"workspace_id"`
	ChatID      string `json:"chat_id"`
	// Added is false when the chat was already bound.
	Added bool `json:"added"`
}

func (h *Handler) pathBinding(w http.ResponseWriter, r *http.Request) (ids.WorkspaceID, ids.ChatID, bool) {
	ws, err := ParseWorkspaceID(r.PathValue("id"))
	if err == nil {
		var chat ids.ChatID
		if chat, err = ParseChatID(r.PathValue("chat_id")); err == nil {
			return ws, chat, true
		}
	}
	h.fail(w, r, err)
	return "", "", false
}

func (h *Handler) bind(w http.ResponseWriter, r *http.Request) {
	ws, chat, ok := h.pathBinding(w, r)
	if !ok {
		return
	}
	added, err := h.admin.Bind(r.Context(), ws, chat)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	writeJSON(w, status, bindingJSON{WorkspaceID: string(ws), ChatID: string(chat), Added: added})
}

func (h *Handler) unbind(w http.ResponseWriter, r *http.Request) {
	ws, chat, ok := h.pathBinding(w, r)
	if !ok {
		return
	}
	if err := h.admin.Unbind(r.Context(), ws, chat); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type chatBindingJSON struct {
	Workspace workspaceJSON `json:"workspace"`
	BoundAt   time.Time     `json:"bound_at"`
}

type chatBindingsJSON struct {
	ChatID   string            `json:"chat_id"`
	Bindings []chatBindingJSON `json:"bindings"`
}

func (h *Handler) bindingsOfChat(w http.ResponseWriter, r *http.Request) {
	chat, err := ParseChatID(r.PathValue("chat_id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	bs, err := h.admin.BindingsOfChat(r.Context(), chat)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := chatBindingsJSON{ChatID: string(chat), Bindings: make([]chatBindingJSON, len(bs))}
	for i, b := range bs {
		out.Bindings[i] = chatBindingJSON{Workspace: toJSON(b.Workspace), BoundAt: b.BoundAt.UTC()}
	}
	writeJSON(w, http.StatusOK, out)
}

// decode reads a JSON object of exactly the fields of dst. On failure it has written
// the error response and returns false.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "the request body must be application/json")
			return false
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	trailing := false
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return true
		}
		trailing = true
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("the request body is larger than %d bytes", h.maxBody))
	case trailing:
		writeError(w, http.StatusBadRequest, CodeInvalidBody, "the request body has data after the JSON object")
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, CodeInvalidBody, "the request body is empty; a JSON object is required")
	default:
		writeError(w, http.StatusBadRequest, CodeInvalidBody, "the request body is not the expected JSON object: "+jsonProblem(err))
	}
	return false
}

// jsonProblem describes a decoding error without quoting the body.
func jsonProblem(err error) string {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("syntax error at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s has the wrong type (got a JSON %s)", typ.Field, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON object is incomplete"
	}
	return "malformed JSON"
}

func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldErr(field, fmt.Sprintf("%.64q is not an RFC 3339 time (e.g. 2025-01-02T15:04:05Z)", s), nil)
	}
	return t.UTC(), nil
}

// fail writes the response of an error from the admin operations.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *FieldError
	switch {
	case errors.Is(err, ErrWorkspaceNotFound):
		msg := fmt.Sprintf("workspace %s does not exist", r.PathValue("id"))
		if errors.As(err, &fe) {
			msg = fe.Error()
		}
		writeError(w, http.StatusNotFound, CodeWorkspaceNotFound, msg)
	case errors.Is(err, ErrBindingNotFound):
		writeError(w, http.StatusNotFound, CodeBindingNotFound,
			fmt.Sprintf("chat %s is not bound to workspace %s", r.PathValue("chat_id"), r.PathValue("id")))
	case errors.Is(err, ErrNotGroupChat):
		writeError(w, http.StatusBadRequest, CodeNotGroupChat, err.Error())
	case errors.Is(err, ErrChatCheckUnavailable):
		h.log.Warn("admin request failed: chat type check", "route", r.Pattern, "error", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeChatCheckUnavailable,
			"could not check with Lark whether the chat is a group chat; nothing was bound, retry later")
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, CodeInvalidField, fe.Error())
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, CodeInvalidField, err.Error())
	case errors.Is(err, ErrStaleVersion):
		writeError(w, http.StatusConflict, CodeStaleVersion, err.Error())
	case IsRetryable(err):
		h.log.Warn("admin request failed; retryable", "route", r.Pattern, "error", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeStoreUnavailable, "the database is unavailable; retry later")
	default:
		h.log.Error("admin request failed", "route", r.Pattern, "error", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
	}
}

func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, fmt.Sprintf("method %s is not allowed here (allowed: %s)", r.Method, allow))
	})
}

// ErrorBody is the JSON shape of every error response: {"error":{"code","message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a stable code and a human-readable message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // every value written here is a plain struct of strings and numbers
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
