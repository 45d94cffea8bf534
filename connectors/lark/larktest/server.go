package larktest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// Open API paths served, as used by FailNext and Calls.
const (
	PathTenantToken     = "/open-apis/auth/v3/tenant_access_token/internal"
	PathListMessages    = "/open-apis/im/v1/messages"
	PathGetMessage      = "/open-apis/im/v1/messages/:message_id"
	PathUsersBatch      = "/open-apis/contact/v3/users/batch"
	PathUsersBasicBatch = "/open-apis/contact/v3/users/basic_batch"
	// PathGetChat is the chat info API (im.chat.get): chat_mode tells a group
	// ("group"), a topic group ("topic") and a single chat ("p2p").
	PathGetChat = "/open-apis/im/v1/chats/:chat_id"
)

var knownPaths = map[string]bool{
	PathTenantToken: true, PathListMessages: true, PathGetMessage: true,
	PathUsersBatch: true, PathUsersBasicBatch: true, PathGetChat: true,
}

const (
	// DefaultTokenTTL is Lark's tenant access token validity.
	DefaultTokenTTL = 2 * time.Hour
	// tokenReuseMin: Lark answers with the current token while it has at
	// least 30 minutes left, and with a new one otherwise.
	tokenReuseMin = 30 * time.Minute
	// maxBatchUsers is the contact batch limit.
	maxBatchUsers  = 50
	maxRequestBody = 1 << 20
)

// NewAppID returns an app id no other call in this process returned. The SDK caches
// tenant tokens process-wide by app id, so a test that starts a server gets its own
// id: with a shared one, a token cached from an earlier server (an earlier test, or
// an earlier run under -count) is refused by the next.
func NewAppID() string {
	return fmt.Sprintf("cli_t%x%x", time.Now().UnixNano(), appSeq.Add(1))
}

var appSeq atomic.Int64

// Options configure a Server.
type Options struct {
	// AppID and AppSecret are the credentials the token endpoint accepts.
	// AppID defaults to the scenario's app_id; when both are set AppID wins
	// (the SDK's token cache is process-wide per app id, so tests running
	// several servers give each its own AppID).
	AppID     string
	AppSecret string
	// VerificationToken is stamped into every delivered envelope's
	// header.token and into url_verification requests.
	VerificationToken string
	// EncryptKey encrypts and signs callbacks; empty sends them in plaintext
	// and unsigned, as Lark does for an app without an Encrypt Key.
	EncryptKey string
	// Scenario is served (a private copy is kept). Nil starts empty, with no
	// bot identity; add to it with AddEvent and AddEdit.
	Scenario *Scenario
	// Now is the server's clock: token expiry, which messages, edits and
	// recalls history already shows, and callback timestamps. Default time.Now.
	Now func() time.Time
	// TokenTTL is the validity of issued tenant tokens (default 2h, at least
	// 1s). The SDK caches a token for TTL minus 3 minutes.
	TokenTTL time.Duration
	// Addr is the listen address of Start (default 127.0.0.1:0).
	Addr string
	// RetrySchedule, DuplicateDelay, CallbackTimeout and HTTPClient configure
	// callback delivery; see SenderOptions.
	RetrySchedule   []time.Duration
	DuplicateDelay  time.Duration
	CallbackTimeout time.Duration
	HTTPClient      *http.Client
	// Logger receives request and delivery logs (ids and codes only). Nil discards.
	Logger *slog.Logger
}

// Fault is an answer injected by FailNext instead of the real one.
type Fault struct {
	// Status is the HTTP status.
	Status int
	// Code and Msg form the JSON body {"code":…,"msg":…}; Code 0 sends a
	// plain-text body instead.
	Code int
	Msg  string
	// RateLimitReset, when positive, adds the x-ogw-ratelimit-limit and
	// x-ogw-ratelimit-reset (seconds) headers.
	RateLimitReset int
}

// FaultHTTP500 is an internal server error with a JSON body.
func FaultHTTP500() Fault {
	return Fault{Status: http.StatusInternalServerError, Code: 500, Msg: "Internal Server Error"}
}

// FaultGatewayTimeout is an HTTP 504 with a plain-text body (the SDK turns it
// into a *larkcore.ServerTimeoutError).
func FaultGatewayTimeout() Fault {
	return Fault{Status: http.StatusGatewayTimeout, Msg: "upstream request timeout"}
}

// FaultRateLimit is Lark's frequency limit: HTTP 429, code 99991400, and
// x-ogw-ratelimit-reset set to resetSeconds (at least 1).
func FaultRateLimit(resetSeconds int) Fault {
	return Fault{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Msg: codeMessage(CodeRateLimited), RateLimitReset: max(resetSeconds, 1)}
}

// FaultCode answers with a Lark error code and HTTP 400, Lark's status for
// business errors (some older APIs also answer 99991400 this way).
func FaultCode(code int) Fault {
	return Fault{Status: http.StatusBadRequest, Code: code, Msg: codeMessage(code)}
}

type faultSlot struct {
	f Fault
	n int
}

// Server is a local Lark: the Open API endpoints the SDK calls, backed by a
// scenario, and the sender of its events to a webhook.
type Server struct {
	opts   Options
	appID  string
	log    *slog.Logger
	now    func() time.Time
	sender *Sender
	mux    *http.ServeMux

	mu        sync.Mutex
	sc        *Scenario
	idx       *historyIndex // nil after a message was added
	tokens    map[string]time.Time
	current   string
	faults    map[string][]faultSlot
	calls     map[string]int
	delivered int
	logSeq    uint64

	lifeMu  sync.Mutex
	httpSrv *http.Server
	ln      net.Listener
	served  chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
}

// New validates opts and builds a Server. It does not listen; call Start, or
// mount Handler yourself.
func New(opts Options) (*Server, error) {
	sc := newScenario()
	if opts.Scenario != nil {
		sc = opts.Scenario.Clone()
	}
	appID := opts.AppID
	if appID == "" && sc.app != nil {
		appID = sc.app.AppID
	}
	switch {
	case appID == "":
		return nil, fmt.Errorf("%w: AppID is required (or a scenario with an app line)", ErrInvalidOptions)
	case !strings.HasPrefix(appID, "cli_"):
		return nil, fmt.Errorf("%w: AppID %q does not start with cli_", ErrInvalidOptions, appID)
	case opts.AppSecret == "":
		return nil, fmt.Errorf("%w: AppSecret is required", ErrInvalidOptions)
	case opts.TokenTTL != 0 && opts.TokenTTL < time.Second:
		return nil, fmt.Errorf("%w: TokenTTL %s is below 1s", ErrInvalidOptions, opts.TokenTTL)
	}
	opts.TokenTTL = cmp.Or(opts.TokenTTL, DefaultTokenTTL)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Addr = cmp.Or(opts.Addr, "127.0.0.1:0")
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sender, err := NewSender(SenderOptions{
		EncryptKey:        opts.EncryptKey,
		VerificationToken: opts.VerificationToken,
		AppID:             appID,
		Timeout:           opts.CallbackTimeout,
		RetrySchedule:     opts.RetrySchedule,
		DuplicateDelay:    opts.DuplicateDelay,
		Client:            opts.HTTPClient,
		Now:               opts.Now,
		Logger:            log,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts: opts, appID: appID, log: log.With("component", "larktest"), now: opts.Now, sender: sender,
		sc: sc, tokens: map[string]time.Time{}, faults: map[string][]faultSlot{}, calls: map[string]int{},
		ctx: ctx, cancel: cancel,
	}
	s.mux = http.NewServeMux()
	s.route("POST "+PathTenantToken, PathTenantToken, false, s.handleToken)
	s.route("GET "+PathListMessages, PathListMessages, true, s.handleList)
	s.route("GET /open-apis/im/v1/messages/{message_id}", PathGetMessage, true, s.handleGet)
	s.route("GET "+PathUsersBatch, PathUsersBatch, true, s.handleUsersBatch)
	s.route("POST "+PathUsersBasicBatch, PathUsersBasicBatch, true, s.handleUsersBasicBatch)
	s.route("GET /open-apis/im/v1/chats/{chat_id}", PathGetChat, true, s.handleGetChat)
	return s, nil
}

// Handler is the Open API handler, for mounting without Start.
func (s *Server) Handler() http.Handler { return s.mux }

// AppID is the app id the server answers for.
func (s *Server) AppID() string { return s.appID }

// Start listens on Options.Addr and serves in the background.
func (s *Server) Start() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.httpSrv != nil {
		return fmt.Errorf("%w: already started", ErrServerState)
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("%w: closed", ErrServerState)
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("larktest: listen on %s: %w", s.opts.Addr, err)
	}
	s.ln = ln
	s.httpSrv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve failed", "err", err)
		}
	}()
	s.log.Info("listening", "addr", ln.Addr().String())
	return nil
}

// URL is the base URL to give lark.WithOpenBaseUrl ("" before Start).
func (s *Server) URL() string {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Close stops serving, waits for the serving goroutine, and cancels running
// deliveries. It is safe to call more than once.
func (s *Server) Close() error {
	s.cancel()
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.httpSrv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.httpSrv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.httpSrv.Close())
	}
	<-s.served
	s.httpSrv = nil
	if err != nil {
		return fmt.Errorf("larktest: close: %w", err)
	}
	return nil
}

// FailNext makes the next n requests to path (a Path constant) answer with f
// instead. Calls queue up: a second FailNext applies after the first is used.
func (s *Server) FailNext(path string, n int, f Fault) error {
	if !knownPaths[path] {
		return fmt.Errorf("%w: FailNext: unknown path %q", ErrInvalidOptions, path)
	}
	if n < 1 || f.Status < 100 || f.Status > 599 {
		return fmt.Errorf("%w: FailNext needs n ≥ 1 and an HTTP status, got n=%d status=%d", ErrInvalidOptions, n, f.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = append(s.faults[path], faultSlot{f: f, n: n})
	return nil
}

// Calls is the number of requests path (a Path constant) has received,
// answered or not.
func (s *Server) Calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// RevokeTokens invalidates every tenant token issued so far; requests with
// them answer 99991663 until the client fetches a new one.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
	s.current = ""
}

// Scenario returns a copy of what the server serves now.
func (s *Server) Scenario() *Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.Clone()
}

// AddEvent appends an event to the served scenario (history shows its message
// at once; the next Deliver posts it).
func (s *Server) AddEvent(d Delivery, env Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx = nil
	return s.sc.AddEvent(d, env)
}

// AddEdit appends an edit to the served scenario.
func (s *Server) AddEdit(e Edit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.AddEdit(e)
}

// VerifyURL runs Lark's url_verification handshake against a webhook.
func (s *Server) VerifyURL(ctx context.Context, url string) error {
	ctx, stop := s.joined(ctx)
	defer stop()
	return s.sender.VerifyURL(ctx, url)
}

// Deliver posts every scenario event not yet handed to an earlier Deliver
// call, in file order, with redelivery and duplicates as SenderOptions say.
// It returns when every event is delivered, dropped or out of retries; the
// error wraps ErrUndelivered when some event never got a 200.
func (s *Server) Deliver(ctx context.Context, url string) (Report, error) {
	s.mu.Lock()
	events := s.sc.Events()[s.delivered:]
	s.delivered += len(events)
	s.mu.Unlock()
	ctx, stop := s.joined(ctx)
	defer stop()
	return s.sender.Deliver(ctx, url, events)
}

// view is history as of now; the caller holds s.mu.
func (s *Server) view() *historyView {
	if s.idx == nil {
		s.idx = buildIndex(s.sc)
	}
	return &historyView{sc: s.sc, idx: s.idx, appID: s.appID, nowMs: s.now().UnixMilli()}
}

// joined is ctx, also cancelled by Close.
func (s *Server) joined(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

type apiError struct {
	status int
	code   int
	msg    string
}

// route registers a handler that counts calls, applies injected faults and,
// when auth is set, requires a valid tenant token.
func (s *Server) route(pattern, path string, auth bool, h func(*http.Request) (any, *apiError)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[path]++
		s.logSeq++
		logID := fmt.Sprintf("%s%08X", s.now().UTC().Format("20060102150405"), s.logSeq)
		var fault *Fault
		if q := s.faults[path]; len(q) > 0 {
			f := q[0].f
			fault = &f
			if q[0].n--; q[0].n == 0 {
				s.faults[path] = q[1:]
			}
		}
		s.mu.Unlock()
		w.Header().Set("X-Tt-Logid", logID)
		if fault != nil {
			s.log.Info("injected fault", "path", path, "status", fault.Status, "code", fault.Code, "log_id", logID)
			writeFault(w, *fault, logID)
			return
		}
		if auth {
			if e := s.authorize(r); e != nil {
				s.log.Info("unauthorized", "path", path, "code", e.code, "log_id", logID)
				writeError(w, e, logID)
				return
			}
		}
		data, e := h(r)
		if e != nil {
			s.log.Info("request failed", "path", path, "code", e.code, "log_id", logID)
			writeError(w, e, logID)
			return
		}
		writeJSON(w, http.StatusOK, data)
	})
}

func writeFault(w http.ResponseWriter, f Fault, logID string) {
	if f.RateLimitReset > 0 {
		w.Header().Set("x-ogw-ratelimit-limit", "50")
		w.Header().Set("x-ogw-ratelimit-reset", strconv.Itoa(f.RateLimitReset))
	}
	if f.Code == 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Msg)
		return
	}
	writeError(w, &apiError{status: f.Status, code: f.Code, msg: f.Msg}, logID)
}

func writeError(w http.ResponseWriter, e *apiError, logID string) {
	writeJSON(w, e.status, struct {
		Code  int    `json:"code"`
		Msg   string `json:"msg"`
		Error struct {
			LogID string `json:"log_id"`
		} `json:"error"`
	}{Code: e.code, Msg: e.msg, Error: struct {
		LogID string `json:"log_id"`
	}{logID}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"code":500,"msg":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func bad(code int, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, msg: msg}
}

func (s *Server) authorize(r *http.Request) *apiError {
	h := r.Header.Get("Authorization")
	if strings.TrimSpace(h) == "" {
		return bad(CodeTokenMissing, codeMessage(CodeTokenMissing))
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return bad(CodeTokenFormat, codeMessage(CodeTokenFormat))
	}
	s.mu.Lock()
	exp, known := s.tokens[tok]
	s.mu.Unlock()
	if !known || !s.now().Before(exp) {
		return bad(CodeTenantTokenInvalid, codeMessage(CodeTenantTokenInvalid))
	}
	return nil
}

type tokenAnswer struct {
	Code              int    `json:"code"`
	Msg               string `json:"msg"`
	TenantAccessToken string `json:"tenant_access_token"`
	Expire            int    `json:"expire"`
}

func (s *Server) handleToken(r *http.Request) (any, *apiError) {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody)).Decode(&req); err != nil || req.AppID == "" || req.AppSecret == "" {
		return nil, bad(CodeFieldValidation, codeMessage(CodeFieldValidation))
	}
	if req.AppID != s.appID || req.AppSecret != s.opts.AppSecret {
		return nil, bad(CodeAppCredentialsInvalid, codeMessage(CodeAppCredentialsInvalid))
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if exp, ok := s.tokens[s.current]; ok && exp.Sub(now) >= tokenReuseMin {
		return tokenAnswer{Msg: "ok", TenantAccessToken: s.current, Expire: int(exp.Sub(now) / time.Second)}, nil
	}
	tok, err := randomHex(20)
	if err != nil {
		return nil, &apiError{status: http.StatusInternalServerError, code: 500, msg: "token generation failed"}
	}
	tok = "t-" + tok
	s.tokens[tok] = now.Add(s.opts.TokenTTL)
	s.current = tok
	return tokenAnswer{Msg: "ok", TenantAccessToken: tok, Expire: int(s.opts.TokenTTL / time.Second)}, nil
}

type okAnswer struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
	Data any    `json:"data"`
}

func (s *Server) handleList(r *http.Request) (any, *apiError) {
	q, err := parseListQuery(r.URL.Query().Get)
	if err != nil {
		return nil, paramError(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.view()
	switch q.containerType {
	case ContainerChat:
		if !h.knownChat(ids.ChatID(q.containerID)) {
			return nil, bad(CodeBotNotInChat, codeMessage(CodeBotNotInChat))
		}
	case ContainerThread:
		if !h.knownThread(q.containerID) {
			return nil, paramError(errParam("invalid container_id"))
		}
	}
	items, more, next := h.list(q)
	data := struct {
		HasMore   bool          `json:"has_more"`
		PageToken string        `json:"page_token,omitempty"`
		Items     []historyItem `json:"items"`
	}{more, next, items}
	return okAnswer{Msg: "success", Data: data}, nil
}

func paramError(err error) *apiError {
	var p errParam
	if errors.As(err, &p) {
		return bad(CodeInvalidParam, p.ext())
	}
	return bad(CodeInvalidParam, codeMessage(CodeInvalidParam))
}

func (s *Server) handleGet(r *http.Request) (any, *apiError) {
	id, err := ids.ParseMessageID(r.PathValue("message_id"))
	if err != nil {
		return nil, paramError(errParam("invalid message_id"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.view().get(id)
	if !ok {
		return nil, paramError(errParam("invalid message_id"))
	}
	return okAnswer{Msg: "success", Data: struct {
		Items []historyItem `json:"items"`
	}{[]historyItem{it}}}, nil
}

// handleGetChat answers the chat info API with the chat's real mode, taken from
// the chat_type of its messages' events (p2p → "p2p", topic_group → "topic",
// group → "group"); a bound chat without messages is a group. Like Lark, a
// single chat has no chat_type (private/public) and a group is "private".
func (s *Server) handleGetChat(r *http.Request) (any, *apiError) {
	chat, err := ids.ParseChatID(r.PathValue("chat_id"))
	if err != nil {
		return nil, paramError(errParam("invalid chat_id"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.view()
	if !h.knownChat(chat) {
		return nil, bad(CodeBotNotInChat, codeMessage(CodeBotNotInChat))
	}
	data := struct {
		ChatMode string `json:"chat_mode"`
		ChatType string `json:"chat_type,omitempty"`
		Name     string `json:"name,omitempty"`
		External bool   `json:"external"`
	}{ChatMode: s.sc.chatMode(chat)}
	if data.ChatMode != ChatModeP2P {
		data.ChatType, data.Name = "private", string(chat)
	}
	return okAnswer{Msg: "success", Data: data}, nil
}

// userIDOf returns u's id of the given user_id_type.
func userIDOf(u User, idType string) string {
	switch idType {
	case "union_id":
		return u.UnionID
	case "user_id":
		return u.UserID
	default:
		return u.OpenID
	}
}

func (s *Server) lookupUsers(idType string, wanted []string) ([]User, *apiError) {
	switch idType {
	case "", "open_id", "union_id", "user_id":
	default:
		return nil, bad(CodeFieldValidation, codeMessage(CodeFieldValidation))
	}
	if len(wanted) == 0 || len(wanted) > maxBatchUsers {
		return nil, bad(CodeFieldValidation, codeMessage(CodeFieldValidation))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []User
	for _, id := range wanted {
		for _, u := range s.sc.users {
			if id != "" && userIDOf(u, idType) == id {
				out = append(out, u)
				break
			}
		}
	}
	return out, nil
}

type contactUser struct {
	UnionID string `json:"union_id,omitempty"`
	UserID  string `json:"user_id,omitempty"`
	OpenID  string `json:"open_id"`
	Name    string `json:"name"`
	EnName  string `json:"en_name,omitempty"`
}

// handleUsersBatch is GET /open-apis/contact/v3/users/batch: ids unknown to
// the directory are silently left out, as Lark does.
func (s *Server) handleUsersBatch(r *http.Request) (any, *apiError) {
	q := r.URL.Query()
	users, e := s.lookupUsers(q.Get("user_id_type"), q["user_ids"])
	if e != nil {
		return nil, e
	}
	items := make([]contactUser, 0, len(users))
	for _, u := range users {
		items = append(items, contactUser{UnionID: u.UnionID, UserID: u.UserID, OpenID: u.OpenID, Name: u.Name, EnName: u.EnName})
	}
	return okAnswer{Msg: "success", Data: struct {
		Items []contactUser `json:"items"`
	}{items}}, nil
}

// handleUsersBasicBatch is POST /open-apis/contact/v3/users/basic_batch.
func (s *Server) handleUsersBasicBatch(r *http.Request) (any, *apiError) {
	var req struct {
		UserIDs []string `json:"user_ids"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody)).Decode(&req); err != nil {
		return nil, bad(CodeFieldValidation, codeMessage(CodeFieldValidation))
	}
	idType := r.URL.Query().Get("user_id_type")
	users, e := s.lookupUsers(idType, req.UserIDs)
	if e != nil {
		return nil, e
	}
	type i18n struct {
		ZhCN string `json:"zh_cn,omitempty"`
		EnUS string `json:"en_us,omitempty"`
	}
	type basic struct {
		UserID   string `json:"user_id"`
		Name     string `json:"name"`
		I18nName i18n   `json:"i18n_name"`
	}
	out := make([]basic, 0, len(users))
	for _, u := range users {
		out = append(out, basic{UserID: userIDOf(u, idType), Name: u.Name, I18nName: i18n{ZhCN: u.Name, EnUS: u.EnName}})
	}
	return okAnswer{Msg: "success", Data: struct {
		Users []basic `json:"users"`
	}{out}}, nil
}
