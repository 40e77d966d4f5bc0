package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Connection management and timeouts (issue 14, defects 3-5), through real
// sockets on loopback, on the engine -engine selects.

// kaBackend is a raw HTTP/1.1 keep-alive upstream whose connection handling
// the tests control: it closes a connection idle for idle (Node.js does
// after 5 s), and with dropReused it closes a connection on its second
// request without answering it (the upstream's close racing the proxy's
// reuse: the request never reaches the app).
type kaBackend struct {
	ln         net.Listener
	idle       time.Duration
	dropReused bool

	conns        *atomic.Int64 // connections accepted
	closedIdle   atomic.Int64  // closed by the backend, idle
	closedByPeer atomic.Int64  // closed by the proxy
	dropped      atomic.Int64  // requests read and dropped unanswered (never "reached the app")
	mu           sync.Mutex
	got          []string // requests answered: "METHOD URI BODY", in order
}

func newKABackend(t *testing.T, idle time.Duration, dropReused bool) *kaBackend {
	t.Helper()
	b := &kaBackend{idle: idle, dropReused: dropReused}
	b.ln, b.conns = proxytest.RawBackend(t, func(c *net.TCPConn) { b.serve(c) })
	return b
}

func (b *kaBackend) addr() string { return b.ln.Addr().String() }

func (b *kaBackend) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		_ = c.SetReadDeadline(time.Now().Add(b.idle))
		req, err := http.ReadRequest(br)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Closed before it is counted: a test that waits for the
				// count sends its next request after the close (the
				// upstream's close before the request, which the proxy
				// must see), not racing it (which a POST may lose: 502).
				_ = c.Close()
				b.closedIdle.Add(1)
			} else {
				b.closedByPeer.Add(1)
			}
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		if b.dropReused && n >= 2 {
			b.dropped.Add(1)
			return
		}
		line := req.Method + " " + req.RequestURI + " " + string(body)
		b.mu.Lock()
		b.got = append(b.got, line)
		b.mu.Unlock()
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(line), line); err != nil {
			return
		}
	}
}

func (b *kaBackend) received() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

// staleRequests are the requests of the stale-connection tests: small POSTs
// (the loop serves them), then chunked POSTs, which the loop hands to the
// goroutine engine with the connection (defect 3 was there too).
func staleRequests() (reqs, want []string) { return staleRequestsOf("POST") }

// staleRequestsOf is staleRequests with another method.
func staleRequestsOf(method string) (reqs, want []string) {
	for i := range 3 {
		reqs = append(reqs, fmt.Sprintf("%s http://svc/small%d HTTP/1.1\r\nHost: svc\r\nContent-Length: 5\r\n\r\nhello", method, i))
		want = append(want, fmt.Sprintf("%s /small%d hello", method, i))
	}
	for i := range 3 {
		reqs = append(reqs, fmt.Sprintf("%s http://svc/chunked%d HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nworld\r\n0\r\n\r\n", method, i))
		want = append(want, fmt.Sprintf("%s /chunked%d world", method, i))
	}
	return reqs, want
}

func wantReceived(t *testing.T, b *kaBackend, want []string) {
	t.Helper()
	got := b.received()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the backend answered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestStaleUpstreamClosedIdle (defect 3): the upstream closes idle
// keep-alive connections sooner than the proxy's bound (Node.js: 5 s, the
// proxy trusted them 10 s). After the backend has closed the connection the
// last request used, the next POST must reach it, once, on a fresh
// connection: no 502, no retry spent, no breaker failure (a breaker that
// opens on one failure stays closed).
func TestStaleUpstreamClosedIdle(t *testing.T) {
	b := newKABackend(t, 100*time.Millisecond, false)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--breaker-failures", "1", "--upstream-idle-timeout", "1m")
	c := proxytest.Dial(t, p.Addr())
	_ = c.C.SetDeadline(time.Now().Add(20 * time.Second))
	reqs, want := staleRequests()
	for i, r := range reqs {
		c.Send(r)
		c.Expect("POST", 200, want[i])
		proxytest.Eventually(t, "the backend closed the idle connection", func() bool { return b.closedIdle.Load() == int64(i+1) })
	}
	wantReceived(t, b, want)
	if got := b.conns.Load(); got != int64(len(reqs)) {
		t.Fatalf("backend saw %d connections, want %d (one per request: each one it closed was not reused)", got, len(reqs))
	}
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != float64(len(reqs)) {
		t.Fatalf("%v attempts, want %d", got, len(reqs))
	}
}

// TestStaleUpstreamResentOnce (defect 3): the upstream's close races the
// proxy's reuse: each request on a reused connection is dropped unanswered
// by the backend, after it read it. An idempotent request (PUT here) is
// sent again, on a connection the backend answers; the app gets each
// request exactly once (answered), and no stale reset is a breaker failure
// (a breaker that opens on one failure stays closed). (Until issue 25 this
// test sent POSTs and wanted them re-sent too, "whatever its method": the
// proxy cannot tell this drop from an app that read the body and crashed,
// so a keyless POST is not re-sent: TestStaleKeylessPostNotResent.) Until
// branch resendcap the re-send was not an attempt (attempts == requests, 0
// retries): but the backend read the request, so it may have run it, and a
// free repeat with the same Retrycap-Budget broke the chain cap
// (TestStaleResendWithinCap). Now each drop is an attempt ("stale") and its
// repeat a retry: attempts == requests + drops, retries == drops.
func TestStaleUpstreamResentOnce(t *testing.T) {
	b := newKABackend(t, time.Minute, true)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--breaker-failures", "1")
	c := proxytest.Dial(t, p.Addr())
	reqs, want := staleRequestsOf("PUT")
	for i, r := range reqs {
		c.Send(r)
		c.Expect("PUT", 200, want[i])
	}
	wantReceived(t, b, want)
	dropped := b.dropped.Load()
	// Every connection's second request is dropped; how many requests
	// reuse a connection is the engine's pooling (the loop's pool and the
	// goroutine engine's differ, and the loop hands the chunked ones over).
	if dropped < 3 {
		t.Fatalf("the backend dropped %d requests on reused connections, want at least 3", dropped)
	}
	if got := testutil.ToFloat64(p.m.StaleResends); got != float64(dropped) {
		t.Fatalf("%v stale re-sends, want %d (one per dropped request)", got, dropped)
	}
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != float64(int64(len(reqs))+dropped) {
		t.Fatalf("%v attempts, want %d: each request's answered attempt and each dropped one", got, int64(len(reqs))+dropped)
	}
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Retries); got != float64(dropped) {
		t.Fatalf("%v retries, want %d (one per dropped request)", got, dropped)
	}
}

// TestStaleKeylessPostNotResent (issue 25): the same backend, keyless
// POSTs. The backend read each request on a reused connection before it
// dropped it, and the proxy cannot know whether the app ran it: each such
// POST is answered 502 and never re-sent (reaching the backend once); a
// POST on a fresh connection is answered 200. The GETs around it are
// re-sent as before.
func TestStaleKeylessPostNotResent(t *testing.T) {
	b := newKABackend(t, time.Minute, true)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
	c := proxytest.Dial(t, p.Addr())
	reqs, want := staleRequests()
	var answered []string
	got502 := 0
	for i, r := range reqs {
		c.Send(r)
		resp, body := c.Answer("POST")
		switch resp.StatusCode {
		case 200:
			if body != want[i] {
				t.Fatalf("request %d: 200 %q, want %q", i, body, want[i])
			}
			answered = append(answered, want[i])
		case 502:
			got502++
			if !strings.Contains(body, "not retried: not-retryable") {
				t.Fatalf("request %d: 502 %q", i, body)
			}
		default:
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if resp.Close {
			c = proxytest.Dial(t, p.Addr())
		}
	}
	wantReceived(t, b, answered)
	// Every request reached the backend exactly once: answered, or read
	// and dropped.
	if dropped := b.dropped.Load(); int(dropped) != got502 || len(answered)+got502 != len(reqs) || got502 == 0 {
		t.Fatalf("%d answered 200, %d 502, the backend dropped %d; want the 502s to be the drops, of %d requests", len(answered), got502, dropped, len(reqs))
	}
	if got := testutil.ToFloat64(p.m.StaleResends); got != 0 {
		t.Fatalf("%v stale re-sends, want 0", got)
	}
	// An idempotent GET on the same kind of connection is still re-sent.
	c.Send("GET http://svc/after HTTP/1.1\r\nHost: svc\r\n\r\n")
	c.Expect("GET", 200, "GET /after ")
	c.Send("GET http://svc/again HTTP/1.1\r\nHost: svc\r\n\r\n")
	c.Expect("GET", 200, "GET /again ")
	if got := testutil.ToFloat64(p.m.StaleResends); got < 1 {
		t.Fatalf("%v stale re-sends after two GETs, want at least 1", got)
	}
}

// TestUpstreamIdleBound (defect 3): a pooled connection idle longer than
// --upstream-idle-timeout is closed by the proxy, not reused.
func TestUpstreamIdleBound(t *testing.T) {
	b := newKABackend(t, time.Minute, false)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--upstream-idle-timeout", "100ms")
	c := proxytest.Dial(t, p.Addr())
	reqs, want := staleRequests()
	for i, r := range reqs {
		c.Send(r)
		c.Expect("POST", 200, want[i])
		proxytest.Eventually(t, "the proxy closed its idle upstream connection", func() bool { return b.closedByPeer.Load() == int64(i+1) })
	}
	wantReceived(t, b, want)
	if got := b.conns.Load(); got != int64(len(reqs)) {
		t.Fatalf("backend saw %d connections, want %d", got, len(reqs))
	}
	if got := testutil.ToFloat64(p.m.StaleResends); got != 0 {
		t.Fatalf("%v stale re-sends, want 0", got)
	}
}

// readTimeoutAnswer reads what the proxy sends until it closes the
// connection, and how long that took from start.
func readToClose(t *testing.T, c net.Conn, start time.Time) (string, time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading: %v", err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the proxy did not close the connection within 5s (read %q)", b)
	}
	return string(b), time.Since(start)
}

func timeoutsOf(p *Proxy, kind string) float64 {
	return testutil.ToFloat64(p.m.Timeouts.WithLabelValues(kind))
}

// TestRequestTimeouts (defect 5): like HAProxy's timeout http-request,
// http-keep-alive and client. A silent connection, a partial head and a
// slowloris (a byte every 20 ms) get 408 and are closed within
// --http-request-timeout; a partial body within --client-timeout; an idle
// keep-alive connection is closed (no answer) within --keepalive-timeout.
// None reaches the backend.
func TestRequestTimeouts(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	const bound = 300 * time.Millisecond
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.Addr(),
		"--http-request-timeout", "300ms", "--client-timeout", "300ms", "--keepalive-timeout", "300ms")
	const head408 = "HTTP/1.1 408 Request Timeout\r\n"
	check := func(t *testing.T, got string, took time.Duration, want, body string) {
		t.Helper()
		if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, body) {
			t.Fatalf("got %q, want %q ... %q", got, want, body)
		}
		// The loop sweeps every quarter of the bound; allow scheduling on
		// a shared machine.
		if took < bound-20*time.Millisecond || took > bound+time.Second {
			t.Fatalf("closed after %s, want about %s", took, bound)
		}
	}
	headBody := "request head not received within --http-request-timeout\n"
	t.Run("silent", func(t *testing.T) {
		start := time.Now()
		c := proxytest.Dial(t, p.Addr())
		got, took := readToClose(t, c.C, start)
		check(t, got, took, head408, headBody)
	})
	t.Run("partial-head", func(t *testing.T) {
		start := time.Now()
		c := proxytest.Dial(t, p.Addr())
		c.Send("GET http://svc/partial HTTP/1.1\r\nHost: svc\r\n")
		got, took := readToClose(t, c.C, start)
		check(t, got, took, head408, headBody)
	})
	t.Run("slowloris", func(t *testing.T) {
		start := time.Now()
		c := proxytest.Dial(t, p.Addr())
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			head := "GET http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Slow: " + strings.Repeat("a", 1000)
			tick := time.NewTicker(20 * time.Millisecond) // the attack's pace, not synchronisation
			defer tick.Stop()
			for i := 0; i < len(head); i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.C.Write([]byte{head[i]}); err != nil {
					return
				}
			}
		}()
		got, took := readToClose(t, c.C, start)
		close(stop)
		<-done
		check(t, got, took, head408, headBody)
	})
	t.Run("partial-body", func(t *testing.T) {
		c := proxytest.Dial(t, p.Addr())
		c.Send("POST http://svc/body HTTP/1.1\r\nHost: svc\r\nContent-Length: 10\r\n\r\nab")
		start := time.Now()
		got, took := readToClose(t, c.C, start)
		check(t, got, took, head408, "request body not received within --client-timeout\n")
	})
	t.Run("keep-alive", func(t *testing.T) {
		c := proxytest.Dial(t, p.Addr())
		c.Send("GET http://svc/ka HTTP/1.1\r\nHost: svc\r\n\r\n")
		c.Expect("", 200, "/ka:")
		start := time.Now()
		got, took := readToClose(t, c.C, start)
		check(t, got, took, "", "")
		if got != "" {
			t.Fatalf("an idle keep-alive connection got %q, want a close with nothing", got)
		}
	})
	if got := b.Hits.Load(); got != 1 {
		t.Fatalf("the backend received %d requests, want 1 (the keep-alive one)", got)
	}
	if got := timeoutsOf(p, forward.TimeoutHTTPRequest); got != 3 {
		t.Fatalf("%v http-request timeouts, want 3", got)
	}
	if got := timeoutsOf(p, forward.TimeoutClient); got != 1 {
		t.Fatalf("%v client timeouts, want 1", got)
	}
	if p.loops != nil {
		if got := timeoutsOf(p, forward.TimeoutKeepAlive); got != 1 {
			t.Fatalf("%v keep-alive timeouts, want 1", got)
		}
	}
}

// openFds counts this process's descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return len(ents)
}

// TestSelfLoopKnownUpstream (defect 4): a known upstream that resolves to
// the proxy's own address (--upstreams localhost=2, requests for
// localhost:<the proxy's port>) is refused with 508 saying why, on every
// path (the loop's, and a chunked body the loop hands over), and costs no
// descriptors: before, each request looped through the proxy until they
// ran out.
func TestSelfLoopKnownUpstream(t *testing.T) {
	p := startProxy(t, "--upstreams", "localhost=2")
	_, port, _ := net.SplitHostPort(p.Addr())
	before := openFds(t)
	c := proxytest.Dial(t, p.Addr())
	for i := range 10 {
		c.Send(fmt.Sprintf("GET http://localhost:%s/%d HTTP/1.1\r\nHost: localhost:%s\r\n\r\n", port, i, port))
		resp, body := c.Answer("")
		if resp.StatusCode != http.StatusLoopDetected || !strings.Contains(body, "loop refused") || !strings.Contains(body, "localhost:"+port) {
			t.Fatalf("answer %d %q, want 508 saying the upstream resolves to the proxy itself", resp.StatusCode, body)
		}
	}
	c.Send(fmt.Sprintf("POST http://localhost:%s/chunked HTTP/1.1\r\nHost: localhost:%s\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", port, port))
	if resp, body := c.Answer(""); resp.StatusCode != http.StatusLoopDetected || !strings.Contains(body, "loop refused") {
		t.Fatalf("answer %d %q, want 508", resp.StatusCode, body)
	}
	if after := openFds(t); after > before+4 {
		t.Fatalf("%d descriptors after the requests, %d before", after, before)
	}
	if got := testutil.ToFloat64(p.upstreamByName("localhost").M.Attempts); got != 0 {
		t.Fatalf("%v attempts, want 0", got)
	}
	if got := p.m.InFlight.Load(); got != 0 {
		t.Fatalf("%d calls in flight, want 0", got)
	}
}
