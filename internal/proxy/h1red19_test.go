package proxy

import (
	"net/http"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Session 19's HTTP/1.1 red team (branch h1red19).

// TestH1Red19OldAnswerTransferEncoding: an upstream answer that is not
// HTTP/1.1 (HTTP/1.0) with a Transfer-Encoding field is a bad answer on
// both engines, with or without a Content-Length (RFC 9112 6.1: such a
// message's framing is faulty, even with a Content-Length; HAProxy 2.6
// answers 502): a keyless POST gets the 502, executed once; a GET is
// tried three times (then the proxy's 503, attempts exhausted). A Transfer-Encoding list in an HTTP/1.1 answer
// ("identity, chunked", "chunked, identity") stays a bad answer alike
// (pinned: HAProxy 2.6 answers 502; Go's client refuses any value but
// "chunked"). Before, fasthttp's parser ignored the field in an HTTP/1.0
// answer: "identity" with "Content-Length: 2" and 5 bytes sent passed 2
// of them on, and a chunked body's framing reached the client as its
// content ("5\r\nhello\r\n0\r\n\r\n" inside the proxy's own chunks).
func TestH1Red19OldAnswerTransferEncoding(t *testing.T) {
	old := "(the upstream's answer is malformed: " + forward.ReasonOldAnswerTE + ")"
	cases := []struct{ name, answer, why string }{
		{"HTTP/1.0, identity", "HTTP/1.0 200 OK\r\nTransfer-Encoding: identity\r\n\r\nhello", old},
		{"HTTP/1.0, identity and a Content-Length", "HTTP/1.0 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nhello", old},
		{"HTTP/1.0, chunked", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", old},
		{"HTTP/1.0, CHUNKED after another field", "HTTP/1.0 200 OK\r\nX-A: 1\r\ntransfer-encoding:CHUNKED\r\n\r\n5\r\nhello\r\n0\r\n\r\n", old},
		{"HTTP/1.2, chunked", "HTTP/1.2 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", old},
		{"HTTP/1.1, identity, chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			"(the upstream's answer is malformed: unsupported transfer-encoding)"},
		{"HTTP/1.1, chunked, identity", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			"(the upstream's answer is malformed: unsupported transfer-encoding)"},
		{"HTTP/1.1, identity then chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			"(the upstream's answer is malformed: " + forward.ReasonTooManyTE + ")"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				addr, execs := closingBackend(t, tc.answer)
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+addr, "--retry-on", "reset,5xx")
				c := proxytest.Dial(t, p.Addr())
				c.Send("POST http://backend/x HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi")
				c.Expect("POST", http.StatusBadGateway, "retrycap-proxy: upstream backend ("+addr+"): 1 attempt(s), last failed with bad-answer "+
					tc.why+"; not retried: not-retryable\n")
				if n := execs.Load(); n != 1 {
					t.Errorf("the upstream executed the POST %d times, want 1", n)
				}
				c.Send("GET http://backend/x HTTP/1.1\r\nHost: backend\r\n\r\n")
				c.Expect("GET", http.StatusServiceUnavailable, "retrycap-proxy: upstream backend ("+addr+"): 3 attempt(s), last failed with bad-answer "+
					tc.why+"; not retried: attempts\n")
				if n := execs.Load(); n != 4 {
					t.Errorf("the upstream executed %d requests, want 4 (the POST once, the GET three times)", n)
				}
			})
		}
	}
}
