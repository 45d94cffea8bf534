package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
)

// fakeWS is Lark's long-connection endpoint as SDK v3.5.1 speaks it (larktest does
// not implement the WebSocket transport): POST /callback/ws/endpoint answers a ws://
// URL and a ClientConfig, and the socket carries protobuf frames — pings answered
// with pongs, events pushed as data frames, acks read back.
type fakeWS struct {
	t   *testing.T
	srv *httptest.Server

	endpointCalls atomic.Int64
	busyFirst     atomic.Int64 // answer this many endpoint calls with code 1 (system busy)
	silent        atomic.Bool  // stop answering pings (a half-open connection)

	mu    sync.Mutex
	conns []*fakeConn
	acks  chan fakeAck
}

type fakeConn struct {
	c      *websocket.Conn
	wmu    sync.Mutex
	closed chan struct{}
}

type fakeAck struct {
	conn      int
	messageID string
	code      int
}

func newFakeWS(t *testing.T) *fakeWS {
	t.Helper()
	f := &fakeWS{t: t, acks: make(chan fakeAck, 100)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /callback/ws/endpoint", f.endpoint)
	mux.HandleFunc("GET /ws", f.socket)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.c.Close()
		}
		f.mu.Unlock()
		f.srv.Close()
	})
	return f
}

func (f *fakeWS) endpoint(w http.ResponseWriter, r *http.Request) {
	n := f.endpointCalls.Add(1)
	var creds struct{ AppID, AppSecret string }
	if err := json.NewDecoder(r.Body).Decode(&creds); err != nil || creds.AppID != tApp || creds.AppSecret != itSecret {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"code":1000040344,"msg":"app credentials invalid"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if f.busyFirst.Add(-1) >= 0 {
		_, _ = w.Write([]byte(`{"code":1,"msg":"system busy"}`))
		return
	}
	url := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/ws?device_id=dev" + strconv.FormatInt(n, 10) + "&service_id=7&access_key=SECRET"
	_, _ = fmt.Fprintf(w, `{"code":0,"msg":"ok","data":{"URL":%q,"ClientConfig":{"ReconnectCount":-1,"ReconnectInterval":1,"ReconnectNonce":1,"PingInterval":1}}}`, url)
}

func (f *fakeWS) socket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	fc := &fakeConn{c: c, closed: make(chan struct{})}
	f.mu.Lock()
	f.conns = append(f.conns, fc)
	idx := len(f.conns) - 1
	f.mu.Unlock()
	defer close(fc.closed)
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		var fr larkws.Frame
		if err := fr.Unmarshal(data); err != nil {
			f.t.Errorf("fake ws: unreadable frame: %v", err)
			return
		}
		hs := larkws.Headers(fr.Headers)
		switch {
		case fr.Method == int32(larkws.FrameTypeControl) && hs.GetString(larkws.HeaderType) == string(larkws.MessageTypePing):
			if f.silent.Load() {
				continue
			}
			pong := larkws.Frame{Method: int32(larkws.FrameTypeControl), Service: fr.Service,
				Headers: []larkws.Header{{Key: larkws.HeaderType, Value: string(larkws.MessageTypePong)}}}
			f.write(fc, &pong)
		case fr.Method == int32(larkws.FrameTypeData):
			var resp larkws.Response
			if err := json.Unmarshal(fr.Payload, &resp); err != nil {
				f.t.Errorf("fake ws: unreadable ack: %v", err)
				return
			}
			f.acks <- fakeAck{conn: idx, messageID: hs.GetString(larkws.HeaderMessageID), code: resp.StatusCode}
		}
	}
}

func (f *fakeWS) write(fc *fakeConn, fr *larkws.Frame) {
	b, err := fr.Marshal()
	if err != nil {
		f.t.Errorf("fake ws: marshal: %v", err)
		return
	}
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_ = fc.c.WriteMessage(websocket.BinaryMessage, b)
}

func (f *fakeWS) conn(i int) *fakeConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.conns) {
		return nil
	}
	return f.conns[i]
}

func (f *fakeWS) connCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// push sends an event payload on connection i as one data frame.
func (f *fakeWS) push(i int, frameID string, payload []byte) {
	fr := larkws.Frame{Method: int32(larkws.FrameTypeData), Service: 7, Payload: payload, Headers: []larkws.Header{
		{Key: larkws.HeaderType, Value: string(larkws.MessageTypeEvent)},
		{Key: larkws.HeaderMessageID, Value: frameID},
		{Key: larkws.HeaderSum, Value: "1"},
		{Key: larkws.HeaderSeq, Value: "0"},
		{Key: larkws.HeaderTraceID, Value: "trace-" + frameID},
	}}
	f.write(f.conn(i), &fr)
}

func (f *fakeWS) ack(t *testing.T, frameID string) fakeAck {
	t.Helper()
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	for {
		select {
		case a := <-f.acks:
			if a.messageID == frameID {
				return a
			}
		case <-timer.C:
			t.Fatalf("no ack for frame %s", frameID)
		}
	}
}

// gatedProducer blocks every ProduceSync until gate is closed, then behaves as next.
type gatedProducer struct {
	gate    chan struct{}
	entered chan struct{}
	next    evidence.Producer
}

func (p *gatedProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	select {
	case p.entered <- struct{}{}:
	default:
	}
	<-p.gate
	return p.next.ProduceSync(ctx, rs...)
}

type wsHarness struct {
	f    *fakeWS
	u    *unit
	lc   *LongConn
	stop context.CancelFunc
	done chan error
}

func newWSHarness(t *testing.T, producer evidence.Producer, mod func(*LongConnOptions)) *wsHarness {
	t.Helper()
	return newWSHarnessTopic(t, producer, "", mod)
}

// newWSHarnessTopic is newWSHarness producing evidence to topic ("": the default).
func newWSHarnessTopic(t *testing.T, producer evidence.Producer, topic string, mod func(*LongConnOptions)) *wsHarness {
	t.Helper()
	h := &wsHarness{f: newFakeWS(t), u: newUnit(t, unitOptions{producer: producer, topic: topic})}
	h.u.src.bind(tChat, tWS, store.WorkspaceFiring, time.Now().Add(-time.Hour))
	opts := LongConnOptions{AppID: tApp, AppSecret: itSecret, Domain: h.f.srv.URL, Ingester: h.u.ing,
		PingInterval: time.Second, LivenessMisses: 2, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		ConnectTimeout: 5 * time.Second, DrainTimeout: 5 * time.Second, Registry: h.u.reg}
	if mod != nil {
		mod(&opts)
	}
	lc, err := NewLongConn(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.lc = lc
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan error, 1)
	go func() { h.done <- lc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	})
	return h
}

func (h *wsHarness) event(t *testing.T, id string) []byte {
	return envJSON(t, h.u.builder.Text(msg(id, time.Now().Add(-time.Second)), "deploy rolled back"))
}

func TestLongConnDeliversToKafkaAndAcks(t *testing.T) {
	topic := testenv.NewTopic(t, itPartitions, nil)
	h := newWSHarnessTopic(t, testkafka.Client(t, kafka.Options{}), topic, nil)
	waitUntil(t, "connected", func() bool { return h.f.connCount() == 1 && h.lc.Connected() })

	h.f.push(0, "frame-1", h.event(t, "om_ws1"))
	if a := h.f.ack(t, "frame-1"); a.code != http.StatusOK {
		t.Fatalf("ack code %d, want 200", a.code)
	}
	// An unbound chat is ignored, and acknowledged.
	m := msg("om_ws2", time.Now())
	m.Chat = "oc_nobody"
	h.f.push(0, "frame-2", envJSON(t, h.u.builder.Text(m, "hi")))
	if a := h.f.ack(t, "frame-2"); a.code != http.StatusOK {
		t.Fatalf("ignored event ack code %d, want 200", a.code)
	}
	s := &stack{t: t, topic: topic}
	recs := s.readAll(1)
	if recs[0].rec.MessageID != "om_ws1" {
		t.Fatalf("topic holds %s", recs[0].rec.MessageID)
	}
	if n := h.u.events(OutcomeAccepted, ReasonOK); n != 1 {
		t.Fatalf("accepted = %v, want 1", n)
	}
}

func TestLongConnDoesNotAckWhatIsNotDurable(t *testing.T) {
	p := &recordingProducer{err: fmt.Errorf("produce: %w", context.DeadlineExceeded)}
	h := newWSHarness(t, p, nil)
	waitUntil(t, "connected", func() bool { return h.lc.Connected() })
	h.f.push(0, "frame-f", h.event(t, "om_fail"))
	if a := h.f.ack(t, "frame-f"); a.code != http.StatusInternalServerError {
		t.Fatalf("ack code %d, want 500 (not acknowledged)", a.code)
	}
	h.f.push(0, "frame-bad", []byte(`{"schema":"2.0","header":{"event_type":"im.message.receive_v1","token":"x"},"event":{}}`))
	if a := h.f.ack(t, "frame-bad"); a.code != http.StatusInternalServerError {
		t.Fatalf("malformed event ack code %d, want 500", a.code)
	}
	if n := h.u.events(OutcomeFailed, ReasonKafkaUnavailable); n != 1 {
		t.Fatalf("failed = %v, want 1", n)
	}
}

func TestLongConnRestartsASilentConnection(t *testing.T) {
	h := newWSHarness(t, nil, nil)
	waitUntil(t, "first connection", func() bool { return h.lc.Connected() })
	h.f.silent.Store(true) // pings go unanswered; the socket stays open
	first := h.f.conn(0)
	waitUntil(t, "the watchdog closed the silent socket", func() bool {
		select {
		case <-first.closed:
			return true
		default:
			return false
		}
	})
	h.f.silent.Store(false)
	waitUntil(t, "a new connection", func() bool { return h.f.connCount() >= 2 && h.lc.Connected() })
	if n := testutil.ToFloat64(h.lc.m.restarts.WithLabelValues("liveness_timeout")); n < 1 {
		t.Fatalf("liveness restarts = %v, want ≥ 1", n)
	}
	last := h.f.connCount() - 1
	h.f.push(last, "frame-after", h.event(t, "om_after_restart"))
	if a := h.f.ack(t, "frame-after"); a.code != http.StatusOK || a.conn != last {
		t.Fatalf("ack %+v, want 200 on connection %d", a, last)
	}
	if n := testutil.ToFloat64(h.lc.m.abandoned); n < 1 {
		t.Fatalf("abandoned SDK clients = %v, want ≥ 1", n)
	}
}

func TestLongConnReconnectsWhenTheServerCloses(t *testing.T) {
	h := newWSHarness(t, nil, nil)
	waitUntil(t, "first connection", func() bool { return h.lc.Connected() })
	_ = h.f.conn(0).c.Close()
	waitUntil(t, "reconnected", func() bool { return h.f.connCount() == 2 && h.lc.Connected() })
	if n := testutil.ToFloat64(h.lc.m.restarts.WithLabelValues("connection_lost")); n != 1 {
		t.Fatalf("connection_lost restarts = %v, want 1", n)
	}
	h.f.push(1, "frame-2", h.event(t, "om_second"))
	if a := h.f.ack(t, "frame-2"); a.code != http.StatusOK {
		t.Fatalf("ack code %d", a.code)
	}
}

func TestLongConnRetriesAFailingEndpoint(t *testing.T) {
	f := newFakeWS(t)
	f.busyFirst.Store(2)
	u := newUnit(t, unitOptions{})
	lc, err := NewLongConn(LongConnOptions{AppID: tApp, AppSecret: itSecret, Domain: f.srv.URL, Ingester: u.ing,
		PingInterval: time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Registry: u.reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lc.Run(ctx) }()
	waitUntil(t, "connected after two refusals", lc.Connected)
	if n := testutil.ToFloat64(lc.m.restarts.WithLabelValues("connect_failed")); n != 2 {
		t.Errorf("connect_failed restarts = %v, want 2", n)
	}
	if n := f.endpointCalls.Load(); n != 3 {
		t.Errorf("endpoint calls = %d, want 3", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	waitUntil(t, "socket closed at shutdown", func() bool {
		select {
		case <-f.conn(0).closed:
			return true
		default:
			return false
		}
	})
}

func TestLongConnShutdownDrainsEventsInFlight(t *testing.T) {
	p := &gatedProducer{gate: make(chan struct{}), entered: make(chan struct{}, 1), next: &recordingProducer{}}
	h := newWSHarness(t, p, nil)
	waitUntil(t, "connected", h.lc.Connected)
	h.f.push(0, "frame-slow", h.event(t, "om_slow"))
	<-p.entered // the event is being produced
	h.stop()    // shutdown begins while it is in flight
	// A new event during the drain is refused (not acknowledged).
	waitUntil(t, "Run draining", func() bool {
		h.lc.mu.Lock()
		g := h.lc.current
		h.lc.mu.Unlock()
		if g == nil {
			return false
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.closing
	})
	h.f.push(0, "frame-late", h.event(t, "om_late"))
	if a := h.f.ack(t, "frame-late"); a.code != http.StatusInternalServerError {
		t.Fatalf("event during drain acked %d, want 500", a.code)
	}
	close(p.gate)
	if a := h.f.ack(t, "frame-slow"); a.code != http.StatusOK {
		t.Fatalf("in-flight event acked %d, want 200", a.code)
	}
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		h.done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the drain")
	}
	<-h.f.conn(0).closed
	if n := h.u.events(OutcomeFailed, ReasonShuttingDown); n != 1 {
		t.Fatalf("refused during drain = %v, want 1", n)
	}
}

func TestLongConnCloseAndOptions(t *testing.T) {
	u := newUnit(t, unitOptions{})
	lc, err := NewLongConn(LongConnOptions{AppID: tApp, AppSecret: "s", Domain: closedURL(t), Ingester: u.ing,
		ConnectTimeout: time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- lc.Run(context.Background()) }()
	waitUntil(t, "failed connects", func() bool { // Close then meets Run in its retry loop
		return testutil.ToFloat64(lc.m.restarts.WithLabelValues("connect_failed")) >= 2
	})
	if err := lc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := lc.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run on a closed LongConn = %v, want ErrClosed", err)
	}
	bad := []LongConnOptions{
		{AppSecret: "s", Ingester: u.ing},
		{AppID: tApp, AppSecret: "s"},
		{AppID: tApp, AppSecret: "s", Ingester: u.ing, LivenessMisses: 1},
		{AppID: tApp, AppSecret: "s", Ingester: u.ing, BackoffMin: time.Minute, BackoffMax: time.Second},
		{AppID: tApp, AppSecret: "s", Ingester: u.ing, PingInterval: -time.Second},
	}
	for i, o := range bad {
		if _, err := NewLongConn(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%d: NewLongConn = %v, want ErrInvalidOptions", i, err)
		}
	}
}

func closedURL(t testing.TB) string { return "http://" + closedPort(t) }

// clientFrame builds a masked client WebSocket frame as gorilla writes it.
func clientFrame(opcode byte, payload []byte) []byte {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	out := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n < 1<<16:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	default:
		out = append(out, 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	out = append(out, key[:]...)
	for i, b := range payload {
		out = append(out, b^key[i%4])
	}
	return out
}

func TestIsDataFrame(t *testing.T) {
	marshal := func(f *larkws.Frame) []byte {
		b, err := f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ack := marshal(&larkws.Frame{Method: int32(larkws.FrameTypeData), Service: 7,
		Headers: []larkws.Header{{Key: "type", Value: "event"}, {Key: "message_id", Value: "m1"}},
		Payload: []byte(`{"code":200,"headers":null,"data":null}`)})
	bigAck := marshal(&larkws.Frame{Method: int32(larkws.FrameTypeData), Payload: make([]byte, 300)})
	ping := marshal(larkws.NewPingFrame(7))
	tests := []struct {
		name string
		p    []byte
		want bool
	}{
		{"ack frame", clientFrame(websocket.BinaryMessage, ack), true},
		{"ack with a 16-bit length", clientFrame(websocket.BinaryMessage, bigAck), true},
		{"ping frame", clientFrame(websocket.BinaryMessage, ping), false},
		{"text frame", clientFrame(websocket.TextMessage, ack), false},
		{"truncated frame", clientFrame(websocket.BinaryMessage, ack)[:20], false},
		{"handshake request", []byte("GET /ws?device_id=1 HTTP/1.1\r\nHost: x\r\n\r\n"), false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isDataFrame(tt.p); got != tt.want {
				t.Fatalf("isDataFrame = %v, want %v", got, tt.want)
			}
		})
	}
}
