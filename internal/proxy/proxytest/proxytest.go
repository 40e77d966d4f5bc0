package proxytest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Backend is a loopback HTTP server (Go's net/http) that counts requests
// and connections and records each request with its whole body.
type Backend struct {
	Ln    net.Listener
	Srv   *http.Server
	Hits  atomic.Int64
	Conns atomic.Int64
	mu    sync.Mutex
	reqs  []Request
}

// Request is one request a Backend served.
type Request struct {
	Method, URI, Key string // Key: its Idempotency-Key
	Body             []byte
}

// NewBackend serves h (nil: Echo) after reading and recording the
// request's body; it closes when t ends.
func NewBackend(t testing.TB, h func(w http.ResponseWriter, r *http.Request, body []byte)) *Backend {
	t.Helper()
	if h == nil {
		h = Echo
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{Ln: ln}
	b.Srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(400)
				return
			}
			b.mu.Lock()
			b.reqs = append(b.reqs, Request{Method: r.Method, URI: r.RequestURI, Key: r.Header.Get("Idempotency-Key"), Body: body})
			b.mu.Unlock()
			b.Hits.Add(1)
			h(w, r, body)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				b.Conns.Add(1)
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = b.Srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.Srv.Close() })
	return b
}

// Addr is the backend's host:port.
func (b *Backend) Addr() string { return b.Ln.Addr().String() }

// Requests are the requests served so far, in order.
func (b *Backend) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Request(nil), b.reqs...)
}

// Echo answers "<path>:<body>" with the method in X-Method.
func Echo(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("X-Method", r.Method)
	_, _ = io.WriteString(w, r.URL.Path+":"+string(body))
}

// Conn is a raw client connection to a proxy; every read and write on it
// must be done within 5 seconds of the dial.
type Conn struct {
	T  testing.TB
	C  net.Conn
	BR *bufio.Reader
}

// Dial connects to addr; the connection closes when t ends.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &Conn{T: t, C: c, BR: bufio.NewReader(c)}
}

// DialSlowReader connects with a 4 KiB receive buffer (and a 512-byte
// reader), so that large answers back up in the proxy.
func DialSlowReader(t testing.TB, addr string) *Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	return &Conn{T: t, C: nc, BR: bufio.NewReaderSize(nc, 512)}
}

// Send writes s.
func (c *Conn) Send(s string) {
	c.T.Helper()
	if _, err := io.WriteString(c.C, s); err != nil {
		c.T.Fatalf("writing the request: %v", err)
	}
}

// Answer reads one answer (to a request with method, "" for GET) and its
// whole body.
func (c *Conn) Answer(method string) (*http.Response, string) {
	c.T.Helper()
	if method == "" {
		method = "GET"
	}
	resp, err := http.ReadResponse(c.BR, &http.Request{Method: method})
	if err != nil {
		c.T.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.T.Fatalf("reading the answer's body: %v", err)
	}
	return resp, string(body)
}

// Expect reads an answer and checks its status and body.
func (c *Conn) Expect(method string, code int, body string) *http.Response {
	c.T.Helper()
	resp, got := c.Answer(method)
	if resp.StatusCode != code || got != body {
		c.T.Fatalf("answer %d %q, want %d %q", resp.StatusCode, got, code, body)
	}
	return resp
}

// Rest reads what is left until the proxy closes the connection: its
// bytes, exactly.
func (c *Conn) Rest() string {
	c.T.Helper()
	b, err := io.ReadAll(c.BR)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		c.T.Fatalf("reading to the close: %v (read %q)", err, b)
	}
	return string(b)
}

// ExpectClosed checks that the proxy closed the connection with nothing
// more to read: an end of stream, or a reset when the proxy closed it with
// bytes of the client's still unread.
func (c *Conn) ExpectClosed() {
	c.T.Helper()
	b, err := c.BR.ReadByte()
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		c.T.Fatalf("read %q, %v; want the connection closed", b, err)
	}
}

// Bound is how long Eventually and Wait wait before failing. It is a bound
// on a failure, not a synchronisation: a passing test returns as soon as its
// condition holds. 20 s because CI's two cores run every package's tests at
// once (5 s failed there at a load average of 20).
const Bound = 20 * time.Second

// Eventually polls cond until it holds, for at most Bound. It polls every
// millisecond rather than spinning, so the polling does not take the CPU
// the proxy under test needs.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Bound)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, Bound)
		}
		<-tick.C
	}
}

// Wait waits for ch to be closed (or to yield), for at most Bound.
func Wait(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Bound):
		t.Fatalf("%s: not within %v", what, Bound)
	}
}

// Pattern is n bytes of a position-dependent pattern.
func Pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i*7+i/26)%26
	}
	return b
}

// Client is an http.Client that sends through the proxy at addr.
func Client(addr string) *http.Client {
	u, _ := url.Parse("http://" + addr)
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
}

// RawBackend accepts connections on a loopback listener and hands each to serve on a
// goroutine of its own, for backends that must control the socket itself (read a request,
// then reset): the tests' raw upstreams share this accept loop. Accepted counts the
// connections. At the test's end the listener and every open connection are closed and
// their goroutines waited for.
func RawBackend(t testing.TB, serve func(*net.TCPConn)) (ln net.Listener, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	var wg sync.WaitGroup
	var open sync.Map
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			open.Store(c, nil)
			wg.Add(1)
			go func() { defer wg.Done(); defer open.Delete(c); serve(c.(*net.TCPConn)) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		open.Range(func(c, _ any) bool { _ = c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return ln, accepted
}
