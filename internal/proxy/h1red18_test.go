package proxy

import (
	"net/http"
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
