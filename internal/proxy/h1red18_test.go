package proxy

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Session 18's HTTP/1.1 red team (branch h1red18).

// TestH1Red18MalformedBeforeBody: a request refused by its head (a header
// line the proxy does not read, a target it refuses, a port that is no
// number, an HTTP version it does not speak, no host) gets that refusal on
// both engines, the same bytes, whatever its body: over the body budget
// (another connection holds all of --max-buffered-body-bytes), over 16 MiB,
// chunked, behind Expect: 100-continue (no 100 first), or not sent at all
// (answered at once, its body never read). Nothing reaches the upstream and
// no budget refusal is counted. Before, the goroutine engine judged the
// body first: the budget's 503 (or the 413) to a malformed request the
// event loop answered 400, and a malformed head with a small body in
// budget waited for the body before its 400 (--client-timeout's 408 when
// it never came). Two refusals on one head come in the loop's order (a
// header name before a port): the goroutine engine's fasthttp refused the
// port first.
func TestH1Red18MalformedBeforeBody(t *testing.T) {
	const max = 64 << 10
	badName := string(forward.MalformedAnswer("a header name with a byte that is not a token character"))
	cases := []struct{ name, req, want string }{
		{"a header name with a blank, body over the budget", "POST http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 100000\r\nBad Name: x\r\n\r\n", badName},
		{"obs-fold, body over the budget", "POST http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 100000\r\nX: a\r\n folded\r\n\r\n", string(forward.MalformedAnswer("a folded header line (obs-fold)"))},
		{"a header name with a blank, body over 16 MiB", "POST http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 20000000\r\nBad Name: x\r\n\r\n", badName},
		{"https target, body over the budget", "POST https://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 100000\r\n\r\n", string(forward.MalformedAnswer(forward.ReasonScheme))},
		{"a port that is no number, body over the budget", "POST http://backend:abc/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 100000\r\n\r\n", string(forward.MalformedAnswer("invalid port"))},
		{"no host, body over the budget", "POST /x HTTP/1.1\r\nHost: :80\r\nContent-Length: 100000\r\n\r\n", string(forward.OwnAnswer(http.StatusBadRequest, "retrycap-proxy: request has no host\n", true))},
		{"HTTP/2.0 in a request line, small body", "POST http://backend/x HTTP/2.0\r\nHost: backend\r\nContent-Length: 100\r\n\r\n", string(forward.OwnAnswer(http.StatusHTTPVersionNotSupported, "retrycap-proxy: HTTP version not supported: \"HTTP/2.0\"\n", true))},
		{"a header name with a blank, chunked", "POST http://backend/x HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\nBad Name: x\r\n\r\n20000\r\n", badName},
		{"a header name with a blank, small body never sent", "POST http://backend/x HTTP/1.1\r\nHost: backend\r\nBad Name: x\r\nContent-Length: 100\r\n\r\n", badName},
		{"a header name with a blank, Expect", "POST http://backend/x HTTP/1.1\r\nHost: backend\r\nBad Name: x\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n", badName},
		{"a header name and a port", "POST http://backend:abc/x HTTP/1.1\r\nHost: backend\r\nBad Name: x\r\nContent-Length: 100\r\n\r\n", badName},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", "65536", "--client-timeout", "30s")
			// A request whose body never comes holds the whole budget.
			hold := proxytest.Dial(t, p.Addr())
			hold.Send(postHead("/hold", max))
			proxytest.Eventually(t, "the budget held", func() bool { return p.fw.Bodies.InUse() == max })
			for _, tc := range cases {
				c := proxytest.Dial(t, p.Addr()) // 5 s to the close: the body is never awaited
				c.Send(tc.req)
				if got := c.Rest(); got != tc.want {
					t.Errorf("%s: answered\n%q\nwant\n%q", tc.name, got, tc.want)
				}
			}
			if n := b.Hits.Load(); n != 0 {
				t.Errorf("the backend executed %d requests, want 0", n)
			}
			if n := p.fw.Bodies.Refused(); n != 0 {
				t.Errorf("budget refusals counted: %d, want 0", n)
			}
			if n := p.fw.Bodies.InUse(); n != max {
				t.Errorf("budget in use: %d, want %d (the held body's alone)", n, max)
			}
		})
	}
}

// TestH1Red18EmptyQueryKept: an empty query keeps its "?" upstream, on
// both engines and on a retry too: "OPTIONS http://backend?" has a query
// component (empty), so RFC 9112 3.2.4's "*" (for a URI with an empty path
// and no query) does not apply and it goes as "OPTIONS /?" (3.2.1: "/" for
// the empty path), as Go's net/http sends it; "GET /x?" goes as "/x?", as
// nginx 1.22 and HAProxy 2.6 pass it on. Before, both engines sent
// "OPTIONS /" and "GET /x": fasthttp's writer rebuilds the target from the
// URI and drops an empty query, so the origin got another URI than the
// client's (RFC 3986 6.2.3).
func TestH1Red18EmptyQueryKept(t *testing.T) {
	cases := []struct{ req, target string }{
		{"OPTIONS http://backend? HTTP/1.1\r\nHost: backend\r\n\r\n", "OPTIONS /?"},
		{"GET /x? HTTP/1.1\r\nHost: backend\r\n\r\n", "GET /x?"},
		{"GET http://backend/a%3Fb? HTTP/1.1\r\nHost: backend\r\n\r\n", "GET /a%3Fb?"},
		{"GET http://backend? HTTP/1.1\r\nHost: backend\r\n\r\n", "GET /?"},
		{"GET /x?? HTTP/1.1\r\nHost: backend\r\n\r\n", "GET /x??"},
		{"OPTIONS http://backend HTTP/1.1\r\nHost: backend\r\n\r\n", "OPTIONS *"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			// Every first attempt is answered 503, its retry 200: the retry's
			// target is the one the first write set.
			b := newFrBackend(t, func(n int, _ *http.Request, _ []byte) []byte {
				if n%2 == 1 {
					return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
				}
				return []byte(smOK)
			})
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
			for _, tc := range cases {
				raw0, _ := b.received()
				method := tc.req[:strings.IndexByte(tc.req, ' ')]
				if ans := frExchange(t, p.Addr(), tc.req, 1, method); ans != smOK {
					t.Errorf("%q: answer %q, want %q", tc.req, ans, smOK)
				}
				raw1, _ := b.received()
				fwd := tc.target + " HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: "
				if got, want := strings.TrimPrefix(raw1, raw0), fwd+"2\r\n\r\n"+fwd+"1\r\n\r\n"; got != want {
					t.Errorf("%q: the upstream received\n%q\nwant\n%q", tc.req, got, want)
				}
			}
		})
	}
}

// TestH1Red18FragmentRefused: a request target holding a '#' (origin form,
// absolute form, after a query, as the whole path) is 400 `a fragment (#)
// in the request target` on both engines, the same bytes, nothing sent
// upstream: the request-target grammar has no fragment (RFC 9112 3.2) and
// HAProxy 2.6.15+ refuses it alike. Before, both engines dropped the '#'
// and all after it, silently: `DELETE /users/1#/../2` ran as `DELETE
// /users/1`, `GET http://backend#/x` as `GET /`. An escaped one (%23) is
// path and passes as it came.
func TestH1Red18FragmentRefused(t *testing.T) {
	want := string(forward.MalformedAnswer(forward.ReasonFragment))
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			for _, req := range []string{
				"DELETE /users/1#/../2 HTTP/1.1\r\nHost: backend\r\n\r\n",
				"GET /x#frag HTTP/1.1\r\nHost: backend\r\n\r\n",
				"GET http://backend/x?a=1#b HTTP/1.1\r\nHost: backend\r\n\r\n",
				"GET http://backend#/x HTTP/1.1\r\nHost: backend\r\n\r\n",
				"POST /orders# HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi",
			} {
				c := proxytest.Dial(t, p.Addr())
				c.Send(req)
				if got := c.Rest(); got != want {
					t.Errorf("%q: answered\n%q\nwant\n%q", req, got, want)
				}
			}
			if n := b.Hits.Load(); n != 0 {
				t.Errorf("the backend executed %d requests, want 0", n)
			}
			c := proxytest.Dial(t, p.Addr())
			c.Send("DELETE /users/1%23x HTTP/1.1\r\nHost: backend\r\n\r\n")
			c.Expect("DELETE", http.StatusOK, "/users/1#x:") // the echo backend's decoded path
		})
	}
}

// TestH1Red18IdentityAloneRefused: a request whose Transfer-Encoding is
// "identity" with no Content-Length is 400 `unsupported transfer-encoding`
// on both engines, the connection closed, nothing executed upstream: RFC
// 9112 6.1 (a request Transfer-Encoding not ending in chunked: 400 and
// close); HAProxy 2.6 answers 400, nginx 1.22 501. Before, fasthttp's
// parser skipped the field: both engines executed the POST with no body
// and served the bytes after its head as a second request on the
// connection, which a front end reading the body to its close would not
// have sent as one (two executions at the backend for one request of the
// front end's). With a Content-Length the body is framed by it, as before
// (TestAdvRequestSmuggling's "TE identity and CL").
func TestH1Red18IdentityAloneRefused(t *testing.T) {
	want := string(forward.MalformedAnswer("unsupported transfer-encoding"))
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			for _, req := range []string{
				"POST /orders HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: identity\r\n\r\nPOST /orders HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi",
				"POST http://backend/orders HTTP/1.1\r\nHost: backend\r\ntransfer-encoding:\tIdentity \r\n\r\n",
				"POST /orders HTTP/1.0\r\nHost: backend\r\nTransfer-Encoding: identity\r\nConnection: keep-alive\r\n\r\n",
			} {
				c := proxytest.Dial(t, p.Addr())
				c.Send(req)
				if got := c.Rest(); got != want {
					t.Errorf("%q: answered\n%q\nwant\n%q", req, got, want)
				}
			}
			if n := b.Hits.Load(); n != 0 {
				t.Errorf("the backend executed %d requests, want 0", n)
			}
			c := proxytest.Dial(t, p.Addr())
			c.Send("POST /orders HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nhi")
			c.Expect("POST", http.StatusOK, "/orders:hi")
			if n := b.Hits.Load(); n != 1 {
				t.Errorf("the backend executed %d requests, want 1", n)
			}
		})
	}
}

// TestH1Red18BadHeadHalfClosed: a malformed head with a chunked body whose
// client then closes its sending half gets the head's 400 on both engines,
// and the requests read after it are not refused: 20 rounds of such a head,
// each followed by a good POST with Expect: 100-continue on another
// connection, which gets the 100 and the backend's 200, executed once.
// Before, the goroutine engine answered the half-closed client nothing
// (fasthttp answers no end of stream), where the loop answers the 400; and
// the refusal it had noted for that head stayed with its pooled request,
// which answered the next request read into it (its Expect) with that 400.
func TestH1Red18BadHeadHalfClosed(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			const rounds = 20
			for i := range rounds {
				bad := proxytest.Dial(t, p.Addr())
				bad.Send("POST /bad HTTP/1.1\r\nHost: backend\r\nBad Name: x\r\nTransfer-Encoding: chunked\r\n\r\n")
				_ = bad.C.(*net.TCPConn).CloseWrite()
				if got, want := bad.Rest(), string(forward.MalformedAnswer("a header name with a byte that is not a token character")); got != want {
					t.Fatalf("round %d: the half-closed client got\n%q\nwant\n%q", i, got, want)
				}
				c := proxytest.Dial(t, p.Addr())
				c.Send("POST /good HTTP/1.1\r\nHost: backend\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
				line, err := c.BR.ReadString('\n')
				if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
					t.Fatalf("round %d: %q (%v), want the 100", i, line, err)
				}
				if _, err := c.BR.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
				c.Send("hi")
				c.Expect("POST", http.StatusOK, "/good:hi")
			}
			if n := b.Hits.Load(); n != rounds {
				t.Errorf("the backend executed %d requests, want %d", n, rounds)
			}
		})
	}
}

// TestH1Red18UpgradeTargetAsSent: an upgrade request (a WebSocket
// handshake) goes upstream with its target as the client sent it, on both
// engines (the loop hands upgrades over), as every other request does: dot
// segments, a double slash and an escaped slash kept, an empty query kept.
// Before, the upgrade path rendered fasthttp's normalised URI:
// "/a/../b/./c//d%2Fe" went as "/b/c/d/e" (a slash the client escaped
// became a path separator) and "/chat?" as "/chat", another resource than
// the one named, and not what the same target without the upgrade became.
// An absolute-form target's host replaces the Host field, as for any other
// request (RFC 9112 3.2.2); it went with the client's Host: "GET
// http://backend/x" with "Host: other" reached backend saying "other".
func TestH1Red18UpgradeTargetAsSent(t *testing.T) {
	cases := []struct{ req, fwd string }{
		{"GET http://backend/a/../b/./c//d%2Fe?x=%20y& HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
			"GET /a/../b/./c//d%2Fe?x=%20y& HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
		{"GET /chat? HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
			"GET /chat? HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
		{"GET http://backend/x HTTP/1.1\r\nHost: other\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
			"GET /x HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
	}
	const notFound = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			// The upgrade refused: the answer is passed on and the
			// connection goes on as HTTP/1.1.
			b := newFrBackend(t, func(int, *http.Request, []byte) []byte { return []byte(notFound) })
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr())
			for _, tc := range cases {
				raw0, _ := b.received()
				if ans := frExchange(t, p.Addr(), tc.req, 1, "GET"); ans != notFound {
					t.Errorf("%q: answer %q, want %q", tc.req, ans, notFound)
				}
				raw1, _ := b.received()
				if got := strings.TrimPrefix(raw1, raw0); got != tc.fwd {
					t.Errorf("%q: the upstream received\n%q\nwant\n%q", tc.req, got, tc.fwd)
				}
			}
		})
	}
}

// TestH1Red18TrailerKeyNoRetry: an Idempotency-Key (or a Retrycap-Budget)
// sent in a chunked request's trailer section does not make a keyless POST
// retryable, on both engines: trailer fields are not merged into the
// header (RFC 9110 6.5.1), so the POST whose upstream answers 503 is
// executed once and the 503 passed on, and the upstream sees neither field.
// Checked so (it held before this branch); a merge would have had every
// such POST sent three times.
func TestH1Red18TrailerKeyNoRetry(t *testing.T) {
	const unavailable = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
	const fwd = "POST /orders HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\nRetrycap-Budget: 4\r\n\r\nhi"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newFrBackend(t, func(int, *http.Request, []byte) []byte { return []byte(unavailable) })
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
			for _, trailer := range []string{"Idempotency-Key: k1", "Retrycap-Budget: 1"} {
				raw0, _ := b.received()
				req := "POST http://backend/orders HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n" + trailer + "\r\n\r\n"
				if ans := frExchange(t, p.Addr(), req, 1, "POST"); ans != unavailable {
					t.Errorf("%s: answer %q, want %q", trailer, ans, unavailable)
				}
				raw1, _ := b.received()
				if got := strings.TrimPrefix(raw1, raw0); got != fwd {
					t.Errorf("%s: the upstream received\n%q\nwant once\n%q", trailer, got, fwd)
				}
			}
		})
	}
}
