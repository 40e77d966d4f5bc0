package proxy

import (
	"bytes"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Request smuggling and malformed request heads, raw bytes on both engines
// (issue 25's hardening pass; what framing_test.go already covers is not
// repeated). Each request is sent alone on a new connection; the test
// checks the answer and the exact bytes the upstream received. Where the
// proxy differs from HAProxy 2.6 and nginx 1.22 on the same bytes (checked
// side by side on loopback), the case says so.
func TestAdvRequestSmuggling(t *testing.T) {
	const hello = "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"
	const head = "POST /a HTTP/1.1\r\nHost: backend\r\n"
	const body5 = "\r\n5\r\nhello\r\n0\r\n\r\n"
	cases := []struct {
		name, req string
		answers   int    // answers to read (0: to the close)
		want      string // "400: reason" (nothing forwarded) or the answer's first line
		fwd       string // what the upstream received, exactly
	}{
		// Transfer-Encoding: only "chunked", alone, counts. HAProxy: 400
		// (422 for "identity, chunked" and "gzip, chunked"); nginx: 501.
		{"TE chunked, identity", head + "Transfer-Encoding: chunked, identity\r\n" + body5, 0, "400: unsupported transfer-encoding", ""},
		{"TE identity, chunked", head + "Transfer-Encoding: identity, chunked\r\n" + body5, 0, "400: unsupported transfer-encoding", ""},
		{"TE gzip, chunked", head + "Transfer-Encoding: gzip, chunked\r\n" + body5, 0, "400: unsupported transfer-encoding", ""},
		{"TE xchunked", head + "Transfer-Encoding: xchunked\r\n" + body5, 0, "400: unsupported transfer-encoding", ""},
		// More than one field: refused before the parse, in one wording
		// (forward.CheckHead; fasthttp's SecureErrorLogMessage said
		// "unsupported transfer-encoding").
		{"two TE fields", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n" + body5, 0, "400: too many transfer-encoding headers", ""},
		{"CL and two TE fields", head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n" + body5, 0, "400: too many transfer-encoding headers", ""},
		// HTTP/1.0 has no chunked coding (RFC 9112 6.1). HAProxy forwards
		// it chunked; nginx 400.
		{"HTTP/1.0 chunked", "POST /a HTTP/1.0\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n" + body5, 0, "400: unsupported transfer-encoding", ""},
		// Case and whitespace around the value are the field's (RFC 9110
		// 5.5); HAProxy and nginx agree (nginx 501s on a tab).
		{"TE tab chunked", head + "Transfer-Encoding:\tchunked\r\n" + body5, 1, "HTTP/1.1 200 OK", hello},
		{"TE Chunked", head + "Transfer-Encoding: Chunked\r\n" + body5, 1, "HTTP/1.1 200 OK", hello},
		{"TE chunked trailing blank", head + "Transfer-Encoding: chunked \r\n" + body5, 1, "HTTP/1.1 200 OK", hello},
		// "identity" is no coding since RFC 7230; with a Content-Length the
		// body is framed by it and the connection closes after the answer
		// (as for CL with TE). HAProxy 400, nginx 501: stricter.
		{"TE identity and CL", head + "Transfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello", 0, "HTTP/1.1 200 OK", hello},
		// Content-Length: one decimal, nothing else. HAProxy merges equal
		// duplicates and "5, 5" (RFC 9110 8.6 allows it); the proxy and
		// nginx refuse them.
		{"two equal CL", head + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 0, "400: duplicate content-length header", ""},
		{"two different CL", head + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 0, "400: duplicate content-length header", ""},
		{"CL 5, 5", head + "Content-Length: 5, 5\r\n\r\nhello", 0, "400: cannot parse content-length", ""},
		{"CL +5", head + "Content-Length: +5\r\n\r\nhello", 0, "400: cannot parse content-length", ""},
		{"CL 0x5", head + "Content-Length: 0x5\r\n\r\nhello", 0, "400: cannot parse content-length", ""},
		{"CL -1", head + "Content-Length: -1\r\n\r\nhello", 0, "400: cannot parse content-length", ""},
		{"CL empty", head + "Content-Length: \r\n\r\nhello", 0, "400: cannot parse content-length", ""},
		{"CL 2^63", head + "Content-Length: 9223372036854775808\r\n\r\nhello", 0, "400: cannot parse content-length", ""},
		{"CL 2^64+5", head + "Content-Length: 18446744073709551621\r\n\r\nhello", 0, "400: cannot parse content-length", ""},
		{"CL with blanks", head + "Content-Length:  5 \r\n\r\nhello", 1, "HTTP/1.1 200 OK", hello},
		{"CL leading zeros", head + "Content-Length: 00000000000000000000000005\r\n\r\nhello", 1, "HTTP/1.1 200 OK", hello},
		// Chunk sizes and lines. HAProxy and nginx agree on every refusal
		// except the bare LFs, which both accept.
		{"chunk size 2^68", head + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff1\r\nhello\r\n0\r\n\r\n", 0, "400: too large hex number", ""},
		{"chunk size 2^64+5", head + "Transfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n", 0, "400: too large hex number", ""},
		{"chunk size -5", head + "Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n", 0, "400: empty hex number", ""},
		{"chunk size 0x5", head + "Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 0, "400: invalid character after chunk size", ""},
		{"chunk size leading blank", head + "Transfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n", 0, "400: empty hex number", ""},
		{"chunk size trailing blank", head + "Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n", 1, "HTTP/1.1 200 OK", hello},
		{"chunk extensions", head + "Transfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0;x\r\n\r\n", 1, "HTTP/1.1 200 OK", hello},
		{"chunk extension quoting a CRLF", head + "Transfer-Encoding: chunked\r\n\r\n5;a=\"b;c\r\n\"\r\nhello\r\n0\r\n\r\n", 0, "400: cannot find crlf at the end of chunk", ""},
		{"chunk line ends in bare LF", head + "Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 0, "400: invalid character after chunk size", ""},
		{"chunk data ends in bare LF", head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n", 0, "400: cannot find crlf at the end of chunk", ""},
		{"chunk data longer than its size", head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", 0, "400: cannot find crlf at the end of chunk", ""},
		{"last chunk in bare LFs", head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\n\n", 0, "400: invalid character after chunk size", ""},
		// Trailers may not carry framing or routing fields (RFC 9110 6.5.1).
		// HAProxy passes them on, nginx drops them: the proxy refuses.
		{"trailer Content-Length and Host", head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nContent-Length: 100\r\nHost: evil\r\n\r\n", 0, "400: forbidden trailer key", ""},
		// Header values and names.
		{"CR in a value", "GET /a HTTP/1.1\r\nHost: backend\r\nX-A: a\rb\r\n\r\n", 0, "400: invalid header value", ""},
		{"NUL in a value", "GET /a HTTP/1.1\r\nHost: backend\r\nX-A: a\x00b\r\n\r\n", 0, "400: invalid header value", ""},
		{"no Host", "GET /a HTTP/1.1\r\n\r\n", 0, "400: missing required host header", ""},
		{"two Hosts", "GET /a HTTP/1.1\r\nHost: backend\r\nHost: other\r\n\r\n", 0, "400: too many host headers", ""},
		{"blank in Host", "GET /a HTTP/1.1\r\nHost: back end\r\n\r\n", 0, "400: invalid character in host name", ""},
		// Request lines: exactly "method SP target SP version". HAProxy and
		// nginx accept two spaces; HAProxy also tabs.
		{"two spaces before the target", "GET  /a HTTP/1.1\r\nHost: backend\r\n\r\n", 0, "400: unsupported http version", ""},
		{"two spaces before the version", "GET /a  HTTP/1.1\r\nHost: backend\r\n\r\n", 0, "400: unsupported http version", ""},
		{"tabs", "GET\t/a\tHTTP/1.1\r\nHost: backend\r\n\r\n", 0, "400: cannot find http request method", ""},
		{"blank in the target", "GET /a b HTTP/1.1\r\nHost: backend\r\n\r\n", 0, "400: unsupported http version", ""},
		{"authority form without CONNECT", "GET backend:80 HTTP/1.1\r\nHost: backend\r\n\r\n", 0, "400: invalid request uri", ""},
		{"HTTP/0.9", "GET /a\r\n\r\n", 0, "400: cannot find whitespace in the first line of request", ""},
		// The absolute form wins over Host (RFC 9112 3.2.2); HAProxy 400s.
		{"absolute form, other Host", "GET http://backend/a HTTP/1.1\r\nHost: other\r\n\r\n", 1, "HTTP/1.1 200 OK", "GET /a HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		// No "Content-Length: 0" the client did not send (Go's Transport
		// adds it to a POST, PUT or PATCH only; RFC 9110 8.6).
		{"asterisk form", "OPTIONS * HTTP/1.1\r\nHost: backend\r\n\r\n", 1, "HTTP/1.1 200 OK", "OPTIONS * HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		// Pipelines after a body of the "wrong" length: the length rules;
		// what follows it is the next request, forwarded as its own.
		{"body shorter than CL swallows the next request's start", head + "Content-Length: 10\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: backend\r\n\r\n", 0, "HTTP/1.1 200 OK",
			"POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 10\r\nRetrycap-Budget: 4\r\n\r\nhelloGET /"},
		{"body longer than CL starts the next request", head + "Content-Length: 2\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: backend\r\n\r\n", 2, "HTTP/1.1 200 OK",
			"POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\nRetrycap-Budget: 4\r\n\r\nhe" + "lloGET /b HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 4\r\n\r\n"}, // an unknown method: no Content-Length added, as Go's Transport
		{"GET with a body, then a GET", "GET /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: backend\r\n\r\n", 2, "HTTP/1.1 200 OK",
			"GET /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 2\r\n\r\nhello" + "GET /b HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
		// Expect: the proxy answers 100 itself (as nginx; HAProxy leaves it
		// to the server) and reads the body, chunked or not.
		{"Expect 100-continue, chunked", head + "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n" + body5, 2, "HTTP/1.1 100 Continue",
			"POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nExpect: 100-continue\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				method, _, _ := strings.Cut(tc.req, " ")
				ans := frExchange(t, p.Addr(), tc.req, tc.answers, method)
				raw1, _ := b.received()
				fwd := strings.TrimPrefix(raw1, raw0)
				if reason, ok := strings.CutPrefix(tc.want, "400: "); ok {
					// The proxy's words, exactly: fasthttp's message quoted
					// the refused bytes (and up to 400 bytes of the head).
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

// lockedLog is the proxy's log in a test: written by the proxy's
// goroutines, read by the test.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAdvMalformedRequestInOwnWords: the 400 to a head fasthttp's parser
// refuses names the rule in the proxy's own words, byte for byte the same
// on both engines, and never repeats the client's bytes. Before, the answer
// was fasthttp's message, which quotes the refused value and up to 400
// bytes of the head ("contents: ..."): markup, control bytes and the
// request's own cookies were reflected into the answer, and written to the
// proxy's log unescaped of nothing but fasthttp's quoting. The log keeps a
// bounded, escaped excerpt, one line per refusal.
func TestAdvMalformedRequestInOwnWords(t *testing.T) {
	const markup = "<script>alert(1)</script>"
	cases := []struct{ name, req, reason string }{
		{"markup and a control byte in a header value", "GET /a HTTP/1.1\r\nHost: backend\r\nCookie: s=secret\r\nX-A: " + markup + "\x01\r\n\r\n", "invalid header value"},
		{"a CR and markup in a header value", "GET /a HTTP/1.1\r\nHost: backend\r\nCookie: s=secret\r\nX-A: a\r" + markup + "\r\n\r\n", "invalid header value"},
		{"markup in the version", "GET /a HTTP/" + markup + "\r\nHost: backend\r\nCookie: s=secret\r\n\r\n", "unsupported http version"},
		{"markup in the Host", "GET /a HTTP/1.1\r\nHost: " + markup + "\r\nCookie: s=secret\r\n\r\n", "invalid character in host name"},
		{"markup and control bytes in the method", "G\x01" + markup + " /a HTTP/1.1\r\nHost: backend\r\nCookie: s=secret\r\n\r\n", "unsupported http request method"},
		{"markup in a chunk size", "POST /a HTTP/1.1\r\nHost: backend\r\nCookie: s=secret\r\nTransfer-Encoding: chunked\r\n\r\n5" + markup + "\r\nhello\r\n0\r\n\r\n", "invalid character after chunk size"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		args := []string{"--engine", engine, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstreams", "backend=3", "--resolve", "backend=" + b.addr()}
		cfg, err := ParseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var logged lockedLog
		p, err := New(cfg, log.New(&logged, "proxy: ", 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(t.Context()) })
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				before := strings.Count(logged.String(), "\n")
				ans := advToClose(t, p.Addr(), tc.req)
				msg := "retrycap-proxy: malformed request: " + tc.reason + "\n"
				want := "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + itoa(len(msg)) + "\r\nConnection: close\r\n\r\n" + msg
				if ans != want {
					t.Errorf("answer\n%q\nwant\n%q", ans, want)
				}
				// One log line for the refusal, naming the rule, with the
				// refused bytes escaped and the rest of the head left out.
				proxytest.Eventually(t, "the refusal's log line", func() bool { return strings.Count(logged.String(), "\n") > before })
				line := strings.Split(logged.String(), "\n")[before]
				if !strings.HasPrefix(line, "proxy: ") || !strings.Contains(line, tc.reason+" (") ||
					strings.Contains(line, "secret") || strings.ContainsAny(line, "\x01\r") || len(line) > 400 {
					t.Errorf("log line %q: want the reason %q, a bounded escaped excerpt, no cookie", line, tc.reason)
				}
				if os.Getenv("ADV_SHOWLOG") != "" {
					t.Logf("%s", line)
				}
			})
		}
		if raw, _ := b.received(); raw != "" {
			t.Errorf("%s: the upstream received %q, want nothing", engine, raw)
		}
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
