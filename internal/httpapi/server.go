package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// Store is what the API reads and writes: nothing else. *store.Store implements it.
// The API cannot write evidence, window states or checkpoints.
type Store interface {
	GetWorkspace(ctx context.Context, ws ids.WorkspaceID) (store.Workspace, error)
	ListEvidence(ctx context.Context, ws ids.WorkspaceID, kind store.EvidenceKind, after *store.Cursor, limit int) (store.EvidencePage, error)
	ListVisibleEntries(ctx context.Context, ws ids.WorkspaceID) ([]store.Entry, error)
	HumanEditEntry(ctx context.Context, ws ids.WorkspaceID, id int64, p store.EntryPatch) (store.Entry, error)
	GetSummary(ctx context.Context, ws ids.WorkspaceID) (store.Summary, error)
	PutHumanSummary(ctx context.Context, ws ids.WorkspaceID, text string) error
	// The page's comparison with another processor version (decisions D26).
	ServingVersion(ctx context.Context) (string, error)
	GetVersion(ctx context.Context, name string) (store.ProcessorVersion, error)
	DiffVersions(ctx context.Context, a, b string, ws ids.WorkspaceID) ([]store.WorkspaceDiff, error)
}

var _ Store = (*store.Store)(nil)

// ErrInvalidOptions is returned (wrapped) by New for unusable options.
var ErrInvalidOptions = errors.New("invalid httpapi options")

// Page sizes of the evidence listing.
const (
	// DefaultPageSize is the evidence page size when the request names none.
	DefaultPageSize = 50
	// MaxPageSize is the largest evidence page a request may ask for; a larger limit
	// is answered with 400 invalid_limit (not silently lowered).
	MaxPageSize = 200
)

// MaxBodyBytes bounds every request body; a larger body is answered with 413
// body_too_large. It holds the largest summary (store.MaxSummaryBytes) with every
// character JSON-escaped.
const MaxBodyBytes = 6*store.MaxSummaryBytes + 4<<10

// DefaultStoreTimeout bounds each request's store calls when Options.StoreTimeout is 0.
const DefaultStoreTimeout = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Store is the repository. Required.
	Store Store
	// Tokens are the API bearer tokens. With none, every API request is refused (403
	// api_disabled); the web page is still served, and tells the user so.
	Tokens []Token
	// EvidenceListed exposes Lark message evidence through the evidence endpoint
	// (design §15, services.workspace.timeline.lark.evidenceListedInAPI). When false the
	// endpoint answers 404 evidence_listing_disabled to every authorised caller.
	EvidenceListed bool
	// CursorKey authenticates evidence page cursors (HMAC-SHA256). Required: a secret
	// of at least 16 bytes, the same on every replica. There is no default key: a
	// public one would let anyone forge a cursor.
	CursorKey []byte
	// StoreTimeout bounds the store calls of one request; 0 means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Logger receives audit lines (human edits, refused tokens) and server errors, with
	// ids only. Nil discards.
	Logger *slog.Logger
	// Registry receives the request metrics. Nil registers nothing.
	Registry *prometheus.Registry
}

// Server serves the timeline API under /api/v1/workspaces/ and the web page under
// /workspaces/ and /static/. It is an http.Handler, safe for concurrent use, and owns
// no goroutines.
type Server struct {
	store          Store
	auth           *authenticator
	evidenceListed bool
	cursors        cursorCodec
	storeTimeout   time.Duration
	log            *slog.Logger
	metrics        *metrics
	web            *webAssets
	mux            *http.ServeMux
}

// New validates opts and returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: Store is required", ErrInvalidOptions)
	}
	auth, err := newAuthenticator(opts.Tokens)
	if err != nil {
		return nil, err
	}
	cursors, err := newCursorCodec(opts.CursorKey)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.StoreTimeout < 0:
		return nil, fmt.Errorf("%w: StoreTimeout %s is negative", ErrInvalidOptions, opts.StoreTimeout)
	case opts.StoreTimeout == 0:
		opts.StoreTimeout = DefaultStoreTimeout
	}
	web, err := loadWebAssets()
	if err != nil {
		return nil, err
	}
	s := &Server{
		store:          opts.Store,
		auth:           auth,
		evidenceListed: opts.EvidenceListed,
		cursors:        cursors,
		storeTimeout:   opts.StoreTimeout,
		log:            logging.OrDiscard(opts.Logger),
		web:            web,
		mux:            http.NewServeMux(),
	}
	if s.metrics, err = newMetrics(opts.Registry); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Route patterns. The API routes carry the method; each has a method-less twin that
// answers 405 in JSON, and anything else under the API prefix is a JSON 404.
const (
	apiPrefix      = "/api/v1/workspaces/"
	routeEvidence  = "/api/v1/workspaces/{workspace}/evidence"
	routeTimeline  = "/api/v1/workspaces/{workspace}/timeline"
	routeEntry     = "/api/v1/workspaces/{workspace}/timeline/{entry}"
	routeSummary   = "/api/v1/workspaces/{workspace}/summary"
	routeCompare   = "/api/v1/workspaces/{workspace}/compare"
	routePage      = "GET /workspaces/{workspace}"
	routeStatic    = "GET /static/{file}"
	webPagePrefix  = "/workspaces/"
	staticPrefix   = "/static/"
	routeUnmatched = "unmatched"
)

func (s *Server) routes() {
	s.mux.Handle("GET "+routeEvidence, s.api(s.listEvidence))
	s.mux.Handle("GET "+routeTimeline, s.api(s.getTimeline))
	s.mux.Handle("PATCH "+routeEntry, s.curate(s.patchEntry))
	s.mux.Handle("GET "+routeSummary, s.api(s.getSummary))
	s.mux.Handle("PUT "+routeSummary, s.curate(s.putSummary))
	s.mux.Handle("GET "+routeCompare, s.api(s.getCompare))
	for route, allow := range map[string]string{
		routeEvidence: "GET, HEAD",
		routeTimeline: "GET, HEAD",
		routeEntry:    "PATCH",
		routeSummary:  "GET, HEAD, PUT",
		routeCompare:  "GET, HEAD",
	} {
		s.mux.HandleFunc(route, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed; allowed: "+allow)
		})
	}
	s.mux.HandleFunc(apiPrefix, func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, "no such API route")
	})
	s.mux.HandleFunc(routePage, s.servePage)
	s.mux.HandleFunc(routeStatic, s.serveStatic)
}

// Patterns are the ServeMux patterns under which a shared mux must mount the Server:
// the API prefix, the web page prefix and the static assets prefix. More specific
// patterns mounted by others (e.g. an admin API under /api/v1/workspaces/…) win over
// these prefixes.
func (s *Server) Patterns() []string {
	return []string{apiPrefix, webPagePrefix, staticPrefix}
}

// Mounter is a mux that reports registration errors, such as *opsserver.Server.
type Mounter interface {
	Handle(pattern string, h http.Handler) error
}

// Mount mounts the Server on every pattern of Patterns.
func (s *Server) Mount(m Mounter) error {
	for _, p := range s.Patterns() {
		if err := m.Handle(p, s); err != nil {
			return fmt.Errorf("mount timeline API on %q: %w", p, err)
		}
	}
	return nil
}

// ServeHTTP serves the API and the web page, recording the request metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &StatusRecorder{ResponseWriter: w}
	s.mux.ServeHTTP(rec, r)
	route := r.Pattern // set by the mux on r when a pattern matched
	if route == "" {
		route = routeUnmatched
	}
	code := rec.Status()
	if !rec.Written() && r.Context().Err() != nil {
		code = statusClientClosed // nothing was answered: the client went away
	}
	s.metrics.observe(route, code, time.Since(start))
}

// statusClientClosed labels requests whose client went away before an answer was
// written (nginx's convention); it is never sent.
const statusClientClosed = 499
