package proxy

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// TestAdvTransferEncodingTwice: a head with more than one Transfer-Encoding
// field, from an upstream (502) or from a client (400), is refused in one
// wording on both engines, whatever the fields' values (forward's
// ReasonTooManyTE). Before, the same answer read "too many
// transfer-encoding headers" on the loop and "unsupported
// transfer-encoding" on the goroutine engine (fasthttp's parser words it
// by the first field's value and by SecureErrorLogMessage), and a client's
// two "chunked" fields "unsupported transfer-encoding" on both.
func TestAdvTransferEncodingTwice(t *testing.T) {
	const body = "\r\n2\r\nok\r\n0\r\n\r\n"
	fields := []struct{ name, fields string }{
		{"chunked twice", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"},
		{"chunked, then identity", "Transfer-Encoding: chunked\r\ntransfer-encoding: identity\r\n"},
		{"gzip, then chunked", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"},
		{"with a Content-Length", "Content-Length: 7\r\nTRANSFER-ENCODING: chunked\r\nTransfer-Encoding: chunked\r\n"},
	}
	const answerBody = "retrycap-proxy: upstream backend (ADDR): 1 attempt(s), last failed with bad-answer (the upstream's answer is malformed: too many transfer-encoding headers); not retried: not-retryable\n"
	for _, engine := range []string{"loop", "goroutine"} {
		for _, f := range fields {
			t.Run(engine+"/answer/"+f.name, func(t *testing.T) {
				up := newAdvUpstream(t, func(n int) advAnswer {
					if n == 1 {
						return advAnswer{raw: "HTTP/1.1 200 OK\r\n" + f.fields + body}
					}
					return advAnswer{raw: advOK2}
				})
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String(),
					"--retry-on", "reset,timeout,503")
				c := proxytest.Dial(t, p.Addr())
				var raw bytes.Buffer
				br := bufio.NewReader(io.TeeReader(c.C, &raw))
				c.Send("POST http://backend/1 HTTP/1.1\r\nHost: backend\r\nContent-Length: 4\r\n\r\nbody")
				got := advRead(t, br, &raw, "POST")
				_, gotBody, _ := strings.Cut(got, "\r\n\r\n")
				if want := strings.Replace(answerBody, "ADDR", up.ln.Addr().String(), 1); !strings.HasPrefix(got, "HTTP/1.1 502 Bad Gateway\r\n") || gotBody != want {
					t.Errorf("answer %q, want a 502 with the body %q", got, want)
				}
				// The proxy serves the client's next request on the same connection.
				c.Send("GET http://backend/2 HTTP/1.1\r\nHost: backend\r\n\r\n")
				if got := advRead(t, br, &raw, "GET"); got != advOK2 {
					t.Errorf("second answer %q, want %q", got, advOK2)
				}
			})
			t.Run(engine+"/request/"+f.name, func(t *testing.T) {
				b := newFrBackend(t, nil)
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr())
				got := advToClose(t, p.Addr(), "POST /a HTTP/1.1\r\nHost: backend\r\n"+f.fields+body)
				if want := string(forward.MalformedAnswer("too many transfer-encoding headers")); got != want {
					t.Errorf("answer %q, want %q, then the close", got, want)
				}
				if raw, _ := b.received(); raw != "" {
					t.Errorf("the upstream received %q, want nothing", raw)
				}
			})
		}
		// An HTTP/1.0 answer's Transfer-Encoding fields are faulty framing
		// (RFC 9112 6.1), a bad answer whatever their number (session 19,
		// TestH1Red19OldAnswerTransferEncoding): before, fasthttp's parser
		// dropped them and the body ran to the close, passed on.
		t.Run(engine+"/answer/HTTP 1.0", func(t *testing.T) {
			up := newAdvUpstream(t, func(int) advAnswer {
				return advAnswer{raw: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\nhello", close: true}
			})
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String())
			got := advToClose(t, p.Addr(), "GET http://backend/1 HTTP/1.1\r\nHost: backend\r\nConnection: close\r\n\r\n")
			want := "retrycap-proxy: upstream backend (" + up.ln.Addr().String() + "): 3 attempt(s), last failed with bad-answer " +
				"(the upstream's answer is malformed: " + forward.ReasonOldAnswerTE + "); not retried: attempts\n"
			if _, body, _ := strings.Cut(got, "\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 503 Service Unavailable\r\n") || body != want {
				t.Errorf("answer %q, want a 503 with the body %q", got, want)
			}
		})
	}
}
