//go:build linux

package loop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/engine/goroutine"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// The loops' own mechanics (their epoll set, timers, tasks, resolver,
// pools), which only this package can reach. The tests of the assembled
// proxy on either engine are package proxy's (startProxy there); here a
// loop engine runs over a forwarding core with the same test settings, and
// the goroutine engine behind it for what it hands off.

type testProxy struct {
	f  *forward.Forwarder
	e  *Engine
	ln net.Listener
}

func (p *testProxy) Addr() string { return p.ln.Addr().String() }

// startLoops runs the engine on loopback: ups is --upstreams (NAME=N,...),
// resolve is --resolve (NAME=HOST:PORT,...); as startProxy, with fast
// backoff, no breaker and a retry budget that never refuses.
func startLoops(t testing.TB, ups, resolve string) *testProxy {
	t.Helper()
	ro, err := policy.ParseRetryOn("connect-failure,reset,502,503,504")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &forward.Config{
		PerTryTimeout: 2 * time.Second, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, BackoffJitter: true,
		RetryOn: ro, RetryMethods: []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"},
		BudgetPercent: 100, BudgetMinPerSecond: 1000, BudgetWindow: 10 * time.Second,
		BreakerWindow: 30 * time.Second, BreakerOpenFor: 10 * time.Second,
		MaxReplayBytes: 64 << 10, KeyTTL: time.Minute, Resolve: map[string]string{},
	}
	for _, u := range strings.Split(ups, ",") {
		name, n, _ := strings.Cut(u, "=")
		attempts, err := strconv.Atoi(n)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Upstreams = append(cfg.Upstreams, forward.UpstreamConfig{Name: name, Attempts: attempts})
	}
	if resolve != "" {
		for _, r := range strings.Split(resolve, ",") {
			name, addr, _ := strings.Cut(r, "=")
			cfg.Resolve[name] = addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := forward.New(cfg, nil)
	f.Listening(ln.Addr())
	g := goroutine.New(f)
	h := goroutine.NewHandoff(ln.Addr())
	e, err := Start(f, ln, h)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(h) }()
	t.Cleanup(func() {
		_ = ln.Close()
		_ = e.Shutdown(context.Background())
		_ = g.Shutdown(context.Background())
	})
	return &testProxy{f: f, e: e, ln: ln}
}

// ltBackend is a loopback HTTP server that counts requests and connections.
type ltBackend struct {
	ln    net.Listener
	srv   *http.Server
	hits  atomic.Int64
	conns atomic.Int64
}

// newLTBackend serves h (nil: "<path>:<body>") after reading the request's
// body.
func newLTBackend(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *ltBackend {
	t.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request, body []byte) {
			_, _ = io.WriteString(w, r.URL.Path+":"+string(body))
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &ltBackend{ln: ln}
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(400)
				return
			}
			b.hits.Add(1)
			h(w, r, body)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				b.conns.Add(1)
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Close() })
	return b
}

func (b *ltBackend) addr() string { return b.ln.Addr().String() }

// ltConn is a raw client connection to the proxy; every read and write on
// it must be done within 5 seconds of the dial.
type ltConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func ltDial(t *testing.T, addr string) *ltConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &ltConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *ltConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatalf("writing the request: %v", err)
	}
}

// expect reads an answer to a GET and checks its status and body.
func (c *ltConn) expect(_ string, code int, body string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
	if err != nil {
		c.t.Fatalf("reading the answer: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("reading the answer's body: %v", err)
	}
	if resp.StatusCode != code || string(got) != body {
		c.t.Fatalf("answer %d %q, want %d %q", resp.StatusCode, got, code, body)
	}
}

// expectClosed checks that the proxy closed the connection with nothing
// more to read.
func (c *ltConn) expectClosed() {
	c.t.Helper()
	b, err := c.br.ReadByte()
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("read %q, %v; want the connection closed", b, err)
	}
}

// ltEventually polls cond until it holds, for at most 5 seconds.
func ltEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		runtime.Gosched()
	}
}

func ltWait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s", what)
	}
}

// ltWantHandoffs(t, p, nil) checks that the loops handed nothing off.
func ltWantHandoffs(t *testing.T, p *testProxy, want map[string]float64) {
	t.Helper()
	if n := testutil.CollectAndCount(p.f.M.Handoffs); n != len(want) {
		t.Fatalf("%d hand-off reasons counted, want %v", n, want)
	}
}

// ltWantIdle checks that no call is in flight any more.
func ltWantIdle(t *testing.T, p *testProxy) {
	t.Helper()
	ltEventually(t, "in-flight calls back to 0", func() bool { return p.f.M.InFlight.Load() == 0 })
}

// ltClientFlags reports whether a client connection of the loops satisfies
// cond (asked on each loop).
func ltClientFlags(p *testProxy, cond func(c *cliConn) bool) bool {
	found := false
	for _, l := range p.e.loops {
		found = found || ask(l, func() bool {
			ok := false
			for c := range l.clients {
				ok = ok || cond(c)
			}
			return ok
		})
	}
	return found
}

func ltIdleUpstreams(p *testProxy) int { return p.e.IdleUpstreams() }

// ltHTTPClient is an http.Client that sends through the proxy.
func ltHTTPClient(p *testProxy) *http.Client {
	u, _ := url.Parse("http://" + p.Addr())
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
}

// newBackend answers each request with behave (after counting it in hits).
func newBackend(t *testing.T, behave func(int64, http.ResponseWriter, *http.Request)) *ltBackend {
	return newLTBackend(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { behave(0, w, r) })
}

func do(t *testing.T, c *http.Client, method, target string, _ map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// refHeadEnd is headEnd's specification: lines end in LF, optionally
// preceded by one CR; the head ends after the first empty line that
// follows at least one line (which may itself be empty); -1 while that
// empty line is not all there.
func refHeadEnd(b []byte) int {
	lines := 0
	for start := 0; ; {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1
		}
		line := bytes.TrimSuffix(b[start:start+i], []byte("\r"))
		start += i + 1
		if len(line) == 0 && lines > 0 {
			return start
		}
		lines++
	}
}

// headEnd against its specification.
func FuzzHeadEnd(f *testing.F) {
	for _, s := range []string{
		"",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r",
		"GET / HTTP/1.1\r\nHost: a\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
		"\r\n\r\n",
		"\n\n",
		"\r\n",
		"A\n\r\r\n\n",
		"A\r\r\n\r\n",
		"A\n\rB\n\n",
		"A\n\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := HeadEnd(b), refHeadEnd(b); got != want {
			t.Fatalf("HeadEnd(%q) = %d, want %d", b, got, want)
		}
	})
}

// TestLoopConnectTriesEachAddress: a name that resolves to several
// addresses, the first of them refusing, is reached within one attempt (the
// next address is tried, as Go's dialer does), so even a request that is
// never retried (a POST without a key) gets through.
func TestLoopConnectTriesEachAddress(t *testing.T) {
	// Each answer closes its connection, so every request dials.
	b := newBackend(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { w.Header().Set("Connection", "close") })
	_, port, _ := net.SplitHostPort(b.addr())
	old := lookupNetIP
	t.Cleanup(func() { lookupNetIP = old })
	lookupNetIP = func(context.Context, string, string) ([]netip.Addr, error) {
		// 127.0.0.2 is loopback too, but the backend listens on 127.0.0.1 only.
		return []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")}, nil
	}
	p := startLoops(t, "multi.test=3", "")
	c := ltHTTPClient(p)
	for i := range 4 {
		resp := do(t, c, "POST", "http://multi.test:"+port+"/", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
		}
	}
	if got := b.hits.Load(); got != 4 {
		t.Fatalf("backend received %d requests, want 4", got)
	}
	if got := testutil.ToFloat64(p.f.Upstreams[0].M.Attempts); got != 4 {
		t.Fatalf("attempts %v, want 4 (one per request)", got)
	}
}

// An epoll event collected for a descriptor that an earlier event of the
// same batch closed, and whose number a new connection has taken since
// (the kernel reuses the lowest free number): the event is the old
// connection's and must not reach the new one. Here the old client's end
// (it shut its side down) would mark the new client as gone, and its
// connection would close after the first answer. One loop; a task holds it
// while the events queue up behind the task that closes the old
// connection and accepts the new one.
func TestLoopStaleEventAfterDescriptorReuse(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	b := newLTBackend(t, nil)
	p := startLoops(t, "svc=3", "svc="+b.addr())
	if len(p.e.loops) != 1 {
		t.Fatalf("%d loops, want 1", len(p.e.loops))
	}
	l := p.e.loops[0]
	x := ltDial(t, p.Addr())
	ltEventually(t, "the first client on the loop", func() bool { return ltClientFlags(p, func(*cliConn) bool { return true }) })
	running, hold := make(chan struct{}), make(chan struct{})
	l.poll.Post(func() { close(running); <-hold })
	ltWait(t, running, "the loop held by a task")
	fds := make(chan [2]int, 1)
	l.poll.Post(func() {
		var xc *cliConn
		for c := range l.clients {
			xc = c
		}
		xfd := xc.fd
		xc.close()
		acceptHandler{l}.Event(0)
		wfd := -1
		for c := range l.clients {
			wfd = c.fd
		}
		fds <- [2]int{xfd, wfd}
	})
	w := ltDial(t, p.Addr()) // waits in the listener's backlog
	if err := x.c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	close(hold)
	var got [2]int
	select {
	case got = <-fds:
	case <-time.After(5 * time.Second):
		t.Fatal("the task did not run within 5s")
	}
	if got[0] != got[1] {
		t.Skipf("the new connection got descriptor %d, not the old one's %d", got[1], got[0])
	}
	w.send("GET http://svc/a HTTP/1.1\r\nHost: svc\r\n\r\n")
	w.expect("", 200, "/a:")
	w.send("GET http://svc/b HTTP/1.1\r\nHost: svc\r\n\r\n")
	w.expect("", 200, "/b:")
	ltWantHandoffs(t, p, nil)
	ltWantIdle(t, p)
}

// A connection accepted by one loop and dealt to another that ends (its
// drain is over) before it runs the hand-over: the connection is closed,
// not left open with nobody watching it. Two loops; the second is held in
// a task, drained, while the first accepts and deals the connection to it.
func TestLoopAdoptedByAnEndingLoop(t *testing.T) {
	old := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	p := startLoops(t, "svc=3", "")
	if len(p.e.loops) != 2 {
		t.Fatalf("%d loops, want 2", len(p.e.loops))
	}
	b := p.e.loops[1]
	running, hold := make(chan struct{}), make(chan struct{})
	b.poll.Post(func() { b.drain(); close(running); <-hold })
	ltWait(t, running, "the second loop held")
	p.e.nextLoop.Store(0) // the next accepted connection goes to the second loop
	c := ltDial(t, p.Addr())
	ltEventually(t, "the connection dealt to the second loop", func() bool { return b.poll.Queued() > 0 })
	close(hold)
	c.expectClosed()
}

// TestLoopIdleUpstreamExpires: a pooled upstream connection unused for
// the idle timeout is closed (one a NAT dropped silently would otherwise
// cost a request its per-try timeout), and the next request dials anew.
func TestLoopIdleUpstreamExpires(t *testing.T) {
	b := newLTBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.addr())
	for _, l := range p.e.loops {
		set := make(chan struct{})
		l.poll.Post(func() { l.upstreamIdle = 50 * time.Millisecond; close(set) })
		ltWait(t, set, "idle timeout set on the loop")
	}
	c := ltDial(t, p.Addr())
	c.send("GET http://backend/one HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.expect("", 200, "/one:")
	if n := ltIdleUpstreams(p); n != 1 {
		t.Fatalf("%d pooled upstream connections after a request, want 1", n)
	}
	ltEventually(t, "the idle upstream connection closed (the loop sweeps once a second)", func() bool { return ltIdleUpstreams(p) == 0 })
	c.send("GET http://backend/two HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.expect("", 200, "/two:")
	if got := b.conns.Load(); got != 2 {
		t.Fatalf("backend saw %d connections, want 2 (the second dialled after the first expired)", got)
	}
}

// panicky is a loop handler that panics on its event.
type panicky struct{}

func (panicky) Event(uint32) { panic("test: a bug in an event handler") }

// TestLoopContainsPanics: a panic in an event handler, a timer or a posted
// task is contained (logged, counted) and the loop goes on serving.
func TestLoopContainsPanics(t *testing.T) {
	b := newLTBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.addr())
	l := p.e.loops[0]
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fds[1]) })
	added := make(chan error, 1)
	// Readable only (not EPOLLOUT, which would report the writable socket at once).
	l.poll.Post(func() { added <- l.poll.Add(fds[0], unix.EPOLLIN|unix.EPOLLET, panicky{}) })
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fds[1], []byte("x")); err != nil { // the handler's event
		t.Fatal(err)
	}
	l.poll.Post(func() { l.timers.Schedule(netpoll.NewTimer(func() { panic("test: a bug in a timer") }), 0) })
	l.poll.Post(func() { panic("test: a bug in a task") })
	ltEventually(t, "three panics contained", func() bool { return testutil.ToFloat64(p.f.M.LoopPanics) >= 3 })
	if n := testutil.ToFloat64(p.f.M.LoopPanics); n != 3 {
		t.Fatalf("%v panics counted, want 3", n)
	}
	// Every loop still serves.
	for range 2 * len(p.e.loops) {
		c := ltDial(t, p.Addr())
		c.send("GET http://backend/after HTTP/1.1\r\nHost: backend\r\n\r\n")
		c.expect("", 200, "/after:")
	}
	l.poll.Post(func() { l.poll.CloseFd(fds[0]) })
}
