package larktest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/larksuite/oapi-sdk-go/v3/core/httpserverext"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/connectors/lark/larktest"
)

// webhook is the real SDK's event dispatcher behind net/http, recording what
// its handlers receive.
type webhook struct {
	mu       sync.Mutex
	receives []*larkim.P2MessageReceiveV1
	recalls  []*larkim.P2MessageRecalledV1
	requests atomic.Int64
	// fail, when set, answers a request itself (before the SDK sees it).
	fail func(n int64, w http.ResponseWriter, r *http.Request) bool
	srv  *httptest.Server
}

func newWebhook(t *testing.T, token, key string) *webhook {
	t.Helper()
	wh := &webhook{}
	h := dispatcher.NewEventDispatcher(token, key).
		OnP2MessageReceiveV1(func(_ context.Context, ev *larkim.P2MessageReceiveV1) error {
			wh.mu.Lock()
			defer wh.mu.Unlock()
			wh.receives = append(wh.receives, ev)
			return nil
		}).
		OnP2MessageRecalledV1(func(_ context.Context, ev *larkim.P2MessageRecalledV1) error {
			wh.mu.Lock()
			defer wh.mu.Unlock()
			wh.recalls = append(wh.recalls, ev)
			return nil
		})
	sdk := httpserverext.NewEventHandlerFunc(h, larkevent.WithLogger(quietLogger{}))
	wh.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := wh.requests.Add(1)
		if wh.fail != nil && wh.fail(n, w, r) {
			return
		}
		sdk(w, r)
	}))
	t.Cleanup(wh.srv.Close)
	return wh
}

func (wh *webhook) received() (msgIDs, eventIDs []string, recalls []string) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	for _, ev := range wh.receives {
		msgIDs = append(msgIDs, deref(ev.Event.Message.MessageId))
		eventIDs = append(eventIDs, ev.EventV2Base.Header.EventID)
	}
	for _, ev := range wh.recalls {
		recalls = append(recalls, deref(ev.Event.MessageId))
	}
	return msgIDs, eventIDs, recalls
}

func TestDeliverToSDKDispatcher(t *testing.T) {
	for _, key := range []string{fxKey, ""} {
		name := "encrypted and signed"
		if key == "" {
			name = "plaintext without an encrypt key"
		}
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, fixture(t), func(o *larktest.Options) { o.EncryptKey = key })
			wh := newWebhook(t, fxToken, key)
			rep, err := srv.Deliver(context.Background(), wh.srv.URL)
			must(t, err)

			msgs, eventIDs, recalls := wh.received()
			var want []string
			for i := 1; i <= fxRootCnt; i++ {
				switch {
				case i == 11: // dropped
				default:
					want = append(want, string(fxID(i)))
				}
				if i == 3 {
					for r := 1; r <= 4; r++ {
						want = append(want, string(fxReply(r)))
					}
				}
			}
			want = append(want, "om_elsewhere", "om_10") // the second push of the "twice" event comes last
			if !slices.Equal(msgs, want) {
				t.Fatalf("received %v\nwant %v", msgs, want)
			}
			if !slices.Equal(recalls, []string{"om_07"}) {
				t.Fatalf("recalls %v", recalls)
			}
			first, second := eventIDs[slices.Index(msgs, "om_10")], eventIDs[len(eventIDs)-1]
			if first == second {
				t.Fatal("the duplicate push reuses the event_id; Lark says not to rely on it, so the duplicate must not")
			}
			if rep.Posts() != len(want)+1 || len(rep.Undelivered()) != 0 {
				t.Fatalf("report: %d posts, %d undelivered", rep.Posts(), len(rep.Undelivered()))
			}
			wh.mu.Lock()
			ev := wh.receives[0]
			wh.mu.Unlock()
			h := ev.EventV2Base.Header
			if h.Token != fxToken || h.AppID != srv.AppID() || h.TenantKey != fxTenant || ev.EventV2Base.Schema != "2.0" {
				t.Fatalf("header %+v: token and app_id must be the server's", h)
			}
			if deref(ev.Event.Message.Content) != `{"text":"message 1"}` || deref(ev.Event.Sender.SenderId.OpenId) != fxAlice {
				t.Fatalf("event %+v", ev.Event.Message)
			}
			// A second Deliver has nothing new to send.
			rep, err = srv.Deliver(context.Background(), wh.srv.URL)
			must(t, err)
			if rep.Posts() != 0 {
				t.Fatalf("second Deliver posted %d", rep.Posts())
			}
		})
	}
}

func TestVerifyURL(t *testing.T) {
	tests := []struct {
		name        string
		serverToken string
		serverKey   string
		hookToken   string
		hookKey     string
		wantErr     bool
	}{
		{"encrypted challenge accepted", fxToken, fxKey, fxToken, fxKey, false},
		{"plaintext challenge accepted", fxToken, "", fxToken, "", false},
		{"wrong verification token refused", "other", fxKey, fxToken, fxKey, true},
		{"wrong encrypt key refused", fxToken, "other-key", fxToken, fxKey, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, fixture(t), func(o *larktest.Options) {
				o.VerificationToken, o.EncryptKey = tt.serverToken, tt.serverKey
			})
			wh := newWebhook(t, tt.hookToken, tt.hookKey)
			var signed atomic.Bool
			wh.fail = func(_ int64, _ http.ResponseWriter, r *http.Request) bool {
				signed.Store(r.Header.Get(larktest.HeaderSignature) != "")
				return false
			}
			err := srv.VerifyURL(context.Background(), wh.srv.URL)
			if (err != nil) != tt.wantErr || err != nil && !errors.Is(err, larktest.ErrChallengeFailed) {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if signed.Load() {
				t.Fatal("url_verification carried a signature; Lark sends it unsigned")
			}
		})
	}
}

func TestSDKRejectsForgedCallbacks(t *testing.T) {
	sc := fixture(t)
	body := sc.Events()[0].Body
	tests := []struct {
		name   string
		key    string
		tamper func(*http.Request)
	}{
		{"forged signature", fxKey, func(r *http.Request) {
			sig := r.Header.Get(larktest.HeaderSignature)
			first := "a"
			if sig[0] == 'a' {
				first = "b"
			}
			r.Header.Set(larktest.HeaderSignature, first+sig[1:])
		}},
		{"replaced nonce", fxKey, func(r *http.Request) { r.Header.Set(larktest.HeaderNonce, "another-nonce") }},
		{"missing signature", fxKey, func(r *http.Request) { r.Header.Del(larktest.HeaderSignature) }},
		{"signed with another key", "not-the-key", func(*http.Request) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := newWebhook(t, fxToken, fxKey)
			s, err := larktest.NewSender(larktest.SenderOptions{EncryptKey: tt.key, VerificationToken: fxToken})
			must(t, err)
			req, err := s.Request(context.Background(), wh.srv.URL, body)
			must(t, err)
			tt.tamper(req)
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("status %d, want the SDK's 500", resp.StatusCode)
			}
			if msgs, _, _ := wh.received(); len(msgs) != 0 {
				t.Fatal("the handler ran for a forged callback")
			}
		})
	}
	t.Run("untampered request is accepted", func(t *testing.T) {
		wh := newWebhook(t, fxToken, fxKey)
		s, err := larktest.NewSender(larktest.SenderOptions{EncryptKey: fxKey})
		must(t, err)
		must(t, s.Send(context.Background(), wh.srv.URL, body))
		if msgs, _, _ := wh.received(); len(msgs) != 1 {
			t.Fatal("handler did not run")
		}
	})
}

// oneEvent is a scenario with a single message.
func oneEvent(t *testing.T, d larktest.Delivery) *larktest.Scenario {
	t.Helper()
	sc, err := larktest.NewScenario(larktest.App{AppID: "cli_one", BotOpenID: fxBot})
	must(t, err)
	must(t, sc.AddEvent(d, larktest.Builder{}.Text(larktest.Msg{ID: "om_one", Chat: fxChat, From: larktest.Author{OpenID: fxAlice}, At: fxBase}, "hi")))
	return sc
}

func TestRedelivery(t *testing.T) {
	sched := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}
	tests := []struct {
		name          string
		delivery      larktest.Delivery
		failFirst     int64 // requests answered 500
		wantPosts     int
		wantDelivered bool
		wantErr       error
		wantReceived  int
	}{
		{"first push succeeds", larktest.DeliverOnce, 0, 1, true, nil, 1},
		{"two failures then success", larktest.DeliverOnce, 2, 3, true, nil, 1},
		{"succeeds on the last redelivery", larktest.DeliverOnce, 4, 5, true, nil, 1},
		{"gives up after the schedule", larktest.DeliverOnce, 100, 5, false, larktest.ErrUndelivered, 0},
		{"twice: duplicate redelivered too", larktest.DeliverTwice, 1, 3, true, nil, 2},
		{"drop: never posted", larktest.DeliverDrop, 0, 0, false, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, oneEvent(t, tt.delivery), func(o *larktest.Options) { o.RetrySchedule = sched })
			wh := newWebhook(t, fxToken, fxKey)
			wh.fail = func(n int64, w http.ResponseWriter, _ *http.Request) bool {
				if n <= tt.failFirst {
					w.WriteHeader(http.StatusServiceUnavailable)
					return true
				}
				return false
			}
			rep, err := srv.Deliver(context.Background(), wh.srv.URL)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			d := rep.Deliveries[0]
			if len(d.Attempts) != tt.wantPosts || d.Delivered != tt.wantDelivered {
				t.Fatalf("attempts %d delivered %v, want %d %v", len(d.Attempts), d.Delivered, tt.wantPosts, tt.wantDelivered)
			}
			for i, a := range d.Attempts {
				if int64(i) < tt.failFirst && a.Status != http.StatusServiceUnavailable {
					t.Fatalf("attempt %d status %d, want 503", i, a.Status)
				}
			}
			if msgs, _, _ := wh.received(); len(msgs) != tt.wantReceived {
				t.Fatalf("handler ran %d times, want %d", len(msgs), tt.wantReceived)
			}
		})
	}
}

func TestRedeliveryOnTimeoutAndHandlerError(t *testing.T) {
	t.Run("slow answer counts as failed", func(t *testing.T) {
		srv := newServer(t, oneEvent(t, larktest.DeliverOnce), func(o *larktest.Options) { o.CallbackTimeout = 300 * time.Millisecond })
		wh := newWebhook(t, fxToken, fxKey)
		wh.fail = func(n int64, _ http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				// Read the body so the server notices the client hanging up,
				// then answer only after the sender gave up.
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
				case <-time.After(30 * time.Second):
					t.Error("the sender did not give up on a slow webhook")
				}
				return true
			}
			return false
		}
		rep, err := srv.Deliver(context.Background(), wh.srv.URL)
		must(t, err)
		a := rep.Deliveries[0].Attempts
		if len(a) < 2 || a[0].Status != 0 || a[0].Err == "" || !rep.Deliveries[0].Delivered {
			t.Fatalf("attempts %+v: want a failed first attempt without status, then success", a)
		}
	})
	t.Run("handler error from the SDK is a 500 and redelivered", func(t *testing.T) {
		srv := newServer(t, oneEvent(t, larktest.DeliverOnce), nil)
		var calls atomic.Int64
		h := dispatcher.NewEventDispatcher(fxToken, fxKey).OnP2MessageReceiveV1(func(context.Context, *larkim.P2MessageReceiveV1) error {
			if calls.Add(1) == 1 {
				return errors.New("kafka unavailable")
			}
			return nil
		})
		ts := httptest.NewServer(http.HandlerFunc(httpserverext.NewEventHandlerFunc(h, larkevent.WithLogger(quietLogger{}))))
		defer ts.Close()
		rep, err := srv.Deliver(context.Background(), ts.URL)
		must(t, err)
		if a := rep.Deliveries[0].Attempts; len(a) != 2 || a[0].Status != http.StatusInternalServerError || calls.Load() != 2 {
			t.Fatalf("attempts %+v, handler calls %d", a, calls.Load())
		}
	})
}

func TestDeliverStopsOnCancel(t *testing.T) {
	srv := newServer(t, oneEvent(t, larktest.DeliverOnce), func(o *larktest.Options) { o.RetrySchedule = []time.Duration{time.Hour} })
	wh := newWebhook(t, fxToken, fxKey)
	ctx, cancel := context.WithCancel(context.Background())
	wh.fail = func(int64, http.ResponseWriter, *http.Request) bool { cancel(); return false }
	// The push succeeds but the context ends during it: nothing is pending, so
	// Deliver returns without error.
	if _, err := srv.Deliver(ctx, wh.srv.URL); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}

	srv2 := newServer(t, oneEvent(t, larktest.DeliverOnce), func(o *larktest.Options) { o.RetrySchedule = []time.Duration{time.Hour} })
	ctx2, cancel2 := context.WithCancel(context.Background())
	wh.fail = func(_ int64, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		cancel2() // the redelivery would wait an hour
		return true
	}
	rep, err := srv2.Deliver(ctx2, wh.srv.URL)
	if !errors.Is(err, context.Canceled) || len(rep.Deliveries[0].Attempts) != 1 {
		t.Fatalf("err = %v attempts %d, want context.Canceled after one attempt", err, len(rep.Deliveries[0].Attempts))
	}

	srv3 := newServer(t, oneEvent(t, larktest.DeliverOnce), func(o *larktest.Options) { o.RetrySchedule = []time.Duration{time.Hour} })
	wh.fail = func(_ int64, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		go srv3.Close() // Close cancels running deliveries
		return true
	}
	if _, err := srv3.Deliver(context.Background(), wh.srv.URL); !errors.Is(err, context.Canceled) {
		t.Fatalf("Deliver during Close: err = %v", err)
	}
}

func TestSenderOptionsAndErrors(t *testing.T) {
	tests := []struct {
		name string
		opts larktest.SenderOptions
	}{
		{"negative timeout", larktest.SenderOptions{Timeout: -1}},
		{"negative duplicate delay", larktest.SenderOptions{DuplicateDelay: -1}},
		{"zero wait in schedule", larktest.SenderOptions{RetrySchedule: []time.Duration{0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := larktest.NewSender(tt.opts); !errors.Is(err, larktest.ErrInvalidOptions) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	s, err := larktest.NewSender(larktest.SenderOptions{RetrySchedule: []time.Duration{}})
	must(t, err)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer down.Close()
	err = s.Send(context.Background(), down.URL, []byte(`{}`))
	var se *larktest.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadGateway || !larktest.IsRetryable(err) {
		t.Fatalf("non-200: err = %v", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if err := s.Send(context.Background(), closed.URL, []byte(`{}`)); err == nil || !larktest.IsRetryable(err) {
		t.Fatalf("connection refused: err = %v, want retryable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Send(ctx, down.URL, []byte(`{}`)); err == nil || larktest.IsRetryable(err) {
		t.Fatalf("cancelled context: err = %v, want not retryable", err)
	}
	if err := s.Send(context.Background(), "://bad", []byte(`{}`)); !errors.Is(err, larktest.ErrInvalidOptions) || larktest.IsRetryable(err) {
		t.Fatalf("bad url: err = %v", err)
	}
	// An empty schedule means no redelivery at all.
	sc := oneEvent(t, larktest.DeliverOnce)
	rep, err := s.Deliver(context.Background(), down.URL, sc.Events())
	if !errors.Is(err, larktest.ErrUndelivered) || rep.Posts() != 1 {
		t.Fatalf("no retries: err = %v posts %d", err, rep.Posts())
	}
}

// quietLogger keeps the SDK's expected error logs (forged signatures, handler
// errors) out of the test output.
type quietLogger struct{}

func (quietLogger) Debug(context.Context, ...interface{}) {}
func (quietLogger) Info(context.Context, ...interface{})  {}
func (quietLogger) Warn(context.Context, ...interface{})  {}
func (quietLogger) Error(context.Context, ...interface{}) {}

// TestSenderKeepsConnectionsAlive: concurrent senders reuse their connections, as a
// load of many callbacks needs (the default transport keeps two idle connections per
// host and closes the rest after every callback).
func TestSenderKeepsConnectionsAlive(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	s, err := larktest.NewSender(larktest.SenderOptions{EncryptKey: "key"})
	if err != nil {
		t.Fatal(err)
	}
	const senders, each = 16, 25
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for range each {
				if err := s.Send(t.Context(), srv.URL, []byte(`{"schema":"2.0"}`)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// At most one connection per sender, and a dial that lost its race to an idle
	// connection is kept too: at most twice the senders, against hundreds without
	// keep-alive.
	if n := opened.Load(); n > 2*senders {
		t.Errorf("%d callbacks opened %d connections; want at most %d (one per concurrent sender, kept alive)", senders*each, n, 2*senders)
	}
}
