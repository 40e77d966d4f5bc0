package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Request smuggling, session 13 (branch h1smuggle): what
// smuggle_adv_test.go, h1adv_request_test.go, te_twice_adv_test.go,
// barelf_test.go and headers_adv_test.go do not try, on both engines. Each
// case is one connection: the exact answer and the exact bytes the
// upstream received.

const smOK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// smSend writes req on a new connection (beside the read: the proxy may
// refuse before it has read all) and reads to the close.
func smSend(t *testing.T, addr, req string) string {
	t.Helper()
	c := proxytest.Dial(t, addr)
	go func() { _, _ = io.WriteString(c.C, req) }()
	ans, err := io.ReadAll(c.BR)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading the answers: %v (read %q)", err, ans)
	}
	return string(ans)
}

// TestH1SmuggleChunkBoundsAfterAnyRequest: Go's chunk bounds (a chunk line
// under 4 KiB, TestH1AdvChunkedRequestFraming) hold for every request of a
// connection, whatever came before it. They are the goroutine engine's
// pre-parser's (the loop hands chunked bodies to that engine), and it
// stopped following a connection at two empty lines before a request line
// (it took "\r\n\r\n" for a head, which fasthttp then refused to parse)
// and at any request that might have become a tunnel (an Upgrade, an h2c
// upgrade served as HTTP/1.1): every request after it was read with no
// bound, its 5 KiB chunk extension read and its body forwarded. A request
// head over 8 KiB is 431 on both engines (fasthttp's read buffer, the
// loop's hand-off) and cannot carry a body past the bounds.
func TestH1SmuggleChunkBoundsAfterAnyRequest(t *testing.T) {
	flood := "POST /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n5;" + strings.Repeat("e", 5<<10) + "\r\nhello\r\n0\r\n\r\n"
	refused := string(forward.MalformedAnswer("a chunk line longer than 4 KiB"))
	cases := []struct{ name, req, want, fwd string }{
		{"alone", flood, refused, ""},
		{"after an empty line", "\r\n" + flood, refused, ""},
		{"after two empty lines", "\r\n\r\n" + flood, refused, ""},
		{"after five empty lines", strings.Repeat("\r\n", 5) + flood, refused, ""},
		{"after a refused websocket upgrade", "GET /u HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + flood, smOK + refused,
			"GET /u HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nRetrycap-Budget: 4\r\n\r\n"},
		{"after an Upgrade field alone", "GET /u HTTP/1.1\r\nHost: backend\r\nUpgrade: foo\r\n\r\n" + flood, smOK + refused,
			"GET /u HTTP/1.1\r\nHost: backend\r\nUpgrade: foo\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"after a refused upgrade with a body", "POST /u HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\nhi" + flood, smOK + refused,
			"POST /u HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nRetrycap-Budget: 4\r\n\r\nhi"},
		{"after an h2c upgrade", "GET /u HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n" + flood, smOK + refused,
			"GET /u HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"after an HTTP/1.0 keep-alive request", "GET /a HTTP/1.0\r\nHost: backend\r\nConnection: keep-alive\r\n\r\n" + flood,
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok" + refused, "GET /a HTTP/1.0\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"after a chunked request with a 7 KiB trailer", "POST /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: " + strings.Repeat("t", 7<<10) + "\r\n\r\n" + flood,
			smOK + refused, "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
		// Empty lines before a request are skipped, as fasthttp's parser
		// (and HAProxy) skip them: the request itself is served.
		{"two empty lines, then a chunked request", "\r\n\r\nPOST /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: backend\r\nConnection: close\r\n\r\n",
			smOK + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
			"POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello" + "GET /b HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxy(t, "--engine", engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				ans := smSend(t, p.Addr(), tc.req)
				raw1, _ := b.received()
				if ans != tc.want {
					t.Errorf("answers\n%q\nwant\n%q", ans, tc.want)
				}
				if fwd := strings.TrimPrefix(raw1, raw0); fwd != tc.fwd {
					t.Errorf("the upstream received\n%q\nwant\n%q", fwd, tc.fwd)
				}
			})
		}
	}
}

// TestH1SmuggleUpgradeTunnelUnread: the bytes a client sends after an
// upgrade request, before the 101, belong to the tunnel: held until the
// upgrade's answer, then passed on unread, even when they look like a
// head the pre-parser would refuse (a bare LF) or a chunk line over the
// bounds.
func TestH1SmuggleUpgradeTunnelUnread(t *testing.T) {
	tunnel := "GET /x HTTP/1.1\nHost: x\n\n5;" + strings.Repeat("e", 5<<10) + "\r\n"
	up := "GET /ws HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
	switched := "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newFrBackend(t, func(int, *http.Request, []byte) []byte { return []byte(switched) })
			p := startProxy(t, "--engine", engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
			c := proxytest.Dial(t, p.Addr())
			if _, err := io.WriteString(c.C, up+tunnel); err != nil {
				t.Fatal(err)
			}
			want := switched + "echo:" + tunnel
			got := make([]byte, 0, len(want))
			for !strings.HasPrefix(want, string(got)) || len(got) < len(want) {
				buf := make([]byte, 4096)
				n, err := c.BR.Read(buf)
				got = append(got, buf[:n]...)
				if !bytes.HasPrefix([]byte(want), got) {
					// The echo may come in several writes, each "echo:"-prefixed.
					got = bytes.ReplaceAll(got, []byte("echo:"), nil)
					w := strings.ReplaceAll(want, "echo:", "")
					if !strings.HasPrefix(w, string(got)) {
						t.Fatalf("the client got %q, want %q", got, want)
					}
					want = w
				}
				if err != nil {
					t.Fatalf("reading: %v (got %q, want %q)", err, got, want)
				}
			}
			raw, _ := b.received()
			if raw != "GET /ws HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nRetrycap-Budget: 4\r\n\r\n"+tunnel {
				t.Errorf("the upstream received %q", raw)
			}
		})
	}
}

// TestH1SmuggleTraceNoBodyFraming: a TRACE without content goes upstream
// without Content-Length (RFC 9110 9.3.8: a client must not send content
// in a TRACE). Go's ReverseProxy and Transport send none, whether or not
// the client sent "Content-Length: 0" (checked on loopback with
// httputil.ReverseProxy, go1.25); fasthttp's writer added
// "Content-Length: 0" to every request but a GET or HEAD. A TRACE with
// content is forwarded framed by its length, as Go's ReverseProxy
// forwards it.
func TestH1SmuggleTraceNoBodyFraming(t *testing.T) {
	const bare = "TRACE /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 4\r\n\r\n"
	cases := []struct{ name, req, fwd string }{
		{"no framing", "TRACE /a HTTP/1.1\r\nHost: backend\r\n\r\n", bare},
		{"Content-Length: 0", "TRACE /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\n\r\n", bare},
		{"an empty chunked body", "TRACE /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", bare},
		{"absolute form", "TRACE http://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", bare},
		{"with content", "TRACE /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nhello",
			"TRACE /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
		{"pipelined after a TRACE", "TRACE /a HTTP/1.1\r\nHost: backend\r\n\r\nGET /b HTTP/1.1\r\nHost: backend\r\n\r\n",
			bare + "GET /b HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxy(t, "--engine", engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				answers := strings.Count(tc.req, " HTTP/1.1\r\n")
				ans := frExchange(t, p.Addr(), tc.req, answers, "TRACE")
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
