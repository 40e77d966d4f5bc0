package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/engine/goroutine"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/h2"
)

// The glue between the HTTP/1.1 engines and the h2c path (package h2):
// a CONNECT to a known upstream whose first bytes are the HTTP/2 client
// preface (grpc-go with HTTPS_PROXY), and "PRI * HTTP/2.0" on the listener
// (h2c with prior knowledge), are served by p.h2 stream by stream with the
// upstream's own retry budget and breaker.

// h2PeekTimeout bounds the wait for a tunnel's first bytes: a client that
// sends nothing first (a server-speaks-first protocol) gets its blind
// tunnel after it.
const h2PeekTimeout = time.Second

// initH2 builds p.h2 from the forwarding core (its upstreams, with their
// retry budgets and breakers, its policy, its key ledger and its
// registry); called by New.
func (p *Proxy) initH2() error {
	f := p.fw
	ups := make(map[*forward.Upstream]*h2.Upstream, len(f.Upstreams))
	for _, u := range f.Upstreams {
		ups[u] = &h2.Upstream{Name: u.Name, Attempts: u.Attempts, Addr: u.Resolved, Budget: u.Budget, Breaker: u.Breaker}
	}
	perTry := f.Cfg.PerTryTimeout
	h, err := h2.New(h2.Config{
		Lookup: func(host string) *h2.Upstream {
			if u := f.Match([]byte(host)); u != nil {
				return ups[u]
			}
			return nil
		},
		IsSelf:         func(hostPort string) bool { return f.IsSelf([]byte(hostPort)) },
		ChainCap:       f.Cfg.ChainCap,
		PerTryTimeout:  perTry,
		Policy:         f.Policy(),
		RetryMethods:   f.Cfg.RetryMethods,
		MaxReplayBytes: f.Cfg.MaxReplayBytes,
		Resolve:        f.ResolveAddr,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: perTry}
			return d.DialContext(ctx, network, addr)
		},
		Registerer: p.m.Reg,
		Now:        forward.NowNanos,
		Logger:     f.Logger,
		AccessLog:  p.accessLog.w,
		Entrypoint: f.Cfg.Entrypoint,
		// One ledger for both protocols: a client alternating between
		// HTTP/1.1 and HTTP/2 with one key has one chain budget.
		Ledger: f.Ledger(),
		KeyTTL: f.Cfg.KeyTTL,
		Engine: p.cfg.H2Engine,
	})
	if err != nil {
		return err
	}
	p.h2 = h
	return nil
}

// h2Connect is the start of a hijacked CONNECT tunnel to target. For a
// host --upstreams names it answers 200 at once and peeks at the first
// bytes: the HTTP/2 preface hands the connection to the h2c path; anything
// else (TLS) is dialed and tunnelled untouched, the peeked bytes first (a
// failed dial closes the tunnel). It returns false, having done nothing,
// for any other host: the caller tunnels as before.
func (p *Proxy) h2Connect(c net.Conn, target, addr string) bool {
	if p.h2 == nil || p.fw.Match([]byte(hostOnly(target))) == nil {
		return false
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return true
	}
	var buf [len(h2.ClientPreface)]byte
	_ = c.SetReadDeadline(time.Now().Add(h2PeekTimeout))
	n, err := io.ReadFull(c, buf[:])
	_ = c.SetReadDeadline(time.Time{})
	if n == len(buf) && string(buf[:]) == h2.ClientPreface {
		g := &guardConn{Conn: c, raw: c}
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			g.raw = u.UnsafeConn() // fasthttp's hijacked connection does not close itself
		}
		p.h2.ServeConn(&forward.PrefixConn{Conn: g, Prefix: buf[:n]}, target)
		g.end()
		return true
	}
	if err != nil && n == 0 && !isTimeout(err) {
		return true // the client went away
	}
	up, err := net.DialTimeout("tcp", addr, p.fw.Cfg.PerTryTimeout)
	if err != nil {
		return true
	}
	defer up.Close()
	goroutine.Pipe(&forward.PrefixConn{Conn: c, Prefix: bytes.Clone(buf[:n])}, up)
	return true
}

// guardConn keeps a hijacked connection from being used after the hijack
// handler returned (fasthttp then recycles it): the HTTP/2 server can
// still be writing a last frame (GOAWAY) from its own goroutine when
// ServeConn returns.
type guardConn struct {
	net.Conn
	raw  net.Conn // the socket, which Close closes
	mu   sync.RWMutex
	dead bool
}

func (g *guardConn) Read(b []byte) (int, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.dead {
		return 0, net.ErrClosed
	}
	return g.Conn.Read(b)
}

func (g *guardConn) Write(b []byte) (int, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.dead {
		return 0, net.ErrClosed
	}
	return g.Conn.Write(b)
}

// end closes the connection (unblocking a write in progress) and waits
// for it to return; every later use fails.
func (g *guardConn) end() {
	_ = g.raw.Close()
	g.mu.Lock()
	g.dead = true
	g.mu.Unlock()
}

func (g *guardConn) Close() error { return g.raw.Close() }

// h2Listener wraps the goroutine engine's listener (the data listener, or
// the loops' hand-off) so that a connection opening with the HTTP/2
// client preface, h2c with prior knowledge, goes to the h2c path, each
// stream routed by its :authority. fasthttp's parser refuses
// "PRI * HTTP/2.0" (its URI), and the event loop hands such a connection
// off as malformed with the bytes it read, so this is the one place that
// sees it for both engines.
func (p *Proxy) h2Listener(ln net.Listener) net.Listener {
	if p.h2 == nil {
		return ln
	}
	return &h2SniffListener{Listener: ln, p: p}
}

type h2SniffListener struct {
	net.Listener
	p *Proxy
}

func (l *h2SniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &h2SniffConn{Conn: c, p: l.p}, nil
}

// h2SniffConn looks at a connection's first bytes as the server reads
// them: as soon as they differ from the preface (an HTTP/1.1 request: at
// its first or second byte) they are passed on; the whole preface hands
// the connection over and ends it for the HTTP/1.1 server.
type h2SniffConn struct {
	net.Conn
	p       *Proxy
	sniffed bool
	handed  atomic.Bool
	pending []byte
}

// NetConn is the connection sniffed (the goroutine engine looks through it
// for a client's close).
func (c *h2SniffConn) NetConn() net.Conn { return c.Conn }

func (c *h2SniffConn) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if c.sniffed {
		return c.Conn.Read(b)
	}
	c.sniffed = true
	const preface = h2.ClientPreface
	n, err := c.Conn.Read(b)
	if k := min(n, len(preface)); string(b[:k]) != preface[:k] || err != nil && n < len(preface) {
		return n, err // HTTP/1.1 (or the end): read straight into the server's buffer
	}
	got := bytes.Clone(b[:n])
	for len(got) < len(preface) {
		var more [len(preface)]byte
		k, err := c.Conn.Read(more[:len(preface)-len(got)])
		got = append(got, more[:k]...)
		if string(got) != preface[:len(got)] || err != nil {
			c.pending = got
			if len(got) == 0 {
				return 0, err
			}
			return c.Read(b)
		}
	}
	c.handed.Store(true)
	// The HTTP/1.1 server's idle deadline must not outlive it.
	_ = c.Conn.SetDeadline(time.Time{})
	go c.p.h2.ServeConn(&forward.PrefixConn{Conn: c.Conn, Prefix: got}, "")
	return 0, io.EOF
}

// Deadlines the HTTP/1.1 server sets after the hand-off are ignored.
func (c *h2SniffConn) SetDeadline(t time.Time) error {
	if c.handed.Load() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

func (c *h2SniffConn) SetReadDeadline(t time.Time) error {
	if c.handed.Load() {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *h2SniffConn) SetWriteDeadline(t time.Time) error {
	if c.handed.Load() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// Close leaves a connection handed to the h2c path open: it is its now.
func (c *h2SniffConn) Close() error {
	if c.handed.Load() {
		return nil
	}
	return c.Conn.Close()
}

// shutdownH2 sends GOAWAY on the h2c connections and waits for their
// streams until ctx ends.
func (p *Proxy) shutdownH2(ctx context.Context) error {
	if p.h2 == nil {
		return nil
	}
	return p.h2.Shutdown(ctx)
}

func hostOnly(hostPort string) string {
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		return h
	}
	return strings.Trim(hostPort, "[]")
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
