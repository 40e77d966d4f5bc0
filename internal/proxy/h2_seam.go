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

// A CONNECT to a known upstream is judged by its first bytes, however late
// they come within --http-request-timeout (tunnelKind): a tunnel to a
// service the policy covers is never opened blind because the client was
// slow (a 1 s peek used to tunnel an h2c preface that came after it).

// initH2 builds p.h2 from the forwarding core (its upstreams, with their
// retry budgets and breakers, its policy, its key ledger and its
// registry); called by New.
func (p *Proxy) initH2() error {
	f := p.fw
	ups := make(map[*forward.Upstream]*h2.Upstream, len(f.Upstreams))
	for _, u := range f.Upstreams {
		ups[u] = &h2.Upstream{Name: u.Name, Attempts: u.Attempts, Addr: u.Resolved, Budget: u.Budget, Breaker: u.Breaker, Dedup: u.Dedup, PerTryTimeout: u.PerTry}
	}
	perTry := f.Cfg.PerTryTimeout
	h, err := h2.New(h2.Config{
		Lookup: func(host string) *h2.Upstream {
			if u := f.Match([]byte(host)); u != nil {
				return ups[u]
			}
			return nil
		},
		IsSelf:        func(hostPort string) bool { return f.IsSelf([]byte(hostPort)) },
		ChainCap:      f.Cfg.ChainCap,
		PerTryTimeout: perTry,
		// The entry's bound on a call's deadline, as on the HTTP/1.1 path.
		MaxTimeToAnswer: f.Cfg.MaxTimeToAnswer,
		Policy:          f.Policy(),
		RetryMethods:    f.Cfg.RetryMethods,
		MaxReplayBytes:  f.Cfg.MaxReplayBytes,
		Resolve:         f.ResolveAddr,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: perTry}
			return d.DialContext(ctx, network, addr)
		},
		Registerer: p.m.Reg,
		Now:        forward.NowNanos,
		Logger:     f.Logger,
		AccessLog:  p.accessLog.w,
		// One series of cut answers for both protocols.
		ResponsesCut: p.m.ResponsesCut(),
		Entrypoint:   f.Cfg.Entrypoint,
		// One ledger for both protocols: a client alternating between
		// HTTP/1.1 and HTTP/2 with one key has one chain budget.
		Ledger: f.Ledger(),
		KeyTTL: f.Cfg.KeyTTL,
		// --http-request-timeout bounds the preface, the first SETTINGS
		// and every frame from its first byte (slowloris), as it bounds
		// an HTTP/1.1 head; --client-timeout a write to a client that
		// stopped reading (HAProxy's timeout client).
		RequestTimeout: f.Cfg.HTTPRequestTimeout,
		WriteTimeout:   f.Cfg.ClientTimeout,
		// One flag for both protocols' interim answers.
		PassInterim: f.Cfg.PassInterim,
		// --stream-idle-timeout: 0 (never) is the Config's -1.
		StreamIdleTimeout: streamIdle(p.cfg.StreamIdleTimeout),
	})
	if err != nil {
		return err
	}
	p.h2 = h
	return nil
}

// h2Connect is the start of a hijacked CONNECT tunnel to target. For a
// host --upstreams names it answers 200 at once and waits for the first
// bytes, up to --http-request-timeout, then judges them (tunnelKind): the
// HTTP/2 preface hands the connection to the h2c path; HTTP/1.x requests
// are served by the HTTP/1.1 engine, each with the policy (routed by its own
// Host, as any request); TLS is dialed and tunnelled untouched, the bytes
// read first (a failed dial closes the tunnel): the proxy cannot see into
// it. Anything else, or nothing within the wait, closes the tunnel: the
// known upstreams are HTTP services, and a tunnel to one is never opened
// without knowing what it carries. It returns false, having done nothing,
// for any other host: the caller tunnels as before.
func (p *Proxy) h2Connect(c net.Conn, target, addr string) bool {
	if p.h2 == nil || p.fw.Match([]byte(hostOnly(target))) == nil {
		return false
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return true
	}
	kind, first := readTunnelStart(c, p.fw.Cfg.HTTPRequestTimeout)
	switch kind {
	case tunnelH2:
		g := &guardConn{Conn: c, raw: c}
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			g.raw = u.UnsafeConn() // fasthttp's hijacked connection does not close itself
		}
		p.h2.ServeConn(&forward.PrefixConn{Conn: g, Prefix: first}, target)
		g.end()
	case tunnelHTTP1:
		_ = p.gor.ServeConn(&forward.PrefixConn{Conn: c, Prefix: first})
	case tunnelTLS:
		up, err := net.DialTimeout("tcp", addr, p.fw.Cfg.PerTryTimeout)
		if err != nil {
			return true
		}
		defer up.Close()
		goroutine.Pipe(&forward.PrefixConn{Conn: c, Prefix: first}, up)
	default:
		p.fw.Logger.Printf("retrycap-proxy: CONNECT %s: closed: %s", target, kind)
	}
	return true
}

// tunnelKind is what the first bytes in a CONNECT tunnel to a known
// upstream are.
type tunnelKind int

const (
	tunnelMore    tunnelKind = iota // not known yet: more bytes needed
	tunnelH2                        // the HTTP/2 client preface (h2c with prior knowledge)
	tunnelHTTP1                     // an HTTP/1.x request line (a method and a space)
	tunnelTLS                       // a TLS handshake record
	tunnelOther                     // none of these
	tunnelNothing                   // no byte within the wait, or the client went away
)

func (k tunnelKind) String() string {
	switch k {
	case tunnelH2:
		return "h2c"
	case tunnelHTTP1:
		return "HTTP/1.1"
	case tunnelTLS:
		return "TLS"
	case tunnelOther:
		return "neither TLS, HTTP/1.1 nor the HTTP/2 preface in its first bytes"
	case tunnelNothing:
		return "no complete start within --http-request-timeout"
	}
	return "undecided"
}

// maxTunnelStart bounds the bytes read to judge a tunnel (the preface is
// 24; the longest method token an HTTP/1.1 proxy need accept is far
// shorter).
const maxTunnelStart = 64

// classifyTunnel judges a tunnel's first bytes b.
func classifyTunnel(b []byte) tunnelKind {
	if len(b) == 0 {
		return tunnelMore
	}
	if b[0] == 0x16 { // TLS record type 22, handshake: a ClientHello
		return tunnelTLS
	}
	const preface = h2.ClientPreface
	if k := min(len(b), len(preface)); string(b[:k]) == preface[:k] {
		if k == len(preface) {
			return tunnelH2
		}
		return tunnelMore
	}
	for i, ch := range b {
		if ch == ' ' && i > 0 {
			return tunnelHTTP1
		}
		if !isTokenChar(ch) {
			return tunnelOther
		}
	}
	if len(b) >= maxTunnelStart {
		return tunnelOther
	}
	return tunnelMore
}

// isTokenChar: a tchar of RFC 9110 5.6.2 (a method is a token).
func isTokenChar(ch byte) bool {
	switch {
	case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", ch) >= 0
}

// readTunnelStart reads c's first bytes until classifyTunnel decides, or
// the wait (from now) ends: tunnelNothing then, as when the client goes
// away first. The bytes read are returned (a copy: they go first to
// whatever serves the tunnel).
func readTunnelStart(c net.Conn, wait time.Duration) (tunnelKind, []byte) {
	var buf [maxTunnelStart]byte
	n := 0
	_ = c.SetReadDeadline(time.Now().Add(wait))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	for {
		k, err := c.Read(buf[n:])
		n += k
		if kind := classifyTunnel(buf[:n]); kind != tunnelMore {
			return kind, bytes.Clone(buf[:n])
		}
		if err != nil {
			return tunnelNothing, nil
		}
	}
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

// NetConn is the socket, for the relay's non-blocking writes (h2's
// batchConn.tryWrite); the relay closes its writes before ServeConn
// returns, so before end.
func (g *guardConn) NetConn() net.Conn { return g.raw }

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

// streamIdle is --stream-idle-timeout as h2.Config takes it: 0 (never)
// is its -1, its 0 being the default.
func streamIdle(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
