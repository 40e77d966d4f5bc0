package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The fourth adversarial round on the HTTP/1.1 engines (branch h1adv),
// client side: what smuggle_adv_test.go, headers_adv_test.go and
// framing_test.go do not try. Each request alone on a new connection, the
// exact bytes the upstream received and the answer, on both engines.

// TestH1AdvRequestTarget: userinfo in the request target or in Host. RFC 9110
// 4.2.4: an "http" URI's userinfo is deprecated, "a recipient SHOULD parse
// for userinfo and treat its presence as an error; it is likely being
// used to obscure the authority for the sake of phishing attacks". Before,
// the proxy passed it to fasthttp's client, which made an Authorization
// header of it (Basic "user:"): the upstream got a credential the client
// never sent (DESIGN "Proxy hardening": nothing is added to a request),
// and "http://backend@other/a" went to other. Go's ReverseProxy never
// writes one (only http.Client.send turns URL.User into Authorization,
// not the Transport a reverse proxy uses); the proxy refuses it: 400,
// nothing forwarded. The same for a target whose scheme is not http
// (forward.ReasonScheme).
func TestH1AdvRequestTarget(t *testing.T) {
	const refused = "400: userinfo in the request target or Host"
	cases := []struct{ name, req, want, fwd string }{
		{"absolute form with a user", "GET http://user@backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", refused, ""},
		{"absolute form with a user and password", "GET http://user:pw@backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", refused, ""},
		{"absolute form naming another upstream behind @", "GET http://backend@other/a HTTP/1.1\r\nHost: backend\r\n\r\n", refused, ""},
		{"absolute form with an empty userinfo", "GET http://@backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", refused, ""},
		{"Host with a user", "GET /a HTTP/1.1\r\nHost: u@backend\r\n\r\n", refused, ""},
		// A scheme other than http: never forwarded in plain text, never
		// an upstream's failure. These come before the forwarded cases:
		// with the breaker at 2 failures, they would open it (before,
		// each was 3 attempts failed as resets, then a 503).
		{"https", "GET https://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", "400: a request target whose scheme is not http", ""},
		{"HTTPS", "GET HTTPS://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", "400: a request target whose scheme is not http", ""},
		{"ws", "GET ws://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", "400: a request target whose scheme is not http", ""},
		{"HTTP in capitals", "GET HTTP://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n", "HTTP/1.1 200 OK",
			"GET /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"userinfo and the client's own Authorization", "GET http://user@backend/a HTTP/1.1\r\nHost: backend\r\nAuthorization: Bearer t\r\n\r\n", refused, ""},
		// An @ in the path or the query is no userinfo.
		{"@ in the path", "GET http://backend/a@b?c=@d HTTP/1.1\r\nHost: backend\r\n\r\n", "HTTP/1.1 200 OK",
			"GET /a@b?c=@d HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"@ in an origin-form path", "GET /a@b HTTP/1.1\r\nHost: backend\r\n\r\n", "HTTP/1.1 200 OK",
			"GET /a@b HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3,other=3", "--resolve", "backend="+b.addr()+",other="+b.addr(), "--chain-cap", "4",
			"--breaker-failures", "2", "--breaker-window", "1m", "--breaker-open-for", "1m")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				answers := 1
				if strings.HasPrefix(tc.want, "400: ") {
					answers = 0
				}
				ans := frExchange(t, p.Addr(), tc.req, answers, "GET")
				raw1, _ := b.received()
				fwd := strings.TrimPrefix(raw1, raw0)
				if reason, ok := strings.CutPrefix(tc.want, "400: "); ok {
					if !strings.HasPrefix(ans, "HTTP/1.1 400 Bad Request\r\n") || !strings.Contains(ans, "\r\nConnection: close\r\n") ||
						!strings.HasSuffix(ans, "\r\n\r\nretrycap-proxy: malformed request: "+reason+"\n") {
						t.Errorf("answer %q, want a 400 naming %q, then the close", ans, reason)
					}
				} else if !strings.HasPrefix(ans, tc.want+"\r\n") {
					t.Errorf("answer %q, want %q", ans, tc.want)
				}
				if fwd != tc.fwd {
					t.Errorf("the upstream received\n%q\nwant\n%q", fwd, tc.fwd)
				}
			})
		}
	}
}

// TestH1AdvChunkedRequestFraming: a client's chunked body is held to the
// bounds of Go's chunked reader (net/http/internal/chunked.go), which the
// proxy applies to answers already (TestAdv3ChunkExtensionFlood): a chunk
// line of 4 KiB or more (maxLineLength), or framing beyond what the data
// carries by over 16 KiB (its excess count), is 400 and nothing is
// forwarded. Before, fasthttp's server read a chunk extension byte by byte
// for as long as it went on: a 40 MiB extension was read whole and its
// 5-byte body forwarded, 10,000 one-byte chunks with 4 KiB extensions
// (40 MB of framing for 10 KB of data) too. Both engines (the loop hands a
// chunked body to the goroutine engine's reader, whose pre-parser counts).
func TestH1AdvChunkedRequestFraming(t *testing.T) {
	const head = "POST /a HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n"
	const line, excess = "400: a chunk line longer than 4 KiB", "400: chunked encoding contains too much non-data"
	cases := []struct{ name, req, want, fwd string }{
		{"a 5 KiB extension", head + "5;" + strings.Repeat("e", 5<<10) + "\r\nhello\r\n0\r\n\r\n", line, ""},
		{"a 40 MiB extension", head + "5;" + strings.Repeat("e", 40<<20) + "\r\nhello\r\n0\r\n\r\n", line, ""},
		{"one-byte chunks with 3 KiB extensions", head + strings.Repeat("1;"+strings.Repeat("e", 3<<10)+"\r\nh\r\n", 10) + "0\r\n\r\n", excess, ""},
		// Under both bounds: forwarded, its length made good.
		{"a 4 KiB chunk line less one", head + "5;" + strings.Repeat("e", 4096-5) + "\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 200 OK",
			"POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
		{"one-byte chunks with 2 KiB extensions, a few", head + strings.Repeat("1;"+strings.Repeat("e", 2<<10)+"\r\nh\r\n", 5) + "0\r\n\r\n", "HTTP/1.1 200 OK",
			"POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhhhhh"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				c := proxytest.Dial(t, p.Addr())
				// The proxy may refuse before it has read all: the write
				// runs beside the read and may fail.
				go func() { _, _ = io.WriteString(c.C, tc.req) }()
				var ans []byte
				var err error
				if strings.HasPrefix(tc.want, "400: ") {
					ans, err = io.ReadAll(c.BR)
				} else {
					var raw bytes.Buffer
					ans = []byte(advRead(t, bufio.NewReader(io.TeeReader(c.BR, &raw)), &raw, "POST"))
				}
				if err != nil && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("reading the answer: %v (read %q)", err, ans)
				}
				raw1, _ := b.received()
				fwd := strings.TrimPrefix(raw1, raw0)
				if reason, ok := strings.CutPrefix(tc.want, "400: "); ok {
					if want := string(forward.MalformedAnswer(reason)); !strings.HasSuffix(string(ans), want[len("HTTP/1.1 400 Bad Request\r\n"):]) || !strings.HasPrefix(string(ans), "HTTP/1.1 400 Bad Request\r\n") {
						t.Errorf("answer %q, want a 400 naming %q, then the close", ans, reason)
					}
				} else if !strings.HasPrefix(string(ans), tc.want+"\r\n") {
					t.Errorf("answer %q, want %q", ans, tc.want)
				}
				if fwd != tc.fwd {
					t.Errorf("the upstream received\n%q\nwant\n%q", fwd, tc.fwd)
				}
			})
		}
	}
}
