package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Session 18's data-plane leftovers (branch proto18).

// closingBackend answers each request it reads with answer, then closes
// the connection (a body delimited by the close); execs counts the
// requests it read.
func closingBackend(t *testing.T, answer string) (addr string, execs *atomic.Int64) {
	t.Helper()
	execs = new(atomic.Int64)
	ln, _ := proxytest.RawBackend(t, func(c *net.TCPConn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		execs.Add(1)
		_, _ = io.WriteString(c, answer)
	})
	return ln.Addr().String(), execs
}

// TestProto18IdentityAnswerReadToClose: an upstream's HTTP/1.1 answer
// with "Transfer-Encoding: identity" and no Content-Length is read to the
// close (RFC 9112 6.3, item 4: a response whose Transfer-Encoding's final
// coding is not chunked), as nginx 1.22 reads it, on both engines: a GET
// is executed once and a keyless POST too, the body passed on whole, to
// the client chunked (the proxy's framing for a body of unknown length)
// and without the upstream's Transfer-Encoding field. With a
// Content-Length too, the Transfer-Encoding overrides it (6.3, item 3):
// read to the close as well, the Content-Length not passed on. Before,
// fasthttp's parser refused the head ("unsupported transfer-encoding"):
// the GET was tried three times, the keyless POST got the 502. Another
// coding (gzip) stays a bad answer: its body would reach the client still
// coded, without the field that says so.
func TestProto18IdentityAnswerReadToClose(t *testing.T) {
	const body = "hello, to the close"
	want := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n13\r\n" + body + "\r\n0\r\n\r\n"
	answers := map[string]string{
		"identity":                      "HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: identity\r\n\r\n" + body,
		"Identity, blanks":              "HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding:  Identity \r\n\r\n" + body,
		"identity and a Content-Length": "HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 3\r\nTransfer-Encoding: identity\r\n\r\n" + body,
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for name, answer := range answers {
			for _, method := range []string{"GET", "POST"} {
				t.Run(engine+"/"+name+"/"+method, func(t *testing.T) {
					addr, execs := closingBackend(t, answer)
					p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+addr, "--retry-on", "reset,5xx")
					req := "GET http://backend/x HTTP/1.1\r\nHost: backend\r\n\r\n"
					if method == "POST" {
						req = "POST http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi"
					}
					if got := frExchange(t, p.Addr(), req, 1, method); got != want {
						t.Errorf("answered\n%q\nwant\n%q", got, want)
					}
					if n := execs.Load(); n != 1 {
						t.Errorf("the upstream executed the %s %d times, want 1", method, n)
					}
				})
			}
		}
	}
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine+"/gzip stays a bad answer", func(t *testing.T) {
			addr, execs := closingBackend(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx")
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+addr, "--retry-on", "reset,5xx")
			c := proxytest.Dial(t, p.Addr())
			c.Send("POST http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi")
			c.Expect("POST", http.StatusBadGateway, "retrycap-proxy: upstream backend ("+addr+"): 1 attempt(s), last failed with bad-answer "+
				"(the upstream's answer is malformed: unsupported transfer-encoding); not retried: not-retryable\n")
			if n := execs.Load(); n != 1 {
				t.Errorf("the upstream executed the POST %d times, want 1", n)
			}
		})
	}
}

// TestProto18TrailerFieldDropped: the proxy drops an answer's trailer
// section (its chunked reader discards it), so it drops the Trailer field
// that announces one too, on both engines: a client is told of no trailer
// it will not get. A small answer of known length that names a Trailer
// goes as it came, by its Content-Length. Before, the Trailer field was
// passed on (the loop and the goroutine engine alike), and an answer of
// known length with one went out chunked, with an empty trailer section.
func TestProto18TrailerFieldDropped(t *testing.T) {
	cases := []struct{ name, answer, want string }{
		{"chunked, with its trailers",
			"HTTP/1.1 200 OK\r\nTrailer: X-T\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: v\r\n\r\n",
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
		{"a Content-Length",
			"HTTP/1.1 200 OK\r\nTrailer: X-T\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok",
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\n\r\nok"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				b := newFrBackend(t, func(int, *http.Request, []byte) []byte { return []byte(tc.answer) })
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr())
				if got := frExchange(t, p.Addr(), "GET http://backend/x HTTP/1.1\r\nHost: backend\r\n\r\n", 1, "GET"); got != tc.want {
					t.Errorf("answered\n%q\nwant\n%q", got, tc.want)
				}
				if _, reqs := b.received(); len(reqs) != 1 {
					t.Errorf("the upstream executed %d requests, want 1", len(reqs))
				}
			})
		}
	}
}

// TestProto18UpgradeNoLengthAdded: an upgrade request without content
// goes upstream as it came, on both engines (the loop hands upgrades
// over): no "Content-Length: 0" of the proxy's, as any other request
// (forward.WriteRequest leaves fasthttp's out); a client's own goes as
// sent. Before, the upgrade path wrote fasthttp's rendering, which adds
// "Content-Length: 0" to every method but GET and HEAD: "OPTIONS" and
// "DELETE" upgrades reached the upstream with a field their client never
// sent.
func TestProto18UpgradeNoLengthAdded(t *testing.T) {
	const up = "Connection: Upgrade\r\nUpgrade: websocket\r\n"
	cases := []struct{ req, fwd string }{
		{"OPTIONS http://backend/x HTTP/1.1\r\nHost: backend\r\n" + up + "\r\n",
			"OPTIONS /x HTTP/1.1\r\nHost: backend\r\n" + up + "\r\n"},
		{"DELETE http://backend/x HTTP/1.1\r\nHost: backend\r\n" + up + "\r\n",
			"DELETE /x HTTP/1.1\r\nHost: backend\r\n" + up + "\r\n"},
		{"OPTIONS http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\n" + up + "\r\n",
			"OPTIONS /x HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\n" + up + "\r\n"},
		{"OPTIONS http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n" + up + "\r\nhi",
			"OPTIONS /x HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n" + up + "\r\nhi"},
	}
	const notFound = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newFrBackend(t, func(int, *http.Request, []byte) []byte { return []byte(notFound) })
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr())
			for i, tc := range cases {
				raw0, _ := b.received()
				if ans := frExchange(t, p.Addr(), tc.req, 1, "OPTIONS"); ans != notFound {
					t.Errorf("%q: answer %q, want %q", tc.req, ans, notFound)
				}
				raw1, reqs := b.received()
				if got := strings.TrimPrefix(raw1, raw0); got != tc.fwd {
					t.Errorf("%q: the upstream received\n%q\nwant\n%q", tc.req, got, tc.fwd)
				}
				if len(reqs) != i+1 {
					t.Errorf("%q: the upstream executed %d requests in all, want %d", tc.req, len(reqs), i+1)
				}
			}
		})
	}
}

// TestProto18RefusedUpgradeAnswerRead: an upgrade refused with an answer
// the exchange reads (an identity body to the close, a Trailer field) is
// read on the upgrade path as the exchange reads it, on both engines (the
// loop hands upgrades over): the body passed on, by its length, and no
// Trailer field. Before, the identity answer was the upgrade's 502 ("bad
// answer: ... unsupported transfer-encoding") and the Trailer field was
// passed on.
func TestProto18RefusedUpgradeAnswerRead(t *testing.T) {
	const req = "GET http://backend/chat HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
	cases := []struct{ name, answer, want string }{
		{"identity", "HTTP/1.1 403 Forbidden\r\nX-A: 1\r\nTransfer-Encoding: identity\r\n\r\nno",
			"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\nX-A: 1\r\n\r\nno"},
		{"a Trailer field", "HTTP/1.1 403 Forbidden\r\nTrailer: X-T\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nno",
			"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\nX-A: 1\r\n\r\nno"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				addr, execs := closingBackend(t, tc.answer)
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+addr)
				if got := frExchange(t, p.Addr(), req, 1, "GET"); got != tc.want {
					t.Errorf("answered\n%q\nwant\n%q", got, tc.want)
				}
				if n := execs.Load(); n != 1 {
					t.Errorf("the upstream executed the upgrade %d times, want 1", n)
				}
			})
		}
	}
}
