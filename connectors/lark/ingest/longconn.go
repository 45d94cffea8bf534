package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/options"
)

// Defaults of LongConnOptions.
const (
	// DefaultPingInterval is the SDK's and Lark's ping period (Lark's ClientConfig
	// PingInterval is 120 s).
	DefaultPingInterval = 2 * time.Minute
	// DefaultLivenessMisses: a connection that received nothing (no pong, no event)
	// for this many ping intervals is considered dead.
	DefaultLivenessMisses  = 3
	DefaultConnectTimeout  = 30 * time.Second
	DefaultBackoffMin      = time.Second
	DefaultBackoffMax      = 2 * time.Minute
	DefaultDrainTimeout    = 5 * time.Second
	DefaultMaxSDKClients   = 100
	defaultDialTimeout     = 30 * time.Second
	defaultDialKeepAlive   = 15 * time.Second
	minLivenessCheckPeriod = 50 * time.Millisecond
	maxLivenessCheckPeriod = 30 * time.Second
)

// ErrTooManyClients is returned by Run when it has abandoned MaxSDKClients SDK
// clients: each leaves idle goroutines behind (see LongConn), so the process should be
// restarted by its supervisor.
var ErrTooManyClients = errors.New("lark long connection restarted too often; restart the process")

// LongConnOptions configure a LongConn.
type LongConnOptions struct {
	// AppID and AppSecret are the app's credentials. Required.
	AppID, AppSecret string
	// Domain is the Open Platform base URL (default lark.FeishuBaseUrl, as the SDK;
	// lark.LarkBaseUrl for Lark international).
	Domain string
	// Ingester handles the events. Required.
	Ingester *Ingester
	// PingInterval is the ping period the server configures (default
	// DefaultPingInterval). Together with LivenessMisses it sets the liveness
	// timeout: PingInterval × LivenessMisses without a received byte restarts the
	// connection.
	PingInterval   time.Duration
	LivenessMisses int
	// ConnectTimeout bounds getting the endpoint and dialing (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between connections (with jitter).
	BackoffMin, BackoffMax time.Duration
	// DrainTimeout bounds how long shutdown waits for events being handled.
	DrainTimeout time.Duration
	// MaxSDKClients bounds the SDK clients one Run abandons (retired while their
	// Start still blocked; default DefaultMaxSDKClients); Run then returns
	// ErrTooManyClients.
	MaxSDKClients int
	// Logger receives connection state changes and the SDK's sanitized log. Nil discards.
	Logger *slog.Logger
	// Registry receives the larkline_lark_longconn_* metrics. Nil: not registered.
	Registry *prometheus.Registry
}

// LongConn receives events over the SDK's long connection (larkws.Client) and feeds
// them through the same path as the webhook. The SDK acknowledges an event (code
// 200) only when the handler returns nil, i.e. for accepted and ignored events.
//
// v3.5.1's client cannot be stopped: Start blocks forever once connected and ignores
// its context, and a silently dead connection is never noticed. LongConn therefore
// runs each connection as a generation: a fresh SDK client with auto-reconnect off,
// whose socket LongConn owns (see wsDial), watched by a liveness watchdog. When the
// socket fails, the watchdog sees nothing arrive for the liveness timeout, or Run's
// context ends, LongConn retires the generation (after draining events in flight, on
// shutdown): it closes the socket itself and starts a new client after a backoff.
//
// The SDK client of a retired generation is never told: its read error path
// (disconnect) writes fields its ping loop reads without a lock, a data race in
// v3.5.1. Instead the socket LongConn hands the SDK never reports a read error — the
// SDK's reader is parked for good — and swallows writes once retired, so the client
// goes quiet without touching its racy code.
//
// What the SDK leaks: a client whose Start did not return leaves at most four idle
// goroutines for the life of the process: the one blocked in Start (select {}), its
// ping loop (wakes every ping interval and writes into the retired socket), its
// message cache's cleanup ticker, and its parked reader. The leak is bounded by
// MaxSDKClients per Run (Run then returns ErrTooManyClients so that the supervisor
// restarts the process) and exposed as larkline_lark_longconn_abandoned_clients.
type LongConn struct {
	appID, secret  string
	domain         string
	ing            *Ingester
	liveness       time.Duration
	checkEvery     time.Duration
	connectTimeout time.Duration
	backoffMin     time.Duration
	backoffMax     time.Duration
	drainTimeout   time.Duration
	maxClients     int
	log            *slog.Logger
	sdkLog         larkcore.Logger
	m              *longConnMetrics

	life    *lifecycle.State
	mu      sync.Mutex
	closing bool // Close was called: Run starts no new generation
	current *generation
	clients int // SDK clients abandoned (Start never returned)
}

type longConnMetrics struct {
	connected *prometheus.GaugeVec
	restarts  *prometheus.CounterVec
	abandoned prometheus.Gauge
	received  prometheus.Counter
}

// NewLongConn validates opts.
func NewLongConn(opts LongConnOptions) (*LongConn, error) {
	switch {
	case opts.AppID == "" || opts.AppSecret == "":
		return nil, fmt.Errorf("%w: AppID and AppSecret are required", ErrInvalidOptions)
	case opts.Ingester == nil:
		return nil, fmt.Errorf("%w: Ingester is required", ErrInvalidOptions)
	}
	if opts.Domain == "" {
		opts.Domain = lark.FeishuBaseUrl
	}
	if err := options.Durations(
		options.Duration{Name: "PingInterval", V: &opts.PingInterval, Default: DefaultPingInterval},
		options.Duration{Name: "ConnectTimeout", V: &opts.ConnectTimeout, Default: DefaultConnectTimeout},
		options.Duration{Name: "BackoffMin", V: &opts.BackoffMin, Default: DefaultBackoffMin},
		options.Duration{Name: "BackoffMax", V: &opts.BackoffMax, Default: DefaultBackoffMax},
		options.Duration{Name: "DrainTimeout", V: &opts.DrainTimeout, Default: DefaultDrainTimeout},
	); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	if opts.BackoffMin > opts.BackoffMax {
		return nil, fmt.Errorf("%w: BackoffMin %s exceeds BackoffMax %s", ErrInvalidOptions, opts.BackoffMin, opts.BackoffMax)
	}
	switch {
	case opts.LivenessMisses == 0:
		opts.LivenessMisses = DefaultLivenessMisses
	case opts.LivenessMisses < 2:
		return nil, fmt.Errorf("%w: LivenessMisses %d is below 2 (one late pong must not restart)", ErrInvalidOptions, opts.LivenessMisses)
	}
	switch {
	case opts.MaxSDKClients == 0:
		opts.MaxSDKClients = DefaultMaxSDKClients
	case opts.MaxSDKClients < 0:
		return nil, fmt.Errorf("%w: MaxSDKClients %d is negative", ErrInvalidOptions, opts.MaxSDKClients)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &longConnMetrics{
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "larkline_lark_longconn_connected",
			Help: "1 while the long connection to Lark is established.",
		}, nil),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_longconn_restarts_total",
			Help: "Long connections replaced, by reason (connect_failed, connect_timeout, connection_lost, liveness_timeout).",
		}, []string{"reason"}),
		abandoned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_lark_longconn_abandoned_clients",
			Help: "SDK clients retired while their Start still blocked; each leaves at most four idle goroutines (the SDK cannot be stopped).",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_lark_longconn_events_total",
			Help: "Events received over the long connection (outcomes are in larkline_lark_events_total).",
		}),
	}
	if err := register(opts.Registry, m.connected, m.restarts, m.abandoned, m.received); err != nil {
		return nil, err
	}
	liveness := opts.PingInterval * time.Duration(opts.LivenessMisses)
	installDialHook()
	return &LongConn{
		life:  lifecycle.New("lark long connection", lifecycle.OneAtATime, ErrClosed),
		appID: opts.AppID, secret: opts.AppSecret, domain: opts.Domain, ing: opts.Ingester,
		liveness:       liveness,
		checkEvery:     min(max(liveness/6, minLivenessCheckPeriod), maxLivenessCheckPeriod),
		connectTimeout: opts.ConnectTimeout, backoffMin: opts.BackoffMin, backoffMax: opts.BackoffMax,
		drainTimeout: opts.DrainTimeout, maxClients: opts.MaxSDKClients,
		log:    log.With("component", "lark.longconn"),
		sdkLog: larkapi.SDKLogger(log.With("component", "lark.longconn.sdk")),
		m:      m,
	}, nil
}

// Connected reports whether a connection is established (for a readiness check).
func (l *LongConn) Connected() bool {
	l.mu.Lock()
	g := l.current
	l.mu.Unlock()
	return g != nil && g.upgraded.Load() && !g.isLost()
}

// Run connects and keeps a connection until ctx is done or Close is called; then it
// stops taking events, waits up to DrainTimeout for those in flight, closes the
// connection and returns nil. A lost, silent or failed connection is replaced after
// a capped exponential backoff.
func (l *LongConn) Run(ctx context.Context) error {
	ctx, end, err := l.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	defer func() {
		l.mu.Lock()
		l.current = nil
		l.mu.Unlock()
		l.m.connected.WithLabelValues().Set(0)
	}()

	delay := l.backoffMin
	for {
		if ctx.Err() != nil {
			return nil
		}
		l.mu.Lock()
		tooMany := l.clients >= l.maxClients
		l.mu.Unlock()
		if tooMany {
			return fmt.Errorf("%w (%d SDK clients)", ErrTooManyClients, l.maxClients)
		}
		g := newGeneration(ctx)
		l.mu.Lock()
		if l.closing {
			l.mu.Unlock()
			return nil
		}
		l.current = g
		l.mu.Unlock()
		healthy, err := l.runGeneration(ctx, g)
		if ctx.Err() != nil {
			return nil
		}
		reason := restartReason(err)
		l.m.restarts.WithLabelValues(reason).Inc()
		if healthy {
			delay = l.backoffMin
		}
		wait := backoff.Jitter(delay)
		l.log.Warn("lark long connection restarting", "reason", reason, "retry_in", wait, "err", err)
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
		delay = min(2*delay, l.backoffMax)
	}
}

func restartReason(err error) string {
	switch {
	case errors.Is(err, ErrLivenessTimeout):
		return "liveness_timeout"
	case errors.Is(err, ErrConnectionLost):
		return "connection_lost"
	case errors.Is(err, ErrConnectTimeout):
		return "connect_timeout"
	}
	return "connect_failed"
}

// runGeneration connects one SDK client and watches it until it must be replaced
// (the error says why) or ctx is done (nil). healthy reports whether it stayed
// connected for at least one liveness period.
func (l *LongConn) runGeneration(ctx context.Context, g *generation) (healthy bool, err error) {
	cli := larkws.NewClient(l.appID, l.secret,
		larkws.WithEventHandler(l.dispatcher(g)),
		larkws.WithLogger(l.sdkLog),
		larkws.WithLogLevel(larkcore.LogLevelInfo),
		larkws.WithAutoReconnect(false),
		larkws.WithDomain(l.domain),
	)
	startErr := make(chan error, 1)

	// Connect: one generation at a time owns the dial hook.
	select {
	case wsDial.gate <- struct{}{}:
	case <-ctx.Done():
		g.close()
		return false, nil
	}
	wsDial.mu.Lock()
	wsDial.pending = g
	wsDial.mu.Unlock()
	// Start never returns once connected: this goroutine is the first of those an
	// SDK client leaves behind.
	go func() {
		err := cli.Start(g.ctx)
		g.startReturned.Store(true)
		startErr <- err
	}()
	defer func() {
		// Counted when Start is still blocked as the generation ends (a Start about to
		// return may be counted too: the bound errs on the safe side).
		if !g.startReturned.Load() {
			l.mu.Lock()
			l.clients++
			l.mu.Unlock()
			l.m.abandoned.Inc()
		}
		l.m.connected.WithLabelValues().Set(0)
	}()
	if err := l.awaitDial(ctx, g, startErr); err != nil || ctx.Err() != nil {
		g.close()
		return false, err
	}
	return l.watch(ctx, g, startErr)
}

// awaitDial waits until the SDK dialed, Start failed, the connect timeout passed
// or ctx ended, then gives the dial hook back. It returns why the generation
// cannot go on (nil when ctx ended).
func (l *LongConn) awaitDial(ctx context.Context, g *generation, startErr <-chan error) (err error) {
	timer := time.NewTimer(l.connectTimeout)
	dialed, started := false, false // started: Start returned (its error was received)
	select {
	case <-g.dialed:
		dialed = true
	case err = <-startErr:
		started = true
		err = fmt.Errorf("connect: %w", err)
	case <-timer.C:
		err = ErrConnectTimeout
	case <-ctx.Done():
	}
	timer.Stop()
	if !dialed && !started {
		// Giving up while the SDK may still be about to dial: cancel the generation
		// (the endpoint request and the dial honour its context, a socket attached
		// now is closed at once) and wait until the SDK dialed or gave up, so that
		// no later dial can escape the hook.
		g.close()
		select {
		case <-g.dialed:
		case <-startErr:
		}
	}
	wsDial.mu.Lock()
	if wsDial.pending == g {
		wsDial.pending = nil
	}
	wsDial.mu.Unlock()
	<-wsDial.gate
	return err
}

// watch keeps a connected generation until ctx ends (drained, nil), Start
// returns, the connection is lost or nothing was received for the liveness
// period. healthy reports whether it stayed connected for a liveness period.
func (l *LongConn) watch(ctx context.Context, g *generation, startErr <-chan error) (healthy bool, err error) {
	ticker := time.NewTicker(l.checkEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			g.drain(l.drainTimeout)
			return healthy, nil
		case err := <-startErr:
			g.close()
			return false, fmt.Errorf("connect: %w", err)
		case <-g.lostCh:
			g.close()
			return healthy, fmt.Errorf("%w: %v", ErrConnectionLost, g.lostErr())
		case <-ticker.C:
			if g.upgraded.Load() {
				l.m.connected.WithLabelValues().Set(1)
			}
			now := time.Now()
			if silent := now.Sub(g.lastReadAt()); silent > l.liveness {
				g.close()
				return healthy, fmt.Errorf("%w: nothing received for %s", ErrLivenessTimeout, silent.Round(time.Millisecond))
			}
			if g.upgraded.Load() && now.Sub(g.started) >= l.liveness {
				healthy = true
			}
		}
	}
}

// dispatcher is the SDK event dispatcher of one generation: no token or key (the
// long connection authenticates at connect time and carries plaintext).
func (l *LongConn) dispatcher(g *generation) *dispatcher.EventDispatcher {
	d := dispatcher.NewEventDispatcher("", "")
	d.InitConfig(larkevent.WithLogger(l.sdkLog), larkevent.WithLogLevel(larkcore.LogLevelInfo))
	d.OnP2MessageReceiveV1(func(ctx context.Context, ev *larkim.P2MessageReceiveV1) error {
		l.m.received.Inc()
		if !g.enter() {
			return l.refuse(eventIDOf(ev))
		}
		defer g.leave()
		return ackError(l.ing.handleReceive(ctx, ev, transportLongConn))
	})
	d.OnP2MessageRecalledV1(func(ctx context.Context, ev *larkim.P2MessageRecalledV1) error {
		l.m.received.Inc()
		if !g.enter() {
			return l.refuse(recallEventIDOf(ev))
		}
		defer g.leave()
		return ackError(l.ing.handleRecall(ctx, ev, transportLongConn))
	})
	return d
}

func (l *LongConn) refuse(eventID string) error {
	res := failed(ReasonShuttingDown, ErrShuttingDown)
	l.ing.finish(transportLongConn, time.Now(), res, eventID)
	return &EventError{Outcome: res.Outcome, Reason: res.Reason, Err: res.Err}
}

// ackError is nil for an acknowledged result: the SDK then answers code 200.
func ackError(res Result) error {
	if res.Outcome.Acknowledged() {
		return nil
	}
	return &EventError{Outcome: res.Outcome, Reason: res.Reason, Err: res.Err}
}

// Close stops a running Run without a drain (the connection is cut and events in
// flight are cancelled), waits for it to return, and makes later Run calls return
// ErrClosed. It is idempotent.
func (l *LongConn) Close() error {
	l.mu.Lock()
	l.closing = true
	g := l.current
	l.mu.Unlock()
	if g != nil {
		g.close()
	}
	l.life.Close()
	return nil
}

// generation is one SDK client and the socket it dialed.
type generation struct {
	ctx     context.Context
	cancel  context.CancelFunc
	started time.Time

	lastRead      atomic.Int64 // Unix nanoseconds of the last byte received
	upgraded      atomic.Bool  // the client wrote after reading: the handshake succeeded
	retired       atomic.Bool  // the socket was closed by LongConn; the SDK must not notice
	startReturned atomic.Bool

	mu        sync.Mutex
	conn      *trackedConn
	dialed    chan struct{}
	lostCh    chan struct{}
	lostOnce  sync.Once
	lost      error
	closing   bool
	inFlight  int           // events in our handler
	acksOwed  int           // events handled whose ack frame the SDK has not written yet
	changed   chan struct{} // signalled when inFlight or acksOwed drop
	closeOnce sync.Once
}

func newGeneration(parent context.Context) *generation {
	// Handlers run under the generation's context; it is cancelled only after a
	// graceful drain, so events in flight at shutdown still complete.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	g := &generation{ctx: ctx, cancel: cancel, started: time.Now(), dialed: make(chan struct{}), lostCh: make(chan struct{}),
		changed: make(chan struct{}, 1)}
	g.lastRead.Store(g.started.UnixNano())
	return g
}

func (g *generation) lastReadAt() time.Time { return time.Unix(0, g.lastRead.Load()) }

// attach adopts the socket the SDK dialed.
func (g *generation) attach(c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, g: g}
	g.mu.Lock()
	g.conn = tc
	closing := g.closing
	g.mu.Unlock()
	g.lastRead.Store(time.Now().UnixNano())
	close(g.dialed)
	if closing {
		g.retired.Store(true)
		_ = c.Close()
	}
	return tc
}

func (g *generation) markLost(err error) {
	g.lostOnce.Do(func() {
		g.mu.Lock()
		g.lost = err
		g.mu.Unlock()
		close(g.lostCh)
	})
}

func (g *generation) lostErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lost
}

func (g *generation) isLost() bool {
	select {
	case <-g.lostCh:
		return true
	default:
		return false
	}
}

// enter admits one event unless the generation is closing. Either way the SDK
// writes an ack frame for the event once the handler returns; enter and leave keep
// count of it, so that a drain waits until the ack is on the wire.
func (g *generation) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		g.acksOwed++
		return false
	}
	g.inFlight++
	return true
}

// leave ends an admitted event: the SDK writes its ack next.
func (g *generation) leave() {
	g.mu.Lock()
	g.inFlight--
	g.acksOwed++
	g.mu.Unlock()
	g.signal()
}

// ackWritten records an ack frame the SDK wrote.
func (g *generation) ackWritten() {
	g.mu.Lock()
	if g.acksOwed > 0 {
		g.acksOwed--
	}
	g.mu.Unlock()
	g.signal()
}

func (g *generation) signal() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// drain refuses new events, waits up to timeout until the events in flight are
// handled and their acks written on the still open socket, then closes.
func (g *generation) drain(timeout time.Duration) {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		g.mu.Lock()
		idle := g.inFlight == 0 && g.acksOwed == 0
		g.mu.Unlock()
		if idle || g.isLost() {
			break
		}
		select {
		case <-g.changed:
			continue
		case <-g.lostCh:
		case <-t.C:
		}
		break
	}
	g.close()
}

// close refuses new events, retires the socket (closing it underneath the SDK) and
// cancels the generation's context. It is idempotent.
func (g *generation) close() {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closing = true
		c := g.conn
		g.mu.Unlock()
		g.retired.Store(true)
		if c != nil {
			_ = c.Conn.Close()
			g.markLost(net.ErrClosed)
		}
		g.cancel()
	})
}

// trackedConn is the socket handed to the SDK. Reads feed the liveness watchdog. A
// read or write failure marks the generation lost, but is never reported to the SDK
// (see LongConn): a failed read parks the SDK's reader for good, and writes after
// the loss or retirement are swallowed.
type trackedConn struct {
	net.Conn
	g     *generation
	reads atomic.Bool
}

// park blocks the calling SDK goroutine for the life of the process.
func park() { select {} }

func (c *trackedConn) Read(p []byte) (int, error) {
	if c.g.retired.Load() {
		park()
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.g.lastRead.Store(time.Now().UnixNano())
		c.reads.Store(true)
	}
	if err != nil {
		c.g.markLost(err)
		if n > 0 {
			return n, nil // hand over what arrived; the next Read parks
		}
		park()
	}
	return n, nil
}

func (c *trackedConn) Write(p []byte) (int, error) {
	if c.g.retired.Load() || c.g.isLost() {
		if isDataFrame(p) {
			c.g.ackWritten()
		}
		return len(p), nil
	}
	ack := isDataFrame(p)
	n, err := c.Conn.Write(p)
	if ack {
		c.g.ackWritten()
	}
	if err != nil {
		c.g.markLost(err)
		return len(p), nil
	}
	if c.reads.Load() {
		// The SDK writes only the handshake before reading its answer, and pings
		// only once connect succeeded: a write after a read means upgraded.
		c.g.upgraded.Store(true)
	}
	return n, nil
}

// isDataFrame reports whether p is one whole client WebSocket frame (gorilla writes a
// small frame with one Write) carrying an SDK data frame, i.e. an event's ack: a
// binary frame, masked as a client's must be, whose payload is a protobuf
// larkws.Frame with method 1. Handshake bytes and pings are not.
func isDataFrame(p []byte) bool {
	if len(p) < 2 || p[0]&0x0f != websocket.BinaryMessage {
		return false
	}
	n, off := uint64(p[1]&0x7f), 2
	switch n {
	case 126:
		if len(p) < 4 {
			return false
		}
		n, off = uint64(binary.BigEndian.Uint16(p[2:4])), 4
	case 127:
		if len(p) < 10 {
			return false
		}
		n, off = binary.BigEndian.Uint64(p[2:10]), 10
	}
	var key [4]byte
	if p[1]&0x80 != 0 {
		if len(p) < off+4 {
			return false
		}
		copy(key[:], p[off:off+4])
		off += 4
	}
	if n != uint64(len(p)-off) {
		return false
	}
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = p[off+i] ^ key[i%4]
	}
	var f larkws.Frame
	return f.Unmarshal(payload) == nil && f.Method == int32(larkws.FrameTypeData)
}

// Close is called by gorilla when a handshake fails; the SDK itself never gets to
// close a retired socket.
func (c *trackedConn) Close() error {
	c.g.markLost(net.ErrClosed)
	return c.Conn.Close()
}

// wsDial routes the SDK's WebSocket dials through LongConn. The v3.5.1 client
// dials with gorilla's package-level websocket.DefaultDialer and keeps the
// connection in an unexported field, so the only way to own the socket (to notice
// its silence and to close it) is a NetDialContext on that dialer, installed once per
// process. A dial with no generation pending (another user of DefaultDialer) passes
// through unchanged; generations dial one at a time (gate), so a dial is attributed
// to the generation that is connecting.
var wsDial struct {
	once    sync.Once
	gate    chan struct{}
	mu      sync.Mutex
	pending *generation
}

func installDialHook() {
	wsDial.once.Do(func() {
		wsDial.gate = make(chan struct{}, 1)
		base := websocket.DefaultDialer.NetDialContext
		if base == nil {
			d := &net.Dialer{Timeout: defaultDialTimeout, KeepAlive: defaultDialKeepAlive}
			base = d.DialContext
		}
		websocket.DefaultDialer.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			wsDial.mu.Lock()
			g := wsDial.pending
			wsDial.pending = nil
			wsDial.mu.Unlock()
			if g == nil {
				return base(ctx, network, addr)
			}
			// The SDK dials without a context of its own: bound the dial by the
			// generation's.
			dctx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(g.ctx, cancel)
			c, err := base(dctx, network, addr)
			stop()
			cancel()
			if err != nil {
				return nil, err
			}
			return g.attach(c), nil
		}
	})
}
