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
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
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
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
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
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
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

// TestH1SmuggleAudit: the request-smuggling audit's cases that the other
// tables (smuggle_adv_test.go, te_twice_adv_test.go, barelf_test.go,
// h1adv_request_test.go) did not have, on both engines: the exact answer
// (a refusal is forward.MalformedAnswer's bytes; neither engine writes a
// Date on its refusals) and exactly what the upstream received.
func TestH1SmuggleAudit(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		b := newFrBackend(t, nil)
		p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4")
		for _, tc := range smAuditCases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				raw0, _ := b.received()
				var ans string
				if tc.answers == 0 {
					ans = smSend(t, p.Addr(), tc.req)
				} else {
					method, _, _ := strings.Cut(tc.req, " ")
					ans = frExchange(t, p.Addr(), tc.req, tc.answers, method)
				}
				raw1, _ := b.received()
				want := tc.want
				if reason, ok := strings.CutPrefix(want, "400: "); ok {
					want = string(forward.MalformedAnswer(reason))
				}
				if got := ans; got != want {
					t.Errorf("answer\n%q\nwant\n%q", got, want)
				}
				if fwd := strings.TrimPrefix(raw1, raw0); fwd != tc.fwd {
					t.Errorf("the upstream received\n%q\nwant\n%q", fwd, tc.fwd)
				}
			})
		}
	}
}

// smAuditCase is one case of TestH1SmuggleAudit.
type smAuditCase struct {
	name, req string
	answers   int    // answers to read (0: to the proxy's close)
	want      string // "400: reason" (forward.MalformedAnswer), else the answers exactly
	fwd       string // what the upstream received, exactly
}

const (
	smHead = "POST /a HTTP/1.1\r\nHost: backend\r\n"
	smTE   = smHead + "Transfer-Encoding: chunked\r\n\r\n"
)

// smAuditCases: one request (or a pipeline) per connection. Behind each
// refusal, what an upstream could read otherwise: a Transfer-Encoding or
// Content-Length the proxy did not frame by. Every accepted case is framed
// once, by the proxy, with a Content-Length; a message with both framings
// is read by its Transfer-Encoding and the connection closes after it
// (RFC 9112 6.3), so that nothing after it is read as a request.
var smAuditCases = []smAuditCase{
	// CL.TE and TE.CL: the chunked framing wins, the Content-Length goes.
	{"CL.TE, a G after the last chunk", smHead + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", 0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\nRetrycap-Budget: 4\r\n\r\n"},
	{"CL.TE, a request in the chunked body", smHead + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2d\r\nGET /s HTTP/1.1\r\nHost: backend\r\nX: GET /x\r\n\r\n\r\n0\r\n\r\n", 0,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 45\r\nRetrycap-Budget: 4\r\n\r\nGET /s HTTP/1.1\r\nHost: backend\r\nX: GET /x\r\n\r\n"},
	{"CL.TE, a chunk whose data runs into its CRLF", smHead + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2c\r\nGET /s HTTP/1.1\r\nHost: backend\r\nX: GET /x\r\n\r\n0\r\n\r\n", 0, "400: cannot find crlf at the end of chunk", ""},
	{"TE.CL, a request after the length", smHead + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n", 0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 8\r\nRetrycap-Budget: 4\r\n\r\nSMUGGLED"},
	// Transfer-Encoding obfuscated: a blank before the colon is no field
	// name (RFC 9112 5.1; Go's server and HAProxy 2.6 400 too), a fold is
	// refused (forward.BadHeaderLines), a control byte in the value too.
	{"TE space before the colon", smHead + "Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, "400: invalid header name", ""},
	{"TE tab before the colon", smHead + "Transfer-Encoding\t: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, "400: malformed header line", ""},
	{"TE value folded", smHead + "Transfer-Encoding:\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, "400: a folded header line (obs-fold)", ""},
	{"TE folded into another field", smHead + "X-A: 1\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", 0, "400: a header name with a byte that is not a token character", ""},
	{"TE blank and tab before chunked", smHead + "Transfer-Encoding: \tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	{"TE vertical tab after chunked", smHead + "Transfer-Encoding: chunked\x0b\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, "400: invalid header value", ""},
	{"TE chunked twice in one field", smHead + "Transfer-Encoding: chunked, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, "400: unsupported transfer-encoding", ""},
	{"TE and CL in HTTP/1.0", "POST /a HTTP/1.0\r\nHost: backend\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", 0, "400: unsupported transfer-encoding", ""},
	// '_' for '-' in a framing field's name: another field to the proxy,
	// the same one to a server that maps names to CGI-style variables.
	// Before: forwarded as "Transfer_encoding: chunked" beside the
	// proxy's Content-Length 5, or "Content_length: 5" beside its
	// Content-Length 0 (forward.ReasonUnderscoreFraming).
	{"Transfer_Encoding beside a Content-Length", smHead + "Transfer_Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", 0, "400: an underscore in a Transfer-Encoding or Content-Length field name", ""},
	{"Content_Length on a chunked body", smHead + "Content_Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, "400: an underscore in a Transfer-Encoding or Content-Length field name", ""},
	{"Content_Length alone", smHead + "Content_Length: 5\r\n\r\nhello", 0, "400: an underscore in a Transfer-Encoding or Content-Length field name", ""},
	// Content-Length: one decimal number, blanks around it allowed.
	{"CL 5,5", smHead + "Content-Length: 5,5\r\n\r\nhello", 0, "400: cannot parse content-length", ""},
	{"CL one trailing blank", smHead + "Content-Length: 5 \r\n\r\nhello", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	{"CL trailing tab", smHead + "Content-Length: 5\t\r\n\r\nhello", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	{"CL no blank", smHead + "Content-Length:5\r\n\r\nhello", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	{"CL 2^63-1", smHead + "Content-Length: 9223372036854775807\r\n\r\nhello", 0, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 56\r\nConnection: close\r\n\r\nretrycap-proxy: request body larger than 16777216 bytes\n", ""},
	{"CL folded", smHead + "Content-Length:\r\n 5\r\n\r\nhello", 0, "400: a folded header line (obs-fold)", ""},
	// Bytes a field may not hold: refused. obs-text (0x80-0xff) in a value
	// is allowed (RFC 9110 5.5), as by Go's server, and passed on as is.
	{"DEL in a field name", "GET /a HTTP/1.1\r\nHost: backend\r\nX\x7fA: 1\r\n\r\n", 0, "400: malformed header line", ""},
	{"high byte in a field name", "GET /a HTTP/1.1\r\nHost: backend\r\nX\xffA: 1\r\n\r\n", 0, "400: malformed header line", ""},
	{"DEL in a value", "GET /a HTTP/1.1\r\nHost: backend\r\nX-A: a\x7fb\r\n\r\n", 0, "400: invalid header value", ""},
	{"high byte in a value", "GET /a HTTP/1.1\r\nHost: backend\r\nX-A: caf\xe9\r\n\r\n", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET /a HTTP/1.1\r\nHost: backend\r\nX-A: caf\xe9\r\nRetrycap-Budget: 2\r\n\r\n"},
	{"NUL in a field name", "GET /a HTTP/1.1\r\nHost: backend\r\nX\x00A: 1\r\n\r\n", 0, "400: malformed header line", ""},
	{"bare CR ends the request line", "GET /a HTTP/1.1\rHost: backend\r\n\r\n", 0, "400: unsupported http version", ""},
	{"bare CR ends a field line", "GET /a HTTP/1.1\r\nHost: backend\rX-A: 1\r\n\r\n", 0, "400: invalid header value", ""},
	{"bare CR in the target", "GET /a\rb HTTP/1.1\r\nHost: backend\r\n\r\n", 0, "400: invalid request uri", ""},
	// Host: the proxy routes by it.
	{"empty Host", "GET /a HTTP/1.1\r\nHost:\r\n\r\n", 0, "400: missing required host header", ""},
	{"HTTP/1.0 without Host", "GET /a HTTP/1.0\r\n\r\n", 0, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 36\r\nConnection: close\r\n\r\nretrycap-proxy: request has no host\n", ""},
	{"absolute form without Host", "GET http://backend/a HTTP/1.1\r\n\r\n", 0, "400: missing required host header", ""},
	// Chunk lines, as Go's chunked reader reads them: leading zeros and
	// trailing blanks allowed, at most 16 hex digits, nothing else.
	{"chunk size 0005", smTE + "0005\r\nhello\r\n0\r\n\r\n", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	{"chunk size trailing tab", smTE + "5\t\r\nhello\r\n0\r\n\r\n", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	{"chunk size blank before an extension", smTE + "5 ;a=b\r\nhello\r\n0\r\n\r\n", 0, "400: invalid character after chunk size", ""},
	{"chunk size 16 hex digits", smTE + "0000000000000005\r\nhello\r\n0\r\n\r\n", 0, "400: too large hex number", ""},
	{"chunk size +5", smTE + "+5\r\nhello\r\n0\r\n\r\n", 0, "400: empty hex number", ""},
	{"chunk size 5 then a bare CR", smTE + "5\r\rhello\r\n0\r\n\r\n", 0, "400: invalid character at the end of chunk size", ""},
	// Trailers may not carry framing (RFC 9110 6.5.1); others are dropped.
	{"trailer Transfer-Encoding", smTE + "5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n", 0, "400: forbidden trailer key", ""},
	{"trailer content-length", smTE + "5\r\nhello\r\n0\r\ncontent-length: 100\r\n\r\n", 0, "400: forbidden trailer key", ""},
	{"trailer field", smTE + "5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhello"},
	// After a chunked body, the next bytes are a request; bytes inside
	// its chunks are data, whatever they look like.
	{"pipelined GET after a chunked body", smTE + "5\r\nhello\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: backend\r\n\r\n", 2, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 2\r\n\r\n"},
	{"a request in a chunked body's data", smTE + "22\r\nGET /s HTTP/1.1\r\nHost: backend\r\n\r\n\r\n0\r\n\r\n", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 34\r\nRetrycap-Budget: 4\r\n\r\nGET /s HTTP/1.1\r\nHost: backend\r\n\r\n"},
	{"a last chunk in a chunked body's data", smTE + "5\r\n0\r\n\r\n\r\n0\r\n\r\n", 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\n0\r\n\r\n"},
	{"pipelined POST after a chunked body", smTE + "5\r\nhello\r\n0\r\n\r\n" + smHead + "Content-Length: 2\r\n\r\nhi", 2, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\nRetrycap-Budget: 4\r\n\r\nhelloPOST /a HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\nRetrycap-Budget: 4\r\n\r\nhi"},
}
