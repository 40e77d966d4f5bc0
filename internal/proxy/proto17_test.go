package proxy

import (
	"net/http"
	"strings"
	"testing"
)

// Session 17's protocol leftovers (branch proto17).

// TestProto17OptionsAbsoluteEmptyPath: an OPTIONS request in absolute form
// whose URI has an empty path and no query goes to the origin as
// "OPTIONS *" (RFC 9112 3.2.4: "the last proxy on the request chain MUST
// send a request-target of "*""); one with a path "/" stays "/", one with
// an empty path and a query gets "/" before its query (RFC 9112 3.2.1's
// rule for an empty path), and any other method with an empty path gets
// "/". Before, both engines sent "OPTIONS / HTTP/1.1": a request for the
// server's own capabilities turned into one for its root resource.
func TestProto17OptionsAbsoluteEmptyPath(t *testing.T) {
	cases := []struct{ name, req, fwd string }{
		{"empty path", "OPTIONS http://backend HTTP/1.1\r\nHost: backend\r\n\r\n", "OPTIONS * HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"empty path, a port", "OPTIONS http://backend:80 HTTP/1.1\r\nHost: backend:80\r\n\r\n", "OPTIONS * HTTP/1.1\r\nHost: backend:80\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"path /", "OPTIONS http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n", "OPTIONS / HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"empty path, a query", "OPTIONS http://backend?a=1 HTTP/1.1\r\nHost: backend\r\n\r\n", "OPTIONS /?a=1 HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"GET, empty path", "GET http://backend HTTP/1.1\r\nHost: backend\r\n\r\n", "GET / HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: backend\r\n\r\n", "OPTIONS * HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				method := tc.req[:strings.IndexByte(tc.req, ' ')]
				ans := frExchange(t, p.Addr(), tc.req, 1, method)
				raw1, _ := b.received()
				if ans != smOK {
					t.Errorf("answer %q, want %q", ans, smOK)
				}
				if fwd := strings.TrimPrefix(raw1, raw0); fwd != tc.fwd {
					t.Errorf("the upstream received\n%q\nwant\n%q", fwd, tc.fwd)
				}
			})
		}
	}
}

// TestProto17OptionsAsteriskRetried: the retry of such an OPTIONS (its
// first answer a 503) goes as "OPTIONS *" too: the first write's target is
// the URI's, which now holds "*".
func TestProto17OptionsAsteriskRetried(t *testing.T) {
	const fwd = "OPTIONS * HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: "
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newFrBackend(t, func(n int, _ *http.Request, _ []byte) []byte {
				if n == 1 {
					return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
				}
				return []byte(smOK)
			})
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
			if ans := frExchange(t, p.Addr(), "OPTIONS http://backend HTTP/1.1\r\nHost: backend\r\n\r\n", 1, "OPTIONS"); ans != smOK {
				t.Errorf("answer %q, want %q", ans, smOK)
			}
			raw, _ := b.received()
			if want := fwd + "2\r\n\r\n" + fwd + "1\r\n\r\n"; raw != want {
				t.Errorf("the upstream received\n%q\nwant\n%q", raw, want)
			}
		})
	}
}
