package larktest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/schemas/ids"
)

const (
	// DefaultCallbackTimeout is Lark's limit for a webhook's answer.
	DefaultCallbackTimeout = 3 * time.Second
	// maxRetries bounds RetrySchedule.
	maxRetries = 10
	// maxAnswerBytes bounds how much of a webhook answer is read.
	maxAnswerBytes = 64 << 10
)

// DefaultRetrySchedule is Lark's redelivery schedule after a failed push:
// 15 s, 5 min, 1 h, 6 h, then the event is given up.
func DefaultRetrySchedule() []time.Duration {
	return []time.Duration{15 * time.Second, 5 * time.Minute, time.Hour, 6 * time.Hour}
}

// SenderOptions configure a Sender.
type SenderOptions struct {
	// EncryptKey encrypts and signs; empty posts plaintext, unsigned.
	EncryptKey string
	// VerificationToken, when set, replaces header.token of every event and
	// is the token of url_verification.
	VerificationToken string
	// AppID, when set, replaces header.app_id of every event.
	AppID string
	// Timeout is the per-POST limit; a slower webhook counts as failed (default 3s).
	Timeout time.Duration
	// RetrySchedule is the wait before each redelivery after a failed push.
	// Nil means DefaultRetrySchedule; an empty non-nil slice means none. At
	// most 10 entries, each positive. Waits use the real clock; tests scale
	// the schedule down.
	RetrySchedule []time.Duration
	// DuplicateDelay is waited, after the first pass over all events, before
	// the second push of each "twice" event (default 0: right after).
	DuplicateDelay time.Duration
	// Client posts the callbacks (default: a client with Timeout). Its own
	// timeout, if any, also applies.
	Client *http.Client
	// Now is the clock of the X-Lark-Request-Timestamp header (default time.Now).
	Now func() time.Time
	// Logger receives one line per attempt (ids and status only). Nil discards.
	Logger *slog.Logger
}

// maxIdlePerHost is how many idle connections a Sender keeps per webhook host.
const maxIdlePerHost = 1024

// Sender posts events to a webhook exactly as Lark does.
type Sender struct {
	opts SenderOptions
	log  *slog.Logger
}

// NewSender validates opts.
func NewSender(opts SenderOptions) (*Sender, error) {
	if opts.Timeout < 0 || opts.DuplicateDelay < 0 {
		return nil, fmt.Errorf("%w: Timeout and DuplicateDelay must not be negative", ErrInvalidOptions)
	}
	opts.Timeout = cmp.Or(opts.Timeout, DefaultCallbackTimeout)
	if opts.RetrySchedule == nil {
		opts.RetrySchedule = DefaultRetrySchedule()
	} else {
		opts.RetrySchedule = slices.Clone(opts.RetrySchedule)
	}
	if len(opts.RetrySchedule) > maxRetries {
		return nil, fmt.Errorf("%w: RetrySchedule has %d entries (at most %d)", ErrInvalidOptions, len(opts.RetrySchedule), maxRetries)
	}
	for i, d := range opts.RetrySchedule {
		if d <= 0 {
			return nil, fmt.Errorf("%w: RetrySchedule[%d] = %s is not positive", ErrInvalidOptions, i, d)
		}
	}
	if opts.Client == nil {
		// Keep-alive for every concurrent sender, as Lark's own pushes: the default
		// transport keeps two idle connections per host, so a load of many senders
		// opened a TCP connection per callback (9,000 in TIME_WAIT in one run) and
		// measured connection set-up on both sides instead of the webhook.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, maxIdlePerHost
		opts.Client = &http.Client{Timeout: opts.Timeout, Transport: tr}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sender{opts: opts, log: log.With("component", "larktest.sender")}, nil
}

// Request builds the POST Lark would send for plaintext: the body
// {"encrypt": …} and the three X-Lark-* signature headers when an encrypt
// key is set, the plaintext itself otherwise. Tests may tamper with it
// before sending.
func (s *Sender) Request(ctx context.Context, url string, plaintext []byte) (*http.Request, error) {
	return s.request(ctx, url, plaintext, true)
}

func (s *Sender) request(ctx context.Context, url string, plaintext []byte, sign bool) (*http.Request, error) {
	body := plaintext
	if s.opts.EncryptKey != "" {
		enc, err := Encrypt(s.opts.EncryptKey, plaintext)
		if err != nil {
			return nil, err
		}
		if body, err = marshal(struct {
			Encrypt string `json:"encrypt"`
		}{enc}); err != nil {
			return nil, fmt.Errorf("larktest: encode encrypted body: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: callback request for %q: %w", ErrInvalidOptions, url, err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if sign && s.opts.EncryptKey != "" {
		ts := strconv.FormatInt(s.opts.Now().Unix(), 10)
		nonce, err := randomHex(8)
		if err != nil {
			return nil, err
		}
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderNonce, nonce)
		req.Header.Set(HeaderSignature, Signature(ts, nonce, s.opts.EncryptKey, body))
	}
	return req, nil
}

// Send posts plaintext once (encrypted and signed as Request builds it). It
// returns nil on HTTP 200, a *StatusError on any other status, and an error
// for which IsRetryable is true on a transport failure or timeout.
func (s *Sender) Send(ctx context.Context, url string, plaintext []byte) error {
	req, err := s.Request(ctx, url, plaintext)
	if err != nil {
		return err
	}
	_, err = s.do(ctx, req)
	return err
}

// do posts req within the callback timeout and returns the answer body.
func (s *Sender) do(ctx context.Context, req *http.Request) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	resp, err := s.opts.Client.Do(req.WithContext(ctx))
	if err != nil {
		if parent := context.Cause(req.Context()); parent != nil {
			return nil, fmt.Errorf("larktest: callback: %w", parent)
		}
		return nil, fmt.Errorf("larktest: callback: %w: %w", errTransport, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		if parent := context.Cause(req.Context()); parent != nil {
			return nil, fmt.Errorf("larktest: callback: %w", parent)
		}
		return nil, fmt.Errorf("larktest: callback: reading answer: %w: %w", errTransport, err)
	}
	if resp.StatusCode != http.StatusOK {
		return answer, &StatusError{Status: resp.StatusCode}
	}
	return answer, nil
}

// VerifyURL runs the url_verification handshake: it posts
// {"challenge","token","type":"url_verification"} (encrypted when a key is
// set, never signed, as Lark sends it) and requires HTTP 200 with
// {"challenge": <the same value>}.
func (s *Sender) VerifyURL(ctx context.Context, url string) error {
	challenge, err := randomHex(16)
	if err != nil {
		return err
	}
	plain, err := marshal(struct {
		Challenge string `json:"challenge"`
		Token     string `json:"token"`
		Type      string `json:"type"`
	}{challenge, s.opts.VerificationToken, "url_verification"})
	if err != nil {
		return fmt.Errorf("larktest: encode challenge: %w", err)
	}
	req, err := s.request(ctx, url, plain, false)
	if err != nil {
		return err
	}
	answer, err := s.do(ctx, req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrChallengeFailed, err)
	}
	var got struct {
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal(answer, &got); err != nil || got.Challenge != challenge {
		return fmt.Errorf("%w: the answer does not echo the challenge", ErrChallengeFailed)
	}
	return nil
}

// Report tells what Deliver did, one entry per event in file order.
type Report struct {
	Deliveries []DeliveryReport
}

// DeliveryReport is the fate of one scenario event.
type DeliveryReport struct {
	Line      int
	EventID   string
	Type      string
	MessageID ids.MessageID
	Deliver   Delivery
	// Attempts lists every POST of the event, redeliveries and the
	// duplicate included.
	Attempts []Attempt
	// Delivered is true once a push of the event got HTTP 200.
	Delivered bool
	// DuplicateEventID is the event_id of the second push of a "twice"
	// event: Lark warns duplicates need not share the event_id, so
	// receivers must deduplicate by message_id.
	DuplicateEventID   string
	DuplicateDelivered bool
}

// Attempt is one POST.
type Attempt struct {
	At        time.Time
	Duplicate bool
	// Status is the HTTP status, 0 when the exchange failed.
	Status int
	Err    string
}

// Posts is the total number of POSTs.
func (r Report) Posts() int {
	n := 0
	for _, d := range r.Deliveries {
		n += len(d.Attempts)
	}
	return n
}

// Undelivered lists the events (not dropped) that never got HTTP 200, and
// "twice" events whose second push never did.
func (r Report) Undelivered() []DeliveryReport {
	var out []DeliveryReport
	for _, d := range r.Deliveries {
		if d.Deliver != DeliverDrop && (!d.Delivered || d.Deliver == DeliverTwice && !d.DuplicateDelivered) {
			out = append(out, d)
		}
	}
	return out
}

// push is one pending POST of Deliver.
type push struct {
	idx     int // into the report
	body    []byte
	dup     bool
	attempt int // redeliveries done so far
	due     time.Time
}

// Deliver posts events in order. A push answered with anything but HTTP 200
// (or not answered within Timeout) is redelivered after each RetrySchedule
// wait, interleaved with later events as Lark does; "twice" events are pushed
// again (with a new event_id) once every event had its first push; "drop"
// events are not posted. It returns when nothing is pending; the error wraps
// ErrUndelivered if some push ran out of retries, or is the context's error.
func (s *Sender) Deliver(ctx context.Context, url string, events []Event) (Report, error) {
	rep := Report{Deliveries: make([]DeliveryReport, len(events))}
	var first, later []*push
	for i, e := range events {
		rep.Deliveries[i] = DeliveryReport{Line: e.Line, EventID: e.EventID, Type: e.Type, MessageID: e.MessageID, Deliver: e.Deliver}
		if e.Deliver == DeliverDrop {
			s.log.Debug("dropped by scenario", "event_id", e.EventID, "message_id", e.MessageID)
			continue
		}
		body, err := s.stamp(e.Body, "")
		if err != nil {
			return rep, fmt.Errorf("%w: event on line %d: %w", ErrInvalidScenario, e.Line, err)
		}
		first = append(first, &push{idx: i, body: body})
	}
	var dups []*push
	var dupsAt time.Time // when duplicates may go: DuplicateDelay after the first pass
	for len(first) > 0 || len(later) > 0 || len(dups) > 0 {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("larktest: deliver: %w", err)
		}
		now := time.Now()
		if len(first) == 0 && dupsAt.IsZero() {
			dupsAt = now.Add(s.opts.DuplicateDelay)
		}
		var p *push
		switch {
		case len(later) > 0 && !now.Before(later[0].due):
			p, later = later[0], later[1:]
		case len(first) > 0:
			p, first = first[0], first[1:]
		case len(dups) > 0 && !now.Before(dupsAt):
			p, dups = dups[0], dups[1:]
		default:
			wake := dupsAt
			if len(dups) == 0 || len(later) > 0 && later[0].due.Before(wake) {
				wake = later[0].due
			}
			if err := backoff.Sleep(ctx, wake.Sub(now)); err != nil {
				return rep, fmt.Errorf("larktest: deliver: %w", err)
			}
			continue
		}
		ok, err := s.attempt(ctx, url, p, &rep.Deliveries[p.idx])
		if err != nil {
			return rep, err
		}
		d := &rep.Deliveries[p.idx]
		switch {
		case ok && !p.dup && events[p.idx].Deliver == DeliverTwice && d.DuplicateEventID == "":
			d.DuplicateEventID = DeriveEventID("duplicate", d.EventID)
			body, err := s.stamp(events[p.idx].Body, d.DuplicateEventID)
			if err != nil {
				return rep, fmt.Errorf("%w: event on line %d: %w", ErrInvalidScenario, d.Line, err)
			}
			dups = append(dups, &push{idx: p.idx, body: body, dup: true})
		case !ok && p.attempt < len(s.opts.RetrySchedule):
			p.due = time.Now().Add(s.opts.RetrySchedule[p.attempt])
			p.attempt++
			later = append(later, p)
			slices.SortStableFunc(later, func(a, b *push) int { return a.due.Compare(b.due) })
		case !ok:
			s.log.Warn("event given up after retries", "event_id", d.EventID, "message_id", d.MessageID, "duplicate", p.dup)
		}
	}
	if n := len(rep.Undelivered()); n > 0 {
		return rep, fmt.Errorf("%w: %d event(s) never answered with HTTP 200", ErrUndelivered, n)
	}
	return rep, nil
}

// attempt posts p once and records it. It reports whether the webhook
// answered 200; the error is only for the caller's context ending.
func (s *Sender) attempt(ctx context.Context, url string, p *push, d *DeliveryReport) (bool, error) {
	a := Attempt{At: time.Now(), Duplicate: p.dup}
	req, err := s.Request(ctx, url, p.body)
	if err != nil {
		return false, err
	}
	_, err = s.do(ctx, req)
	var se *StatusError
	switch {
	case err == nil:
		a.Status = http.StatusOK
	case errors.As(err, &se):
		a.Status, a.Err = se.Status, err.Error()
	default:
		a.Err = err.Error()
	}
	d.Attempts = append(d.Attempts, a)
	if err != nil && !IsRetryable(err) {
		return false, err
	}
	ok := err == nil
	if ok {
		if p.dup {
			d.DuplicateDelivered = true
		} else {
			d.Delivered = true
		}
	}
	s.log.Debug("callback posted", "event_id", d.EventID, "message_id", d.MessageID, "status", a.Status, "redelivery", p.attempt, "duplicate", p.dup)
	return ok, nil
}

// stamp sets header.token and header.app_id (when configured) and, for a
// duplicate push, header.event_id.
func (s *Sender) stamp(body []byte, eventID string) ([]byte, error) {
	if s.opts.VerificationToken == "" && s.opts.AppID == "" && eventID == "" {
		return body, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(top["header"], &hdr); err != nil {
		return nil, err
	}
	set := func(k, v string) {
		if v != "" {
			hdr[k], _ = json.Marshal(v)
		}
	}
	set("token", s.opts.VerificationToken)
	set("app_id", s.opts.AppID)
	set("event_id", eventID)
	raw, err := marshal(hdr)
	if err != nil {
		return nil, err
	}
	top["header"] = raw
	return marshal(top)
}
