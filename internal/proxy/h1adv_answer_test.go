package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The fourth adversarial round on the HTTP/1.1 engines (branch h1adv),
// upstream side: answer heads fasthttp's parser accepted and the proxy
// wrote to the client as they came. Covered before (upstream_adv_test.go,
// hostile3_adv_test.go): framing, 1xx, bare LF, NUL/CR, obs-fold, lines
// without a colon, statuses of other lengths. Tried here and found right
// already (no test added): "Connection: close" on an answer the upstream
// keeps open (the next request goes on a new connection), hop-by-hop
// fields of an answer (dropped), forbidden trailers (dropped),
// "Transfer-Encoding: gzip" alone (502, as Go's transport), a 204 with
// "Transfer-Encoding: chunked" (passed without it), a 600 status (passed,
// as Go's transport does).

// TestH1AdvAnswerHeadNames: an answer head with a field name that is no
// token, or a control byte in its status line, is a bad answer: a keyless
// POST gets the proxy's 502 and is never re-sent, a GET is retried; the
// next request on the client's connection gets its own answer. Before,
// both engines wrote "X A: b", "O\x00K" and "HTTP/2.0 200 OK" to the
// client verbatim. Checked against HAProxy 2.6.12 on loopback: it answers
// the names 502, passes the control bytes, writes HTTP/1.1 for HTTP/2.0.
func TestH1AdvAnswerHeadNames(t *testing.T) {
	const bad = `"error":"bad-answer"`
	cases := []struct{ name, method, raw, want, wantLog, reqs string }{
		{"a blank inside a name", "POST", "HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok",
			"502: the upstream's answer is malformed: a header name with a byte that is not a token character", bad, "POST /1,GET /2"},
		{"a blank inside a name, GET retried", "GET", "HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok",
			advOK2, bad, "GET /1,GET /1,GET /2"},
		// fasthttp read this as the answer's Content-Length; Go's
		// transport as a field named "Content-Length " (not the length).
		{"a blank before the colon of Content-Length", "POST", "HTTP/1.1 200 OK\r\nContent-Length : 4\r\n\r\nokev",
			"502: the upstream's answer is malformed: a header name with a byte that is not a token character", bad, "POST /1,GET /2"},
		{"a parenthesis in a name", "POST", "HTTP/1.1 200 OK\r\nX(A): b\r\nContent-Length: 2\r\n\r\nok",
			"502: the upstream's answer is malformed: a header name with a byte that is not a token character", bad, "POST /1,GET /2"},
		{"a byte over 0x7f in a name", "POST", "HTTP/1.1 200 OK\r\nX\xc3\xa9: b\r\nContent-Length: 2\r\n\r\nok",
			"502: the upstream's answer is malformed: a header name with a byte that is not a token character", bad, "POST /1,GET /2"},
		{"a bad name in a 103", "POST", "HTTP/1.1 103 Early Hints\r\nLink </a>: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			"502: the upstream's answer is malformed: a header name with a byte that is not a token character", bad, "POST /1,GET /2"},
		// Another version's status line goes out under the proxy's own
		// (as HAProxy 2.6 and Go's ReverseProxy pass it); before, verbatim.
		{"HTTP/2.0 status line", "POST", "HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", `"status":200`, "POST /1,GET /2"},
		// The reason phrase: HTAB, SP, VCHAR, obs-text (RFC 9112 4). Before,
		// a NUL or a control byte went to the client as it came, a bare CR
		// as a blank (its "Set-Cookie" then part of the reason).
		{"a NUL in the reason", "POST", "HTTP/1.1 200 O\x00K\r\nContent-Length: 2\r\n\r\nok",
			"502: the upstream's answer is malformed: a control byte in the status line", bad, "POST /1,GET /2"},
		{"a control byte in the reason, GET retried", "GET", "HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nok",
			advOK2, bad, "GET /1,GET /1,GET /2"},
		{"a bare CR in the reason", "POST", "HTTP/1.1 200 OK\rSet-Cookie: a=b\r\nContent-Length: 2\r\n\r\nok",
			"502: the upstream's answer is malformed: a control byte in the status line", bad, "POST /1,GET /2"},
		{"a tab and obs-text in the reason", "POST", "HTTP/1.1 200 O\tK \xe9\r\nContent-Length: 2\r\n\r\nok",
			"HTTP/1.1 200 O\tK \xe9\r\nContent-Length: 2\r\n\r\nok", `"status":200`, "POST /1,GET /2"},
		// What stays: token names of every kind, a folded value (unfolded,
		// RFC 9112 5.2), a colon in a value.
		{"token names", "POST", "HTTP/1.1 200 OK\r\nX-!#$%&'*+.^_`|~09: v:w\r\nX-F: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-!#$%&'*+.^_`|~09: v:w\r\nX-F: a b\r\n\r\nok", `"status":200`, "POST /1,GET /2"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				up := newAdvUpstream(t, func(n int) advAnswer {
					if n == 1 {
						return advAnswer{raw: tc.raw}
					}
					return advAnswer{raw: advOK2}
				})
				logPath := filepath.Join(t.TempDir(), "access.log")
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String(),
					"--retry-on", "reset,timeout,503", "--access-log", logPath)
				c := proxytest.Dial(t, p.Addr())
				var raw bytes.Buffer
				br := bufio.NewReader(io.TeeReader(c.C, &raw))
				body := ""
				if tc.method == "POST" {
					body = "Content-Length: 4\r\n\r\nbody"
				}
				c.Send(tc.method + " http://backend/1 HTTP/1.1\r\nHost: backend\r\n" + body + "\r\n")
				got := advRead(t, br, &raw, tc.method)
				if reason, ok := strings.CutPrefix(tc.want, "502: "); ok {
					if !strings.HasPrefix(got, "HTTP/1.1 502 Bad Gateway\r\n") || !strings.Contains(got, reason) {
						t.Errorf("first answer %q, want a 502 naming %q", got, reason)
					}
					for _, echo := range []string{"X A", "X(A)", "Link", "HTTP/2", "HTTP/3", "okev", "O\x00K", "O\x01K", "Set-Cookie"} {
						if strings.Contains(got, echo) {
							t.Errorf("first answer %q echoes the upstream's bytes (%q)", got, echo)
						}
					}
				} else if got != tc.want {
					t.Errorf("first answer\n%q\nwant\n%q", got, tc.want)
				}
				advSecondAndLog(t, c, br, &raw, up, p, logPath, tc.reqs, tc.wantLog)
			})
		}
	}
}

// TestH1AdvHTTP10AnswerOwnVersion: an upstream's HTTP/1.0 answer reaches
// an HTTP/1.1 client with the proxy's own version (RFC 9110 2.5:
// an intermediary sends its own HTTP-version in forwarded messages; Go's
// server and nginx write HTTP/1.1 to an HTTP/1.1 client whatever the
// upstream spoke). Before, both engines wrote the upstream's "HTTP/1.0"
// status line verbatim, over framing of their own: a body delimited by the
// upstream's close went chunked under "HTTP/1.0", which RFC 9112 6.1 has a
// recipient treat as faulty framing and Go's client reads as a body up to
// the close (chunk sizes included), which the proxy, keeping the
// connection, never sent: the client hung. An answer with a length went
// as "HTTP/1.0" without keep-alive, so every client closed its connection
// after it (RFC 9112 9.3). An HTTP/1.0 client's answers were and stay
// "HTTP/1.1" with keep-alive or the close, never chunked.
func TestH1AdvHTTP10AnswerOwnVersion(t *testing.T) {
	cases := []struct {
		name, raw string
		close     bool
		want      string
		body      string
	}{
		{"a body to the close", "HTTP/1.0 200 OK\r\n\r\nto-close", true,
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nto-close\r\n0\r\n\r\n", "to-close"},
		{"a Content-Length", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false,
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok"},
		{"keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", false,
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok"},
		{"HTTP/1.2", "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok", false,
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			script := func(n int) advAnswer {
				if n%2 == 1 {
					return advAnswer{raw: tc.raw, close: tc.close}
				}
				return advAnswer{raw: advOK2}
			}
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				up := newAdvUpstream(t, script)
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String())
				c := proxytest.Dial(t, p.Addr())
				var raw bytes.Buffer
				br := bufio.NewReader(io.TeeReader(c.C, &raw))
				c.Send("GET http://backend/1 HTTP/1.1\r\nHost: backend\r\n\r\n")
				if got := advRead(t, br, &raw, "GET"); got != tc.want {
					t.Errorf("first answer\n%q\nwant\n%q", got, tc.want)
				}
				c.Send("GET http://backend/2 HTTP/1.1\r\nHost: backend\r\n\r\n")
				if got := advRead(t, br, &raw, "GET"); got != advOK2 {
					t.Errorf("second answer %q, want %q", got, advOK2)
				}
			})
			// Go's client, through the proxy: the body whole, and the
			// connection to the proxy reused for the next request.
			t.Run(engine+"/"+tc.name+"/net-http client", func(t *testing.T) {
				up := newAdvUpstream(t, script)
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String())
				proxyURL, err := url.Parse("http://" + p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
				defer tr.CloseIdleConnections()
				cl := &http.Client{Transport: tr, Timeout: 3 * time.Second}
				var reused []bool
				for i, want := range []string{tc.body, "two"} {
					ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
						GotConn: func(ci httptrace.GotConnInfo) { reused = append(reused, ci.Reused) },
					})
					req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://backend/%d", i+1), nil)
					resp, err := cl.Do(req)
					if err != nil {
						t.Fatalf("request %d: %v", i+1, err)
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || string(b) != want || resp.Proto != "HTTP/1.1" {
						t.Errorf("request %d: %s body %q (%v), want HTTP/1.1 and %q", i+1, resp.Proto, b, err, want)
					}
				}
				if len(reused) != 2 || !reused[1] {
					t.Errorf("the client's connections reused: %v, want the second request on the first's", reused)
				}
			})
		}
	}
}

// TestH1AdvRefusedUpgradeOwnVersion: the answer to an upgrade the
// upstream refused with an HTTP/1.0 answer goes out under HTTP/1.1 too
// (forward.StripResponse, the path outside the exchange).
func TestH1AdvRefusedUpgradeOwnVersion(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			up := newAdvUpstream(t, func(n int) advAnswer {
				if n == 1 {
					return advAnswer{raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"}
				}
				return advAnswer{raw: advOK2}
			})
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String())
			c := proxytest.Dial(t, p.Addr())
			var raw bytes.Buffer
			br := bufio.NewReader(io.TeeReader(c.C, &raw))
			c.Send("GET http://backend/1 HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			if got, want := advRead(t, br, &raw, "GET"), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"; got != want {
				t.Errorf("the refused upgrade's answer %q, want %q", got, want)
			}
			c.Send("GET http://backend/2 HTTP/1.1\r\nHost: backend\r\n\r\n")
			if got := advRead(t, br, &raw, "GET"); got != advOK2 {
				t.Errorf("second answer %q, want %q", got, advOK2)
			}
		})
	}
}
