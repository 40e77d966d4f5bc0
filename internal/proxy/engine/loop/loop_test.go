//go:build linux

package loop

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/engine/goroutine"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
	"github.com/retrycap/retrycap/internal/proxy/policy"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
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
	return startLoopsWith(t, ups, resolve, nil)
}

// startLoopsWith is startLoops with the configuration changed by set
// (nil: none) before the engine starts.
func startLoopsWith(t testing.TB, ups, resolve string, set func(*forward.Config)) *testProxy {
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
	if set != nil {
		set(cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := forward.New(cfg, nil)
	f.Listening(ln.Addr())
	g := goroutine.New(f)
	h := goroutine.NewHandoff(ln.Addr())
	e, err := Start(f, ln, h, 0)
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
	proxytest.Eventually(t, "in-flight calls back to 0", func() bool { return p.f.M.InFlight.Load() == 0 })
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

// newBackend answers each request with behave (after counting it in hits).
func newBackend(t *testing.T, behave func(int64, http.ResponseWriter, *http.Request)) *proxytest.Backend {
	return proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { behave(0, w, r) })
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

// TestLoopConnectTriesEachAddress: a name that resolves to several
// addresses, the first of them refusing, is reached within one attempt (the
// next address is tried, as Go's dialer does), so even a request that is
// never retried (a POST without a key) gets through.
func TestLoopConnectTriesEachAddress(t *testing.T) {
	// Each answer closes its connection, so every request dials.
	b := newBackend(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { w.Header().Set("Connection", "close") })
	_, port, _ := net.SplitHostPort(b.Addr())
	old := lookupNetIP
	t.Cleanup(func() { lookupNetIP = old })
	lookupNetIP = func(context.Context, string, string) ([]netip.Addr, error) {
		// 127.0.0.2 is loopback too, but the backend listens on 127.0.0.1 only.
		return []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")}, nil
	}
	p := startLoops(t, "multi.test=3", "")
	c := proxytest.Client(p.Addr())
	for i := range 4 {
		resp := do(t, c, "POST", "http://multi.test:"+port+"/", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
		}
	}
	if got := b.Hits.Load(); got != 4 {
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
	b := proxytest.NewBackend(t, nil)
	p := startLoops(t, "svc=3", "svc="+b.Addr())
	if len(p.e.loops) != 1 {
		t.Fatalf("%d loops, want 1", len(p.e.loops))
	}
	l := p.e.loops[0]
	x := proxytest.Dial(t, p.Addr())
	proxytest.Eventually(t, "the first client on the loop", func() bool { return ltClientFlags(p, func(*cliConn) bool { return true }) })
	running, hold := make(chan struct{}), make(chan struct{})
	l.poll.Post(func() { close(running); <-hold })
	proxytest.Wait(t, running, "the loop held by a task")
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
	w := proxytest.Dial(t, p.Addr()) // waits in the listener's backlog
	if err := x.C.(*net.TCPConn).CloseWrite(); err != nil {
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
	w.Send("GET http://svc/a HTTP/1.1\r\nHost: svc\r\n\r\n")
	w.Expect("", 200, "/a:")
	w.Send("GET http://svc/b HTTP/1.1\r\nHost: svc\r\n\r\n")
	w.Expect("", 200, "/b:")
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
	proxytest.Wait(t, running, "the second loop held")
	p.e.nextLoop.Store(0) // the next accepted connection goes to the second loop
	c := proxytest.Dial(t, p.Addr())
	proxytest.Eventually(t, "the connection dealt to the second loop", func() bool { return b.poll.Queued() > 0 })
	close(hold)
	c.ExpectClosed()
}

// TestLoopIdleUpstreamExpires: a pooled upstream connection unused for
// the idle timeout is closed (one a NAT dropped silently would otherwise
// cost a request its per-try timeout), and the next request dials anew.
func TestLoopIdleUpstreamExpires(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.Addr())
	for _, l := range p.e.loops {
		set := make(chan struct{})
		l.poll.Post(func() { l.upstreamIdle = 50 * time.Millisecond; close(set) })
		proxytest.Wait(t, set, "idle timeout set on the loop")
	}
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://backend/one HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "/one:")
	if n := ltIdleUpstreams(p); n != 1 {
		t.Fatalf("%d pooled upstream connections after a request, want 1", n)
	}
	proxytest.Eventually(t, "the idle upstream connection closed (the loop sweeps once a second)", func() bool { return ltIdleUpstreams(p) == 0 })
	c.Send("GET http://backend/two HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "/two:")
	if got := b.Conns.Load(); got != 2 {
		t.Fatalf("backend saw %d connections, want 2 (the second dialled after the first expired)", got)
	}
}

// panicky is a loop handler that panics on its event.
type panicky struct{}

func (panicky) Event(uint32) { panic("test: a bug in an event handler") }

// TestLoopContainsPanics: a panic in an event handler, a timer or a posted
// task is contained (logged, counted) and the loop goes on serving.
func TestLoopContainsPanics(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.Addr())
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
	proxytest.Eventually(t, "three panics contained", func() bool { return testutil.ToFloat64(p.f.M.LoopPanics) >= 3 })
	if n := testutil.ToFloat64(p.f.M.LoopPanics); n != 3 {
		t.Fatalf("%v panics counted, want 3", n)
	}
	// Every loop still serves.
	for range 2 * len(p.e.loops) {
		c := proxytest.Dial(t, p.Addr())
		c.Send("GET http://backend/after HTTP/1.1\r\nHost: backend\r\n\r\n")
		c.Expect("", 200, "/after:")
	}
	l.poll.Post(func() { l.poll.CloseFd(fds[0]) })
}
