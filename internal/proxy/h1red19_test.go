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

// TestH1Red19RequestTrailerLines: a chunked request's trailer lines are
// held to the head's field-line rules on both engines (the loop hands a
// chunked body to the goroutine engine's reader): a folded line
// (obs-fold), a name with a blank or another byte that is no token
// character, a blank before the colon are 400 with the head's words, "in
// the trailer section", nothing sent upstream. Before, they passed and
// the request ran (the trailers dropped). HAProxy 2.6 answers such a name
// 400 in trailers too; Go's server refuses it. What fasthttp's parser
// refused already stays so, pinned: a bare CR, a NUL or another control
// byte in a value (HAProxy and nginx refuse a bare CR), a name it forbids
// in trailers (Content-Length, Transfer-Encoding, Host), a line without a
// colon, a first line that starts with a blank. A well-formed trailer is
// dropped and the request runs, its body whole.
func TestH1Red19RequestTrailerLines(t *testing.T) {
	const head = "POST /x HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n"
	refused := func(why string) string { return string(forward.MalformedAnswer(why)) }
	token := refused("a header name with a byte that is not a token character in the trailer section")
	cases := []struct{ name, trailers, want string }{
		{"obs-fold", "X-T: a\r\n folded\r\n", refused("a folded header line (obs-fold) in the trailer section")},
		{"obs-fold by a tab", "X-T: a\r\n\tfolded\r\n", refused("a folded header line (obs-fold) in the trailer section")},
		{"a blank in a name", "Bad Name: x\r\n", token},
		{"a blank before the colon", "X-T : v\r\n", token},
		{"a bracket in a name", "X(T): v\r\n", token},
		{"the second line's name", "X-T: v\r\nX U: w\r\n", token},
		{"an underscore framing name", "Content_Length: 5\r\n", refused(forward.ReasonUnderscoreFraming + " in the trailer section")},
		{"a bare CR", "X-T: a\rb\r\n", refused("invalid trailer value")},
		{"a NUL", "X-T: a\x00b\r\n", refused("invalid trailer value")},
		{"Content-Length", "Content-Length: 5\r\n", refused("forbidden trailer key")},
		{"Transfer-Encoding", "Transfer-Encoding: chunked\r\n", refused("forbidden trailer key")},
		{"Host", "Host: evil\r\n", refused("forbidden trailer key")},
		{"no colon", "nocolon\r\n", refused("a header line without a colon")},
		{"a first line with a blank", " lead: v\r\n", refused("a header line starts with a blank")},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newFrBackend(t, nil)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.addr())
			for _, tc := range cases {
				if got := smSend(t, p.Addr(), head+tc.trailers+"\r\n"); got != tc.want {
					t.Errorf("%s: answered\n%q\nwant\n%q", tc.name, got, tc.want)
				}
			}
			if raw, _ := b.received(); raw != "" {
				t.Errorf("the upstream received %q, want nothing", raw)
			}
			// Well-formed trailers are dropped, the request runs once.
			if got := frExchange(t, p.Addr(), head+"X-T: v\r\nX-U:\tw \r\n\r\n", 1, "POST"); got != smOK {
				t.Errorf("well-formed trailers: answered %q, want %q", got, smOK)
			}
			if raw, _ := b.received(); raw != "POST /x HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi" {
				t.Errorf("the upstream received %q", raw)
			}
		})
	}
}
