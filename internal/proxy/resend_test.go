package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Issue 25: the one path where a request not safe to repeat (a keyless
// POST) may be sent again on a fresh connection is a pooled connection
// that provably never carried a byte of it (policy.MayResend, Go's
// transport's rule): the connection was closed before the write, or the
// write failed before any byte left. With real sockets, on the engine the
// tests run (-engine): the backend executes the POST exactly once in both
// cases; the opposite case (the request reached the upstream, which then
// reset the connection) is answered 502 and never re-sent. This test found
// the event loop counting a failed write's bytes as sent (netpoll.WriteSome
// returned no rest on an error): a keyless POST whose first write to a
// pooled connection failed with EPIPE was answered 502 instead of re-sent.

// holdBackend is a raw-socket keep-alive upstream that counts each request
// by path and connections. What it does after a request is the test's:
// answer 200 "ok", or (mode "reset" for path /reset) reset the connection.
// A connection whose peer half-closes it is held open, unanswered, until
// the test ends (eof is told): the proxy's side sees nothing arrive.
type holdBackend struct {
	ln    net.Listener
	mu    sync.Mutex
	execs map[string]int
	// budgets: the Retrycap-Budget each execution carried, by method and path.
	budgets map[string][]string
	conns   *atomic.Int64 // connections accepted
	eof     chan struct{}
	stop    chan struct{}
	// closeIdle: after answering /warm, close the connection (FIN).
	closeIdle bool
}

func newHoldBackend(t *testing.T, closeIdle bool) *holdBackend {
	t.Helper()
	b := &holdBackend{execs: map[string]int{}, budgets: map[string][]string{}, eof: make(chan struct{}, 8), stop: make(chan struct{}), closeIdle: closeIdle}
	b.ln, b.conns = proxytest.RawBackend(t, func(c *net.TCPConn) { b.serve(c) })
	// Registered after RawBackend's clean-up, so it runs first: connections held after EOF let go
	// before the listener closes and the serving goroutines are waited for.
	t.Cleanup(func() { close(b.stop) })
	return b
}

func (b *holdBackend) serve(c *net.TCPConn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err == io.EOF {
			b.eof <- struct{}{}
			<-b.stop
			return
		}
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		b.mu.Lock()
		b.execs[req.Method+" "+req.URL.Path]++
		b.budgets[req.Method+" "+req.URL.Path] = append(b.budgets[req.Method+" "+req.URL.Path], req.Header.Get("Retrycap-Budget"))
		b.mu.Unlock()
		if req.URL.Path == "/reset" {
			_ = c.SetLinger(0) // close sends RST: the app had the request
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
		if b.closeIdle && req.URL.Path == "/warm" {
			return // FIN on the idle connection
		}
	}
}

func (b *holdBackend) executions() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.execs))
	for k, v := range b.execs {
		out[k] = v
	}
	return out
}

// upstreamFD is the descriptor of this process's (the in-process
// proxy's) one connection to addr: the pooled upstream connection.
func upstreamFD(t *testing.T, addr string) int {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	found := -1
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, _ := os.Readlink("/proc/self/fd/" + e.Name()); len(link) < 7 || link[:7] != "socket:" {
			continue
		}
		sa, err := syscall.Getpeername(fd)
		if err != nil {
			continue
		}
		if in4, ok := sa.(*syscall.SockaddrInet4); ok && in4.Port == port {
			if found >= 0 {
				t.Fatalf("two connections to the backend (fds %d and %d), want the one pooled", found, fd)
			}
			found = fd
		}
	}
	if found < 0 {
		t.Fatal("no pooled connection to the backend")
	}
	return found
}

// waitClosedByPeer polls until the pooled connection to addr got the
// upstream's FIN (CLOSE_WAIT), or the proxy already closed it on seeing
// that (the event loop watches its idle connections).
func waitClosedByPeer(t *testing.T, addr string) {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		fd := -1
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			n, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if sa, err := syscall.Getpeername(n); err == nil {
				if in4, ok := sa.(*syscall.SockaddrInet4); ok && in4.Port == port {
					fd = n
				}
			}
		}
		if fd < 0 {
			return // closed by the proxy
		}
		if info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && info.State == tcpCloseWait {
			return
		}
	}
	t.Fatal("the pooled connection never saw the upstream's FIN")
}

// waitTCPState polls the socket's TCP state (TCP_INFO) until it is want.
func waitTCPState(t *testing.T, fd int, want uint8) {
	t.Helper()
	var got uint8
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			t.Fatal(err)
		}
		if got = info.State; got == want {
			return
		}
	}
	t.Fatalf("pooled connection in TCP state %d, want %d", got, want)
}

const (
	tcpFinWait2  = 5 // the local end shut its write half, the peer acked (include/net/tcp_states.h)
	tcpCloseWait = 8 // the peer closed its end (FIN received)
)

func TestResendOnlyWhenNoByteLeft(t *testing.T) {
	post := func(t *testing.T, k *keepAliveClient, path string) (int, string) {
		t.Helper()
		const body = "order 1"
		code, got, err := k.do("POST", fmt.Sprintf("POST http://svc%s HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body))
		if err != nil {
			t.Fatal(err)
		}
		return code, got
	}
	warm := func(t *testing.T, k *keepAliveClient) {
		t.Helper()
		if code, got, err := k.do("GET", "GET http://svc/warm HTTP/1.1\r\nHost: svc\r\n\r\n"); err != nil || code != 200 || got != "ok" {
			t.Fatalf("warm-up GET: %d %q %v", code, got, err)
		}
	}
	for _, tc := range []struct {
		name      string
		closeIdle bool
		breakConn func(t *testing.T, b *holdBackend, fd int)
		path      string
		code      int
		resends   float64
		conns     int64
	}{
		// The upstream closed the idle connection (FIN, in the proxy's
		// socket before the POST): the proxy sees it before writing and
		// takes a fresh connection.
		{"closed before the write", true, nil, "/p/1", 200, 0, 2},
		// The pooled socket cannot be written (its write half shut:
		// EPIPE), while nothing arrived on it: the check passes, the
		// write fails with no byte of the POST gone, and it is re-sent on
		// a fresh connection, once.
		{"write failed before any byte", false, func(t *testing.T, b *holdBackend, fd int) {
			if err := syscall.Shutdown(fd, syscall.SHUT_WR); err != nil {
				t.Fatal(err)
			}
			waitTCPState(t, fd, tcpFinWait2)
			select {
			case <-b.eof:
			case <-time.After(5 * time.Second):
				t.Fatal("the backend never saw the half-close")
			}
		}, "/p/1", 200, 1, 2},
		// The POST reached the upstream, which then reset the
		// connection: it may have run, so it is never re-sent: 502.
		{"a byte left", false, func(*testing.T, *holdBackend, int) {}, "/reset", 502, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHoldBackend(t, tc.closeIdle)
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.ln.Addr().String(), "--chain-cap", "4")
			k := &keepAliveClient{addr: p.Addr()}
			defer k.close()
			warm(t, k)
			if tc.breakConn != nil {
				tc.breakConn(t, b, upstreamFD(t, b.ln.Addr().String()))
			} else {
				waitClosedByPeer(t, b.ln.Addr().String())
			}
			code, body := post(t, k, tc.path)
			if code != tc.code || (code == 200 && body != "ok") {
				t.Fatalf("POST answered %d %q, want %d", code, body, tc.code)
			}
			if got := b.executions()["POST "+tc.path]; got != 1 {
				t.Fatalf("the backend executed the POST %d times, want exactly 1", got)
			}
			// The one execution carried the whole cap: a keyless POST makes
			// one attempt, and a free re-send keeps its budget.
			b.mu.Lock()
			budgets := strings.Join(b.budgets["POST "+tc.path], ",")
			b.mu.Unlock()
			if budgets != "4" {
				t.Fatalf("the POST reached the backend with Retrycap-Budget %q, want 4", budgets)
			}
			if got := testutil.ToFloat64(p.fw.M.StaleResends); got != tc.resends {
				t.Fatalf("stale re-sends %v, want %v", got, tc.resends)
			}
			if got := b.conns.Load(); got != tc.conns {
				t.Fatalf("the backend accepted %d connections, want %d", got, tc.conns)
			}
			// A re-send after no byte left is within the attempt (the
			// upstream never saw it): the warm-up's attempt and the POST's
			// one, no retry (branch resendcap: only a re-send after bytes
			// left is an attempt, TestStaleResendWithinCap).
			up := p.upstreamByName("svc")
			if a, r := testutil.ToFloat64(up.M.Attempts), testutil.ToFloat64(up.M.Retries); a != 2 || r != 0 {
				t.Fatalf("%v attempts, %v retries; want 2, 0", a, r)
			}
		})
	}
}
