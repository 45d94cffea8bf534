package e2e

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// tcpProxy forwards connections to a server; down resets every open connection and
// refuses new ones until up, which is what clients see when a database host dies.
type tcpProxy struct {
	t       testing.TB
	ln      net.Listener
	target  string
	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
	refused atomic.Int64
	wg      sync.WaitGroup
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &tcpProxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	px.wg.Add(1)
	go px.accept()
	t.Cleanup(px.close)
	return px
}

func (px *tcpProxy) addr() string { return px.ln.Addr().String() }

func (px *tcpProxy) accept() {
	defer px.wg.Done()
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		px.mu.Lock()
		down := px.down
		px.mu.Unlock()
		if down {
			px.refused.Add(1)
			reset(c)
			continue
		}
		up, err := net.Dial("tcp", px.target)
		if err != nil {
			reset(c)
			continue
		}
		px.mu.Lock()
		px.conns[c], px.conns[up] = struct{}{}, struct{}{}
		px.mu.Unlock()
		px.wg.Add(2)
		go px.pipe(c, up)
		go px.pipe(up, c)
	}
}

func (px *tcpProxy) pipe(dst, src net.Conn) {
	defer px.wg.Done()
	_, _ = io.Copy(dst, src)
	reset(dst)
	reset(src)
	px.mu.Lock()
	delete(px.conns, dst)
	delete(px.conns, src)
	px.mu.Unlock()
}

// reset closes c with an RST rather than a FIN, as a dead host's peer would see.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// setDown resets every connection and refuses new ones (true), or accepts again.
func (px *tcpProxy) setDown(down bool) {
	px.mu.Lock()
	px.down = down
	var open []net.Conn
	if down {
		for c := range px.conns {
			open = append(open, c)
		}
	}
	px.mu.Unlock()
	for _, c := range open {
		reset(c)
	}
}

func (px *tcpProxy) close() {
	_ = px.ln.Close()
	px.setDown(true)
	px.wg.Wait()
}

// proxyDatabase starts a proxy in front of dsn's server and returns it with the DSN
// that goes through it.
func proxyDatabase(t *testing.T, dsn string) (*tcpProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("the Postgres outage test needs a URL DSN with a TCP host (got an unparsable one: %v)", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	px := newTCPProxy(t, target)
	u.Host = px.addr()
	return px, u.String()
}
