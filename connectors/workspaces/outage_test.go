package workspaces

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// tcpProxy forwards a local port to a target address and can be taken down (refusing
// connections and cutting those open) and brought back on the same port: a database
// outage as a client sees it.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			p.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer p.wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
}

// down closes the listener and every open connection.
func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// up listens again on the same port.
func (p *tcpProxy) up() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy up again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestFeedRidesOutARealDatabaseOutage: while Postgres cannot be reached, the feed
// retries the record with capped backoff (it is neither skipped nor parked) and
// applies it once the database is back.
func TestFeedRidesOutARealDatabaseOutage(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 1)
	direct, dsn := newStoreDSN(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.addr)
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	proxied, err := store.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	n := listen(t, direct)
	reg := prometheus.NewRegistry()
	e.consumer("g", applier(t, proxied), reg)
	const ws, chat = ids.WorkspaceID("INC-O"), ids.ChatID("oc_outage")

	e.record(rec(ws, 1, "firing", chat))
	n.waitFor(t, chat)

	proxy.down()
	e.record(rec(ws, 2, "recovered", chat))
	testenv.Eventually(t, waitLimit, "the feed retrying during the outage", func() bool { return retries(t, reg, opApply) >= 3 })
	if b, ok := bindingOf(t, direct, chat, ws); !ok || b.Workspace.Status != store.WorkspaceFiring {
		t.Fatalf("during the outage: %+v %t", b, ok)
	}
	proxy.up()
	n.waitFor(t, chat)
	if b, ok := bindingOf(t, direct, chat, ws); !ok || b.Workspace.Status != store.WorkspaceRecovered || b.Workspace.Version != 2 {
		t.Fatalf("after the outage: %+v %t", b, ok)
	}
	if got := feedCount(t, reg, outcomeDeadLettered); got != 0 {
		t.Errorf("dead-lettered %v records during the outage", got)
	}
}
