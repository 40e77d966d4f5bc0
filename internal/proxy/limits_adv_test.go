package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Limits under hostile input, both engines (issue 25's hardening pass):
// heads far over the 8 KiB a head may have, a body in a million one-byte
// chunks, and clients that drip their head or body (slowloris).

// advToClose writes req from a goroutine (the proxy may answer and close
// before reading it all) and returns what the proxy sent until its close:
// an end of stream, or the reset of a close with request bytes unread.
func advToClose(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
	go func() { _, _ = io.WriteString(c, req) }()
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading to the close: %v (read %q)", err, b)
	}
	return string(b)
}

func TestAdvHeadLimits(t *testing.T) {
	var many strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&many, "X-H%d: v\r\n", i)
	}
	const tooLarge = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
	cases := []struct{ name, req string }{
		{"10,000 headers", "GET /a HTTP/1.1\r\nHost: backend\r\n" + many.String() + "\r\n"},
		{"a 1 MiB header value", "GET /a HTTP/1.1\r\nHost: backend\r\nX-A: " + strings.Repeat("v", 1<<20) + "\r\n\r\n"},
		{"a 1 MiB request line", "GET /" + strings.Repeat("a", 1<<20) + " HTTP/1.1\r\nHost: backend\r\n\r\n"},
		{"a 1 MiB header name", "GET /a HTTP/1.1\r\nHost: backend\r\n" + strings.Repeat("N", 1<<20) + ": v\r\n\r\n"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr())
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				ans := advToClose(t, p.Addr(), tc.req)
				if !strings.HasPrefix(ans, tooLarge) || !strings.Contains(ans, "\r\nConnection: close\r\n") {
					t.Errorf("answer %.300q, want 431 and the close", ans)
				}
			})
		}
		// Still serving, and nothing of those reached the upstream.
		if ans := frExchange(t, p.Addr(), "GET /ok HTTP/1.1\r\nHost: backend\r\n\r\n", 1, "GET"); !strings.HasSuffix(ans, "\r\n\r\nok") {
			t.Errorf("%s: answer %q after the large heads, want ok", engine, ans)
		}
		if raw, _ := b.received(); raw != "GET /ok HTTP/1.1\r\nHost: backend\r\n\r\n" {
			t.Errorf("%s: the upstream received %.300q, want the one good request", engine, raw)
		}
	}
}

// A 1 MiB body in 1,048,576 one-byte chunks (6 MiB on the wire) is
// forwarded whole with its length; a 17 MiB one is 413 (the 16 MiB cap)
// and never forwarded.
func TestAdvTinyChunks(t *testing.T) {
	const n = 1 << 20
	var w strings.Builder
	w.Grow(6*n + 5)
	for range n {
		w.WriteString("1\r\nx\r\n")
	}
	w.WriteString("0\r\n\r\n")
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newFrBackend(t, nil)
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
			ans := frExchange(t, p.Addr(), "POST /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n"+w.String(), 1, "POST")
			if ans != "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" {
				t.Errorf("answer %q, want the upstream's ok", ans)
			}
			raw, reqs := b.received()
			if want := fmt.Sprintf("POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: %d\r\nRetrycap-Budget: 4\r\n\r\n", n); !strings.HasPrefix(raw, want) ||
				len(reqs) != 1 || reqs[0].body != strings.Repeat("x", n) {
				t.Errorf("the upstream received %.200q (%d requests), want %q and %d x's", raw, len(reqs), want, n)
			}
			big := 17 << 20
			ans = advToClose(t, p.Addr(), fmt.Sprintf("POST /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", big, strings.Repeat("z", big)))
			if !strings.HasPrefix(ans, "HTTP/1.1 413 Request Entity Too Large\r\n") {
				t.Errorf("17 MiB chunk: answer %.300q, want 413", ans)
			}
			if _, reqs := b.received(); len(reqs) != 1 {
				t.Errorf("the upstream got %d requests, want only the first", len(reqs))
			}
		})
	}
}

// Slowloris: a head or a body dripped a byte every 50 ms is cut by the
// documented bounds (--http-request-timeout, --client-timeout) with 408
// and the close, however long the drip would go on; nothing is forwarded.
func TestAdvSlowloris(t *testing.T) {
	cases := []struct{ name, start, drip string }{
		{"head", "GET /a HTTP/1.1\r\nHost: backend\r\n", "X-Drip: " + strings.Repeat("d", 10000)},
		{"body", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 10000\r\n\r\n", strings.Repeat("b", 10000)},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(),
			"--http-request-timeout", "1s", "--client-timeout", "1s")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				c := proxytest.Dial(t, p.Addr())
				_ = c.C.SetDeadline(time.Now().Add(proxytest.Bound))
				c.Send(tc.start)
				stop := make(chan struct{})
				dripped := make(chan struct{})
				go func() {
					defer close(dripped)
					tick := time.NewTicker(50 * time.Millisecond)
					defer tick.Stop()
					for i := 0; i < len(tc.drip); i++ {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						if _, err := c.C.Write([]byte{tc.drip[i]}); err != nil {
							return
						}
					}
				}()
				ans := c.Rest()
				close(stop)
				<-dripped
				if !strings.HasPrefix(ans, "HTTP/1.1 408 Request Timeout\r\n") || !strings.Contains(ans, "\r\nConnection: close\r\n") {
					t.Errorf("answer %q, want 408 and the close", ans)
				}
			})
		}
		if raw, _ := b.received(); raw != "" {
			t.Errorf("%s: the upstream received %q, want nothing", engine, raw)
		}
	}
}
