package ingest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/internal/options"
)

// Defaults of WebhookOptions.
const (
	// DefaultMaxTimestampSkew is how far X-Lark-Request-Timestamp may lie from now.
	DefaultMaxTimestampSkew = 5 * time.Minute
	// DefaultMaxBodyBytes bounds a callback body. Lark's largest message content
	// (150 KB of text) encrypted and base64-encoded stays far below it.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultWebhookPath is where the webhook is mounted by default.
	DefaultWebhookPath = "/lark/events"

	// MaxTimestampSkew is the largest WebhookOptions.MaxTimestampSkew: the replay
	// window of a captured callback.
	MaxTimestampSkew = time.Hour

	maxMaxBodyBytes = 64 << 20
)

// Lark event types the event path handles.
const (
	EventTypeMessageReceive  = "im.message.receive_v1"
	EventTypeMessageRecalled = "im.message.recalled_v1"
)

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	// Ingester handles the events. Required.
	Ingester *Ingester
	// VerificationToken is the app's Verification Token: url_verification and every
	// event's header.token must carry it. Required.
	VerificationToken string
	// EncryptKey is the app's Encrypt Key. When set, bodies must be encrypted with it
	// and every event must be signed (X-Lark-Signature over timestamp, nonce, key and
	// body). Strongly recommended: without it a request is authenticated by the
	// verification token alone.
	EncryptKey string
	// MaxTimestampSkew: an X-Lark-Request-Timestamp further than this from now
	// (either way) is refused. Default DefaultMaxTimestampSkew.
	MaxTimestampSkew time.Duration
	// MaxBodyBytes bounds the request body. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxSeenEvents bounds the replay guard: the ids of events acknowledged within the
	// timestamp window, a replay of which is answered without producing anything.
	// Default DefaultMaxSeenEvents.
	MaxSeenEvents int
	// Clock is the time source of the freshness check. Default time.Now.
	Clock func() time.Time
	// URLVerification lets an unsigned body be decrypted to answer Lark's
	// url_verification, which Lark sends unsigned. Only matters with an EncryptKey:
	// while it is false, an unsigned request is refused before anything is decrypted
	// (issue #29). Turn it on to save the request URL in Lark's console, then off.
	URLVerification bool
}

// Webhook is the HTTP endpoint Lark posts events to (mount it at
// DefaultWebhookPath, or the configured path, on the ops server). It verifies,
// decrypts and decodes each callback into the SDK's typed events itself (the SDK's
// dispatcher formats and re-parses every request) and adds what the SDK does not
// check; see the package documentation. ServeHTTP runs the whole event path synchronously and answers 200
// only once Kafka acknowledged the event's evidence.
type Webhook struct {
	ing     *Ingester
	token   []byte
	key     string
	ck      *callbackKey // nil without an encrypt key
	skew    time.Duration
	maxBody int64
	now     func() time.Time
	seen    *seenEvents
	// verifyURL: unsigned bodies may be decrypted (url_verification, see
	// WebhookOptions.URLVerification).
	verifyURL bool
}

// NewWebhook validates opts and returns the webhook handler.
func NewWebhook(opts WebhookOptions) (*Webhook, error) {
	p := opts.problems()
	if opts.Ingester == nil {
		p.Add("Ingester", nil, "is required")
	}
	if opts.VerificationToken == "" {
		p.Add("VerificationToken", nil, "is required")
	}
	if err := p.Err(ErrInvalidOptions); err != nil {
		return nil, err
	}
	opts.MaxTimestampSkew = cmp.Or(opts.MaxTimestampSkew, DefaultMaxTimestampSkew)
	opts.MaxBodyBytes = cmp.Or(opts.MaxBodyBytes, DefaultMaxBodyBytes)
	opts.MaxSeenEvents = cmp.Or(opts.MaxSeenEvents, DefaultMaxSeenEvents)
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	h := &Webhook{
		ing: opts.Ingester, token: []byte(opts.VerificationToken), key: opts.EncryptKey,
		skew: opts.MaxTimestampSkew, maxBody: opts.MaxBodyBytes, now: opts.Clock,
		seen:      newSeenEvents(opts.MaxSeenEvents, opts.Ingester.m.seenEvicted.Inc),
		verifyURL: opts.URLVerification,
	}
	if h.key != "" {
		ck, err := newCallbackKey(h.key)
		if err != nil {
			return nil, fmt.Errorf("preparing the encrypt key: %w", err)
		}
		h.ck = ck
	}
	return h, nil
}

// Check reports every value of opts that breaks the webhook's rules, as an
// *options.Error naming the fields, or nil. It ignores the Ingester and the
// secrets, which NewWebhook requires. The configuration layer calls it to report a
// wrong key before anything starts.
func (opts WebhookOptions) Check() error { return opts.problems().Err(ErrInvalidOptions) }

func (opts WebhookOptions) problems() *options.Problems {
	p := new(options.Problems)
	switch s := opts.MaxTimestampSkew; {
	case s == 0: // the default
	case s < time.Second:
		p.Add("MaxTimestampSkew", s, "must be at least 1s: timestamps have second precision")
	case s > MaxTimestampSkew:
		p.Add("MaxTimestampSkew", s, "must be at most %s: a larger window lets replayed callbacks through", MaxTimestampSkew)
	}
	if b := opts.MaxBodyBytes; b != 0 && (b < 1024 || b > maxMaxBodyBytes) {
		p.Add("MaxBodyBytes", b, "must be between 1024 and %d", maxMaxBodyBytes)
	}
	if opts.MaxSeenEvents < 0 {
		p.Add("MaxSeenEvents", opts.MaxSeenEvents, "must not be negative")
	}
	return p
}

// envelope is a plaintext callback as the webhook reads it, in one pass: the
// url_verification fields, the v2 schema and header, and the event's bytes.
type envelope struct {
	Type      string                 `json:"type"`
	Challenge string                 `json:"challenge"`
	Token     string                 `json:"token"`
	Encrypt   string                 `json:"encrypt"`
	Schema    string                 `json:"schema"`
	Header    *larkevent.EventHeader `json:"header"`
	// Event holds the fields of both supported events (their names do not
	// overlap), decoded with the envelope in one pass; dispatch hands the SDK's
	// typed event of the header's type its half (issue #35: the body was parsed
	// once for the envelope and again as a whole for the event).
	Event *eventFields `json:"event"`
	// eventErr is a field of the event that did not decode (a type mismatch):
	// the envelope is read all the same, and the event refused only when its
	// type is one the webhook handles.
	eventErr error
}

// eventFields is the union of the supported events' bodies.
type eventFields struct {
	larkim.P2MessageReceiveV1Data
	larkim.P2MessageRecalledV1Data
}

// ServeHTTP answers one Lark callback. The answer is JSON: {"msg":"success"} for an
// accepted event, {"challenge":…} for url_verification, {"msg":"rejected"} with
// status 400 for every rejected request whatever check refused it (issue #29: the
// reason is counted and logged, not told to the caller), and {"msg":outcome,
// "reason":…} for an authenticated event that was ignored or failed, with the status
// of Result.HTTPStatus.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.ing.now()
	var (
		res     Result
		eventID string
		body    []byte
	)
	defer func() {
		if p := recover(); p != nil {
			h.ing.log.Error("panic while answering a lark callback", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res = failed(ReasonInternal, fmt.Errorf("panic: %v", p))
		}
		if res.Reason == ReasonURLVerification {
			h.ing.finish(transportWebhook, start, res, "")
			return // already answered
		}
		h.ing.finish(transportWebhook, start, res, eventID)
		writeAnswer(w, res)
	}()

	if r.Method != http.MethodPost {
		res = rejected(ReasonMethodNotAllowed, fmt.Errorf("method %s", r.Method))
		return
	}
	body, res = h.readBody(w, r)
	if res.Outcome != "" {
		return
	}
	ctx := r.Context()

	// A signed request is verified before anything is decrypted, and with an
	// encrypt key an unsigned one is never decrypted (issue #29), unless
	// url_verification (which Lark sends unsigned) is switched on; then a decrypted
	// unsigned body must be url_verification (authenticate refuses events).
	signed := r.Header.Get(larkevent.EventSignature) != ""
	if h.key != "" {
		switch {
		case signed:
			if res = h.verifySignature(r, body); res.Outcome != "" {
				return
			}
		case !h.verifyURL:
			res = rejected(ReasonMissingSignature, errors.New("unsigned request although an encrypt key is set (not decrypted; url_verification is off)"))
			return
		}
	}
	_, env, res := h.open(body)
	if res.Outcome != "" {
		return
	}
	if env.Type == string(larkevent.ReqTypeChallenge) {
		res = h.challenge(w, env)
		return
	}
	if env.Header == nil {
		res = rejected(ReasonMissingHeader, errors.New("not a v2 event envelope (no header)"))
		return
	}
	eventID = boundedID(env.Header.EventID)
	if res = h.authenticate(r, env, signed); res.Outcome != "" {
		return
	}
	// Replay guard (issue #19): an event acknowledged within the timestamp window is
	// answered as before, without producing anything again.
	if eventID != "" {
		switch h.seen.begin(eventID, h.now()) {
		case seenReplay:
			res = ignored(ReasonReplayedEvent)
			return
		case seenInFlight:
			res = failed(ReasonEventInFlight, errors.New("another copy of this event is being handled"))
			return
		}
		until := h.replayUntil(r)
		defer func() { h.seen.end(eventID, res.Outcome.Acknowledged(), until) }()
	}
	switch env.Header.EventType {
	case EventTypeMessageReceive, EventTypeMessageRecalled:
	default:
		res = ignored(ReasonUnsupportedEventType)
		return
	}
	res = h.dispatch(ctx, env)
}

// authenticate checks an event's verification token, that it is signed when an
// encrypt key is set, and its timestamp. A zero Result lets it through.
func (h *Webhook) authenticate(r *http.Request, env envelope, signed bool) Result {
	if subtle.ConstantTimeCompare([]byte(env.Header.Token), h.token) != 1 {
		return rejected(ReasonBadToken, errors.New("header.token is not the verification token"))
	}
	if h.key != "" && !signed {
		return rejected(ReasonMissingSignature, errors.New("event without X-Lark-Signature although an encrypt key is set"))
	}
	return h.checkTimestamp(r)
}

// dispatch decodes a verified, supported event (the envelope's event bytes, kept
// when the envelope was read) into the SDK's typed struct, as the SDK's dispatcher
// does, and hands it to the pipeline, whose Result it returns. (The
// dispatcher itself is not used: it formats every request into a debug line and
// parses the body three more times; issue #35.)
func (h *Webhook) dispatch(ctx context.Context, env envelope) Result {
	decodeErr := func(err error) Result {
		return rejected(ReasonMalformedEvent, fmt.Errorf("decode %s: %w", env.Header.EventType, err))
	}
	if env.eventErr != nil {
		return decodeErr(env.eventErr)
	}
	base := &larkevent.EventV2Base{Schema: env.Schema, Header: env.Header}
	switch env.Header.EventType {
	case EventTypeMessageReceive:
		ev := &larkim.P2MessageReceiveV1{EventV2Base: base}
		if env.Event != nil {
			ev.Event = &env.Event.P2MessageReceiveV1Data
		}
		return h.ing.receive(ctx, ev)
	case EventTypeMessageRecalled:
		ev := &larkim.P2MessageRecalledV1{EventV2Base: base}
		if env.Event != nil {
			ev.Event = &env.Event.P2MessageRecalledV1Data
		}
		return h.ing.recall(ctx, ev)
	default:
		return failed(ReasonInternal, fmt.Errorf("no handler for %s", env.Header.EventType))
	}
}

// readBody reads at most maxBody bytes, into a buffer of the announced length.
func (h *Webhook) readBody(w http.ResponseWriter, r *http.Request) ([]byte, Result) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= h.maxBody {
		buf.Grow(int(n) + bytes.MinRead) // room for the read that sees the end
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.maxBody))
	body := buf.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, rejected(ReasonBodyTooLarge, fmt.Errorf("body larger than %d bytes", h.maxBody))
		}
		return nil, rejected(ReasonReadFailed, fmt.Errorf("read body: %w", err))
	}
	return body, Result{}
}

// verifySignature checks X-Lark-Signature = hex(sha256(timestamp + nonce + key +
// body)) in constant time.
func (h *Webhook) verifySignature(r *http.Request, body []byte) Result {
	ts, nonce := r.Header.Get(larkevent.EventRequestTimestamp), r.Header.Get(larkevent.EventRequestNonce)
	if ts == "" || nonce == "" {
		return rejected(ReasonMissingSignature, errors.New("X-Lark-Signature without X-Lark-Request-Timestamp or X-Lark-Request-Nonce"))
	}
	if !h.ck.verify(ts, nonce, body, r.Header.Get(larkevent.EventSignature)) {
		return rejected(ReasonBadSignature, errors.New("X-Lark-Signature does not match the body"))
	}
	return Result{}
}

// open decrypts the body (when an encrypt key is set) and reads its envelope.
func (h *Webhook) open(body []byte) (plain []byte, env envelope, res Result) {
	plain = body
	if h.ck != nil {
		field, bare := bareEncrypted(body)
		if !bare {
			var encrypted struct {
				Encrypt json.RawMessage `json:"encrypt"`
			}
			if err := json.Unmarshal(body, &encrypted); err != nil && !json.Valid(body) {
				return nil, env, rejected(ReasonMalformedBody, errors.New("body is not JSON"))
			}
			field = encryptedField(encrypted.Encrypt)
		}
		if len(field) == 0 {
			return nil, env, rejected(ReasonMalformedBody, errors.New("body has no \"encrypt\" field although an encrypt key is set"))
		}
		var err error
		if plain, err = h.ck.decrypt(field); err != nil {
			return nil, env, rejected(ReasonUndecryptable, err)
		}
	}
	err := json.Unmarshal(plain, &env)
	// A type mismatch inside the event leaves the rest decoded (encoding/json goes
	// on after one): the event is refused in dispatch, if at all.
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && (te.Field == "event" || strings.HasPrefix(te.Field, "event.")) {
		env.eventErr, err = err, nil
	}
	if err != nil {
		if h.key != "" {
			return nil, env, rejected(ReasonUndecryptable, errors.New("body does not decrypt to JSON with the encrypt key"))
		}
		return nil, env, rejected(ReasonMalformedJSON, errors.New("body is not a JSON object"))
	}
	if env.Encrypt != "" {
		return nil, env, rejected(ReasonEncryptedNoKey, errors.New("body is encrypted but no encrypt key is configured"))
	}
	return plain, env, Result{}
}

// bareEncrypted reads the body every encrypted callback has, {"encrypt":"<base64>"}
// with JSON whitespace around its tokens, without a JSON decoder (which scanned and
// copied the whole ciphertext: an eighth of the webhook's CPU). Any other body,
// valid or not, is false and left to the decoder.
func bareEncrypted(body []byte) ([]byte, bool) {
	b := body
	for _, tok := range []string{`{`, `"encrypt"`, `:`, `"`} {
		var ok bool
		if b, ok = cutToken(b, tok); !ok {
			return nil, false
		}
	}
	end := 0
	for end < len(b) && base64Bytes[b[end]] {
		end++
	}
	if end == len(b) || b[end] != '"' {
		return nil, false // an escape, another character or no end: the decoder's
	}
	field := b[:end]
	rest, ok := cutToken(b[end+1:], `}`)
	if !ok || len(trimJSONSpace(rest)) != 0 {
		return nil, false
	}
	return field, true
}

// cutToken removes JSON whitespace and then tok from the front of b.
func cutToken(b []byte, tok string) ([]byte, bool) {
	return bytes.CutPrefix(trimJSONSpace(b), []byte(tok))
}

func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// base64Bytes marks the bytes of the standard base64 alphabet and its padding: one
// table load a byte, where a chain of comparisons cost bareEncrypted most of its time.
var base64Bytes = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = true
	}
	return t
}()

// encryptedField is the text of the "encrypt" field's JSON string, or nil when the
// field is absent, null or not a string. The base64 alphabet needs no escapes, so
// the text is the raw value between its quotes unless a sender escaped anyway.
func encryptedField(raw json.RawMessage) []byte {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return []byte(s)
}

// challenge answers url_verification when its token is right.
func (h *Webhook) challenge(w http.ResponseWriter, env envelope) Result {
	if subtle.ConstantTimeCompare([]byte(env.Token), h.token) != 1 {
		return rejected(ReasonBadToken, errors.New("url_verification with a wrong token"))
	}
	writeJSON(w, http.StatusOK, map[string]string{"challenge": env.Challenge})
	return accepted(ReasonURLVerification, 0)
}

// checkTimestamp refuses a request whose X-Lark-Request-Timestamp (Unix seconds) is
// further than the allowed skew from now. The header is required with an encrypt
// key (it is signed) and checked whenever present.
func (h *Webhook) checkTimestamp(r *http.Request) Result {
	raw := r.Header.Get(larkevent.EventRequestTimestamp)
	if raw == "" {
		if h.key != "" {
			return rejected(ReasonMissingSignature, errors.New("no X-Lark-Request-Timestamp"))
		}
		return Result{}
	}
	sec, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || sec <= 0 {
		return rejected(ReasonBadTimestamp, errors.New("X-Lark-Request-Timestamp is not Unix seconds"))
	}
	now := h.now()
	skew := now.Sub(time.Unix(sec, 0))
	if skew > h.skew || skew < -h.skew {
		return rejected(ReasonStaleTimestamp, fmt.Errorf("X-Lark-Request-Timestamp is %s away from now (allowed %s)", skew.Round(time.Second), h.skew))
	}
	return Result{}
}

// replayUntil is when a request with r's timestamp stops passing checkTimestamp:
// until then a copy of it is a replay.
func (h *Webhook) replayUntil(r *http.Request) time.Time {
	now := h.now()
	until := now.Add(h.skew)
	if sec, err := strconv.ParseInt(r.Header.Get(larkevent.EventRequestTimestamp), 10, 64); err == nil && sec > 0 {
		if t := time.Unix(sec, 0).Add(h.skew + time.Second); t.After(until) {
			until = t
		}
	}
	return until
}

// The two answers most callbacks get, encoded once.
var (
	answerSuccess  = []byte(`{"msg":"success"}`)
	answerRejected = []byte(`{"msg":"` + string(OutcomeRejected) + `"}`)
)

func writeAnswer(w http.ResponseWriter, res Result) {
	status := res.HTTPStatus()
	switch res.Outcome {
	case OutcomeAccepted:
		writeBody(w, status, answerSuccess)
		return
	case OutcomeRejected:
		writeBody(w, status, answerRejected)
		return
	}
	writeJSON(w, status, map[string]string{"msg": string(res.Outcome), "reason": res.Reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v) // maps of strings always encode
	writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
