package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Issue 25, part 3: a CONNECT to a known upstream is judged by its first
// bytes whenever they come within --http-request-timeout. Before the fix
// the proxy peeked for one second and tunnelled whatever came later
// blind: an h2c preface sent after it reached the upstream with the
// client's Retrycap-Budget (1000) and no retry policy; plain HTTP/1.1 in
// the tunnel was never judged at all.

// connectTo opens a CONNECT tunnel to target through the proxy at addr and
// reads the proxy's 200.
func connectTo(t *testing.T, addr, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c, br
}

// lateConn delays the client's first write (its HTTP/2 preface) by delay:
// the client's lateness is the case under test, not a synchronisation.
type lateConn struct {
	net.Conn
	delay time.Duration
	wrote atomic.Bool
}

func (c *lateConn) Write(b []byte) (int, error) {
	if !c.wrote.Swap(true) {
		time.Sleep(c.delay)
	}
	return c.Conn.Write(b)
}

// TestConnectLatePrefaceJudged: the preface comes 1.5 s after the tunnel
// opened (past the old 1 s peek): the h2c path serves it with the policy:
// three attempts on two 503s, budgets 2, 1, 1 of a cap of 4.
func TestConnectLatePrefaceJudged(t *testing.T) {
	b := newH2CBackend(t, 2)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.ln.Addr().String(), "--chain-cap", "4")
	c, _ := connectTo(t, p.Addr(), "svc:80")
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, DialContext: func(context.Context, string, string) (net.Conn, error) {
		return &lateConn{Conn: c, delay: 1500 * time.Millisecond}, nil
	}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://svc/late", nil)
	req.Header.Set("Retrycap-Budget", "1000")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok /late" {
		t.Fatalf("answer %d %q, want 200 \"ok /late\"", resp.StatusCode, body)
	}
	want := []string{"HTTP/2.0 budget=2 upgrade= settings=false", "HTTP/2.0 budget=1 upgrade= settings=false", "HTTP/2.0 budget=1 upgrade= settings=false"}
	if got := b.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the upstream saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestConnectHTTP11Judged: plain HTTP/1.1 in a CONNECT tunnel to a known
// upstream is served by the HTTP/1.1 engine, request by request, with the
// policy; the tunnel's connection stays HTTP (a second request is served).
func TestConnectHTTP11Judged(t *testing.T) {
	b := newH2CBackend(t, 2)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.ln.Addr().String(), "--chain-cap", "4")
	c, br := connectTo(t, p.Addr(), "svc:80")
	pc := &proxytest.Conn{T: t, C: c, BR: br}
	pc.Send("GET /in HTTP/1.1\r\nHost: svc\r\nRetrycap-Budget: 1000\r\n\r\n")
	pc.Expect("GET", 200, "ok /in")
	pc.Send("GET /again HTTP/1.1\r\nHost: svc\r\nRetrycap-Budget: 1000\r\n\r\n")
	pc.Expect("GET", 200, "ok /again")
	want := []string{
		"HTTP/1.1 budget=2 upgrade= settings=false", "HTTP/1.1 budget=1 upgrade= settings=false",
		"HTTP/1.1 budget=1 upgrade= settings=false", "HTTP/1.1 budget=2 upgrade= settings=false",
	}
	if got := b.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the upstream saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestConnectNothingClosed: a tunnel to a known upstream whose client sends
// nothing within --http-request-timeout, or bytes that are neither TLS,
// HTTP/1.1 nor the preface, is closed; the upstream is never dialled.
func TestConnectNothingClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String(), "--http-request-timeout", "300ms")
	for _, send := range []string{"", "\x00\x01binary", "SSH-2.0-OpenSSH_9.2\r\n"} {
		c, br := connectTo(t, p.Addr(), "svc:22")
		if send != "" {
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		rest, err := io.ReadAll(br)
		if err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("%q: reading to the close: %v", send, err)
		}
		if len(rest) != 0 || time.Since(start) > 10*time.Second {
			t.Fatalf("%q: read %q before the close (after %s)", send, rest, time.Since(start))
		}
	}
	if got := accepted.Load(); got != 0 {
		t.Fatalf("the upstream accepted %d connections, want 0", got)
	}
}

func TestClassifyTunnel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want tunnelKind
	}{
		{"", tunnelMore},
		{"\x16\x03\x01\x02\x00", tunnelTLS},
		{"\x16", tunnelTLS},
		{"PRI * HTTP/2.0\r\n", tunnelMore},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", tunnelH2},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nextra", tunnelH2},
		{"PRI * HTTP/1.1\r\n", tunnelHTTP1}, // not the preface: a request line, HTTP/1.1's to judge
		{"GET", tunnelMore},
		{"GET /", tunnelHTTP1},
		{"POST http://x/ HTTP/1.1", tunnelHTTP1},
		{"M-SEARCH *", tunnelHTTP1},
		{" GET", tunnelOther},
		{"\x00\x01", tunnelOther},
		{"SSH-2.0-OpenSSH\r\n", tunnelOther},
		{strings.Repeat("A", 63), tunnelMore},
		{strings.Repeat("A", 64), tunnelOther},
	} {
		if got := classifyTunnel([]byte(tc.in)); got != tc.want {
			t.Errorf("classifyTunnel(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
