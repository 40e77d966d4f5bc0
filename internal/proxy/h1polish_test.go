package proxy

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestH1PolishBodilessFraming: a request without content goes upstream
// with the framing the client sent, on both engines. fasthttp's writer
// added "Content-Length: 0" to every request but a GET or HEAD; Go's
// Transport and httputil.ReverseProxy add it to a POST, PUT or PATCH only
// (checked on loopback, go1.26: OPTIONS, DELETE, TRACE, PROPFIND without
// framing go without; POST, PUT, PATCH with "Content-Length: 0"). A
// client's own "Content-Length: 0" goes as sent (ReverseProxy drops it
// but on a POST, PUT or PATCH; the proxy forwards what the client sent),
// but on a TRACE (TestH1SmuggleTraceNoBodyFraming).
func TestH1PolishBodilessFraming(t *testing.T) {
	cases := []struct{ name, req, fwd string }{
		{"OPTIONS", "OPTIONS /a HTTP/1.1\r\nHost: backend\r\n\r\n", "OPTIONS /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: backend\r\nOrigin: o\r\n\r\n", "OPTIONS * HTTP/1.1\r\nHost: backend\r\nOrigin: o\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"DELETE", "DELETE /a HTTP/1.1\r\nHost: backend\r\n\r\n", "DELETE /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"DELETE, an empty chunked body", "DELETE /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "DELETE /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"PROPFIND", "PROPFIND /a HTTP/1.1\r\nHost: backend\r\n\r\n", "PROPFIND /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 4\r\n\r\n"},
		{"DELETE, Content-Length: 0 sent", "DELETE /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\n\r\n", "DELETE /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"OPTIONS, Content-Length: 0 sent", "OPTIONS /a HTTP/1.1\r\nHost: backend\r\ncontent-length: 0\r\n\r\n", "OPTIONS /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"GET, Content-Length: 0 sent", "GET /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\n\r\n", "GET /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"DELETE with content", "DELETE /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi", "DELETE /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\nRetrycap-Budget: 2\r\n\r\nhi"},
		{"POST", "POST /a HTTP/1.1\r\nHost: backend\r\n\r\n", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\nRetrycap-Budget: 4\r\n\r\n"},
		{"PUT", "PUT /a HTTP/1.1\r\nHost: backend\r\n\r\n", "PUT /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"PATCH", "PATCH /a HTTP/1.1\r\nHost: backend\r\n\r\n", "PATCH /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\nRetrycap-Budget: 4\r\n\r\n"},
		{"pipelined OPTIONS then DELETE", "OPTIONS /a HTTP/1.1\r\nHost: backend\r\n\r\nDELETE /b HTTP/1.1\r\nHost: backend\r\n\r\n",
			"OPTIONS /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\nDELETE /b HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				answers := strings.Count(tc.req, " HTTP/1.1\r\n")
				method := tc.req[:strings.IndexByte(tc.req, ' ')]
				ans := frExchange(t, p.Addr(), tc.req, answers, method)
				raw1, _ := b.received()
				if want := strings.Repeat(smOK, answers); ans != want {
					t.Errorf("answers %q, want %q", ans, want)
				}
				if fwd := strings.TrimPrefix(raw1, raw0); fwd != tc.fwd {
					t.Errorf("the upstream received\n%q\nwant\n%q", fwd, tc.fwd)
				}
			})
		}
	}
}

// TestH1PolishOwnAnswers: the proxy's refusals of a request it cannot
// serve, byte for byte, on both engines: no Date (the loop writes its own
// answers without one; the goroutine engine's ctx.Error added one to the
// 400 without a host, the 408s, the 413 and the 431), every message ends in
// a newline (the 400 without a host did not), and a head cut off is the
// head's timeout, a body (or its trailer section) cut off the body's.
func TestH1PolishOwnAnswers(t *testing.T) {
	const (
		get     = "GET http://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n"
		cutHead = "GET http://backend/a HTTP/1.1\r\nHost: back"
		head408 = "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 89\r\nConnection: close\r\n\r\nretrycap-proxy: request timeout: request head not received within --http-request-timeout\n"
		body408 = "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 83\r\nConnection: close\r\n\r\nretrycap-proxy: request timeout: request body not received within --client-timeout\n"
	)
	cases := []struct{ name, req, want string }{
		{"HTTP/1.0 without Host", "GET /a HTTP/1.0\r\n\r\n", "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 36\r\nConnection: close\r\n\r\nretrycap-proxy: request has no host\n"},
		{"body over 16 MiB", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nContent-Length: 16777217\r\n\r\n",
			"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 56\r\nConnection: close\r\n\r\nretrycap-proxy: request body larger than 16777216 bytes\n"},
		{"head over 64 KiB", "GET http://backend/a HTTP/1.1\r\nHost: backend\r\nX: " + strings.Repeat("a", 70000) + "\r\n\r\n",
			"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 41\r\nConnection: close\r\n\r\nretrycap-proxy: request header too large\n"},
		{"a head cut off", cutHead, head408},
		{"a head cut off after a GET", get + cutHead, smOK + head408},
		{"a head cut off after a POST", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi" + cutHead, smOK + head408},
		{"a head cut off after a chunked POST", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n" + cutHead, smOK + head408},
		{"a body cut off", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nhe", body408},
		{"a head cut off before its blank line", "GET http://backend/a HTTP/1.1\r\nHost: backend\r\n", head408},
		{"a head cut off after an answered Expect", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi" + cutHead,
			"HTTP/1.1 100 Continue\r\n\r\n" + smOK + head408},
		{"a chunked body cut off", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhe", body408},
		// fasthttp's ErrTimeout is no net.Error: this was 400 "the request
		// cannot be parsed" on both engines (the loop hands chunked bodies
		// to the goroutine engine).
		{"a trailer section cut off", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n", body408},
		{"a body cut off after its Expect was answered", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhe",
			"HTTP/1.1 100 Continue\r\n\r\n" + body408},
		{"a body cut off after a GET", get + "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nhe", smOK + body408},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(),
			"--http-request-timeout", "300ms", "--client-timeout", "300ms", "--keepalive-timeout", "300ms")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound on a hang, not a timing
				if _, err := io.WriteString(c, tc.req); err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(c)
				// A close with the rest of a refused head unread resets
				// the connection after the answer: what came before counts.
				if err != nil && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("reading the answers: %v (read %q)", err, got)
				}
				if string(got) != tc.want {
					t.Errorf("answered\n%q\nwant\n%q", got, tc.want)
				}
			})
		}
	}
}
