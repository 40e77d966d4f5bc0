package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The third adversarial round (branch hostile3): a broken or hostile
// upstream, and the parser corners the first two rounds
// (upstream_adv_test.go, smuggle_adv_test.go, headers_adv_test.go,
// limits_adv_test.go) did not try. Covered before: bytes beyond an
// answer, CL with chunked, 204/304/HEAD with bodies, 1xx floods and
// statuses below 100, two different Content-Lengths, a Content-Length
// past 2^64 or with a sign, "gzip, chunked", NUL and control bytes in a
// value, bare LF heads, a body shorter than its (small) Content-Length,
// heads over 64 KiB, an unsolicited 101, early answers to uploads.
// Tried here: header lines without a colon, obs-fold, a bare CR, the same
// Content-Length twice, "chunked, gzip", a negative Content-Length,
// a 1xx whose head is over 64 KiB, an answer with no status line
// (HTTP/0.9); and in a streamed body (a chunked one, or a length over
// 64 KiB): an invalid or overflowing chunk size, a chunk without its
// CRLF, chunk extensions of unbounded length, trailers over a bound or
// with a bare LF, the upstream's close (FIN or reset) mid-body. The
// reference where RFC 9112 leaves room is Go's transport (net/http), said
// per case.

// TestAdv3HostileHeads: answer heads the parser must judge before any
// byte reaches the client. A keyless POST is sent once and answered 502
// in the proxy's words; a GET is retried (--retry-on reset); the next
// request on the client's connection gets its own answer.
func TestAdv3HostileHeads(t *testing.T) {
	big1xx := "HTTP/1.1 103 Early Hints\r\n" + strings.Repeat("Link: <"+strings.Repeat("l", 90)+">\r\n", 700) + "\r\n" // 68,600 bytes
	cases := []struct {
		name, method, raw string
		close             bool
		want              string // the first answer exactly, or "502: reason"
		wantLog           string
		reqs              string
	}{
		// RFC 9112 5: a field line is name ":" value. Go's transport:
		// "malformed MIME header line"; HAProxy 2.6: 502.
		{"a header line without a colon", "POST", "HTTP/1.1 200 OK\r\nX-No-Colon\r\nContent-Length: 2\r\n\r\nok", false,
			"502: the upstream's answer is malformed: a header line without a colon", `"error":"bad-answer"`, "POST /1,GET /2"},
		{"a header line without a colon, GET retried", "GET", "HTTP/1.1 200 OK\r\nX-No-Colon\r\nContent-Length: 2\r\n\r\nok", false,
			advOK2, `"error":"bad-answer"`, "GET /1,GET /1,GET /2"},
		// RFC 9112 5.2: a proxy that gets obs-fold in a response either
		// discards it with a 502 or replaces each fold by SP; never
		// passes the continuation line on as a line of its own. The
		// proxy (fasthttp's parser) unfolds, as Go's transport
		// (textproto) and HAProxy 2.6 do.
		{"obs-fold", "POST", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok", false,
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: a b\r\n\r\nok", `"status":200`, "POST /1,GET /2"},
		// A bare CR inside a line (RFC 9112 2.2: a recipient of a bare CR
		// outside content considers the message invalid or replaces it).
		{"a bare CR in a header line", "POST", "HTTP/1.1 200 OK\r\nX-A: a\rX-B: b\r\nContent-Length: 2\r\n\r\nok", false,
			"502: invalid header value", `"error":"bad-answer"`, "POST /1,GET /2"},
		// RFC 9110 8.6: the same value repeated may be taken as one
		// (Go's transport and HAProxy do; nginx refuses).
		{"the same Content-Length twice", "POST", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false,
			"502: duplicate content-length header", `"error":"bad-answer"`, "POST /1,GET /2"},
		{"Content-Length -1", "POST", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n2\r\nok\r\n0\r\n\r\n", false,
			"502: cannot parse content-length", `"error":"bad-answer"`, "POST /1,GET /2"},
		{"Content-Length -2", "POST", "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok", true,
			"502: cannot parse content-length", `"error":"bad-answer"`, "POST /1,GET /2"},
		// RFC 9112 6.3: chunked not last in a response: read to the close.
		// Go's transport refuses any coding but chunked; so does the proxy.
		{"chunked, gzip", "POST", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n2\r\nok\r\n0\r\n\r\n", false,
			"502: unsupported transfer-encoding", `"error":"bad-answer"`, "POST /1,GET /2"},
		{"chunked, chunked", "POST", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false,
			"502: unsupported transfer-encoding", `"error":"bad-answer"`, "POST /1,GET /2"},
		// One wording on both engines (fasthttp's parser words it two
		// ways: TestAdvTransferEncodingTwice).
		{"Transfer-Encoding twice", "POST", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false,
			"502: the upstream's answer is malformed: too many transfer-encoding headers", `"error":"bad-answer"`, "POST /1,GET /2"},
		// A 1xx is a head like any other: over 64 KiB it is a bad answer
		// (Go's transport counts 1xx heads against its header limit).
		{"a 1xx head over 64 KiB", "POST", big1xx + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false,
			"502: the upstream's answer head is larger than 64 KiB", `"error":"bad-answer"`, "POST /1,GET /2"},
		// HTTP/0.9: no status line, the body to the close. Go's transport:
		// "malformed HTTP response"; never a 200 made up by the proxy.
		{"an answer without a status line (HTTP 0.9)", "POST", "<html>hello</html>\r\n\r\n", true,
			"502: the upstream's answer is malformed: cannot find whitespace in the status line", `"error":"bad-answer"`, "POST /1,GET /2"},
		{"HTTP 0.9 without a blank line", "POST", "<html>hello</html>", true,
			"502: last failed with reset (the upstream closed the connection before the whole response: unexpected EOF)", `"error":"reset"`, "POST /1,GET /2"},
		{"HTTP 0.9, GET retried", "GET", "<html>hello</html>\r\n\r\n", true,
			advOK2, `"error":"bad-answer"`, "GET /1,GET /1,GET /2"},
		// Status lines: RFC 9112 4, a three-digit code; the reason may be
		// empty, its blank too (Go's transport accepts both).
		{"a four-digit status", "POST", "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok", false,
			"502: the upstream's answer is malformed: invalid response status code", `"error":"bad-answer"`, "POST /1,GET /2"},
		{"a status line without a reason", "POST", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", false,
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", `"status":200`, "POST /1,GET /2"},
		{"another protocol's status line", "POST", "ICY 200 OK\r\nContent-Length: 2\r\n\r\nok", false,
			"502: the upstream's answer is malformed: unsupported http version", `"error":"bad-answer"`, "POST /1,GET /2"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				up := newAdvUpstream(t, func(n int) advAnswer {
					if n == 1 {
						return advAnswer{raw: tc.raw, close: tc.close}
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
				if reasons, ok := strings.CutPrefix(tc.want, "502: "); ok {
					named := false
					for _, r := range strings.Split(reasons, "|") {
						named = named || strings.Contains(got, r)
					}
					if !strings.HasPrefix(got, "HTTP/1.1 502 Bad Gateway\r\n") || !named {
						t.Errorf("first answer %q, want a 502 naming %q", got, reasons)
					}
					for _, echo := range []string{"No-Colon", "hello", "X-B", " b\r\n", "evil"} {
						if strings.Contains(got, echo) {
							t.Errorf("first answer %q echoes the upstream's bytes (%q)", got, echo)
						}
					}
				} else if got != tc.want {
					t.Errorf("first answer\n%q\nwant\n%q", got, tc.want)
				}
				line := advSecondAndLog(t, c, br, &raw, up, p, logPath, tc.reqs, tc.wantLog)
				if os.Getenv("ADV_SHOWLOG") != "" {
					t.Logf("%s\n%s", got, line)
				}
			})
		}
	}
}

// streamUpstream is a raw upstream for streamed answers: per connection it
// reads one request (counted), writes head, then each of parts; before a
// part it waits for hold when the part is "" (the test's go-ahead), and it
// ends the connection with a FIN, or a reset when rst. written counts
// the bytes the proxy took.
type streamUpstream struct {
	ln      net.Listener
	reqs    *atomic.Int64
	written atomic.Int64
	werr    atomic.Pointer[error]
	hold    chan struct{}
	ended   chan struct{}
}

func newStreamUpstream(t *testing.T, parts []string, rst bool, endless string) *streamUpstream {
	t.Helper()
	u := &streamUpstream{hold: make(chan struct{}), ended: make(chan struct{})}
	var once sync.Once
	u.ln, u.reqs = proxytest.RawBackend(t, func(c *net.TCPConn) {
		defer once.Do(func() { close(u.ended) })
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		for _, p := range parts {
			if p == "" {
				select {
				case <-u.hold:
				case <-time.After(proxytest.Bound):
					return
				}
				continue
			}
			n, err := io.WriteString(c, p)
			u.written.Add(int64(n))
			if err != nil {
				u.werr.Store(&err)
				return
			}
		}
		if endless != "" {
			// Until the proxy stops reading (its close fails a write), at
			// most 64 MiB.
			for range (64 << 20) / len(endless) {
				n, err := io.WriteString(c, endless)
				u.written.Add(int64(n))
				if err != nil {
					u.werr.Store(&err)
					return
				}
			}
		}
		if rst {
			_ = c.SetLinger(0)
		}
	})
	return u
}

// TestAdv3StreamedBodyCut: an answer whose body streams (chunked, or a
// Content-Length over 64 KiB) that breaks after its head went to the
// client: the client gets the head and the body bytes that were whole,
// then the close, never the end of a chunked body nor a length made
// good; nothing is retried (the answer was committed), the upstream saw
// the POST once. As Go's ReverseProxy (it aborts the client's
// connection) and HAProxy 2.6 (it closes the client's) do.
func TestAdv3StreamedBodyCut(t *testing.T) {
	const chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	big := strings.Repeat("x", 50000)
	cases := []struct {
		name  string
		parts []string // "" waits for the client to have the bytes before it
		rst   bool
		want  string // what the client reads, to the close
	}{
		{"Content-Length 100000, the close after 50000", []string{"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, ""}, false,
			"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big},
		{"Content-Length 100000, a reset after 50000", []string{"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, ""}, true,
			"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big},
		{"chunked, the close after a chunk", []string{chunkedHead + "5\r\nhello\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		{"chunked, a reset after a chunk", []string{chunkedHead + "5\r\nhello\r\n", ""}, true,
			chunkedHead + "5\r\nhello\r\n"},
		{"chunked, the close inside a chunk", []string{chunkedHead + "a\r\nhello", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		{"delimited by the close, a reset", []string{"HTTP/1.1 200 OK\r\n\r\nhello", ""}, true,
			chunkedHead + "5\r\nhello\r\n"},
		// Chunk framing the upstream breaks (Go's transport: its chunked
		// reader's errors).
		{"an invalid chunk size", []string{chunkedHead + "5\r\nhello\r\nzz\r\nhello\r\n0\r\n\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		{"a chunk size of 17 hex digits", []string{chunkedHead + "5\r\nhello\r\n10000000000000000\r\nhello\r\n0\r\n\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		{"a negative chunk size", []string{chunkedHead + "5\r\nhello\r\n-5\r\nhello\r\n0\r\n\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		{"a chunk without its CRLF", []string{chunkedHead + "5\r\nhelloXX5\r\nhello\r\n0\r\n\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		{"a chunk size line ending in a bare LF", []string{chunkedHead + "5\r\nhello\r\n5\nhello\r\n0\r\n\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		// Go's chunked reader: a chunk line of 4 KiB or more is an error
		// (ErrLineTooLong), whatever the extension.
		{"a 5 KiB chunk extension", []string{chunkedHead + "5\r\nhello\r\n5;" + strings.Repeat("e", 5<<10) + "\r\nhello\r\n0\r\n\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		// Trailers: dropped when whole; a section over 16 KiB (HAProxy's
		// buffer) or with a bare LF breaks the body.
		{"trailers over 16 KiB", []string{chunkedHead + "5\r\nhello\r\n0\r\n" + strings.Repeat("X-T: "+strings.Repeat("t", 93)+"\r\n", 170) + "\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
		{"a trailer ending in a bare LF", []string{chunkedHead + "5\r\nhello\r\n0\r\nX-T: a\n\r\n", ""}, false,
			chunkedHead + "5\r\nhello\r\n"},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				up := newStreamUpstream(t, tc.parts, tc.rst, "")
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String(),
					"--retry-on", "reset,timeout,503")
				c := proxytest.Dial(t, p.Addr())
				c.Send("POST http://backend/1 HTTP/1.1\r\nHost: backend\r\nContent-Length: 4\r\n\r\nbody")
				// The head before the upstream's go-ahead, exactly: the
				// answer was committed before the cut.
				end := strings.Index(tc.want, "\r\n\r\n") + 4
				head := make([]byte, end)
				if _, err := io.ReadFull(c.BR, head); err != nil || string(head) != tc.want[:end] {
					t.Fatalf("the client read %q (%v), want the head %q", head, err, tc.want[:end])
				}
				close(up.hold)
				got := string(head) + c.Rest()
				if strings.HasPrefix(tc.want, "HTTP/1.1 200 OK\r\nContent-Length: ") {
					// A length: the bytes that came, at most (the proxy's
					// write buffer, up to 16 KiB, is not flushed into a
					// connection it cuts); the close tells the client.
					if !strings.HasPrefix(tc.want, got) {
						t.Errorf("the client read %q, want a prefix of %q, then the close", brief3(got), brief3(tc.want))
					}
					t.Logf("the client got %d of the %d body bytes sent, then the close", len(got)-end, len(tc.want)-end)
				} else if got != tc.want {
					t.Errorf("the client read %q, want %q, then the close", brief3(got), brief3(tc.want))
				}
				if n := up.reqs.Load(); n != 1 {
					t.Errorf("the upstream got %d connections (a request each), want 1", n)
				}
				// The proxy goes on serving: a new client's request.
				proxytest.Wait(t, up.ended, "the upstream's end")
			})
		}
	}
}

// TestAdv3StreamedBodyWhole: the legitimate forms next to the cut ones
// above pass whole: a chunk extension (dropped), a chunk size with
// leading zeros, trailers within the bound (dropped), a Content-Length
// body over 64 KiB.
func TestAdv3StreamedBodyWhole(t *testing.T) {
	const chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	big := strings.Repeat("y", 70000)
	cases := []struct{ name, raw, want string }{
		{"a chunk extension", chunkedHead + "5;name=\"va;lue\"\r\nhello\r\n0;last\r\n\r\n", chunkedHead + "5\r\nhello\r\n0\r\n\r\n"},
		{"a chunk size with leading zeros", chunkedHead + "0005\r\nhello\r\n0\r\n\r\n", chunkedHead + "5\r\nhello\r\n0\r\n\r\n"},
		{"trailers within the bound", chunkedHead + "5\r\nhello\r\n0\r\nX-T: a\r\nX-U: b\r\n\r\n", chunkedHead + "5\r\nhello\r\n0\r\n\r\n"},
		{"a 4,000-byte chunk extension", chunkedHead + "5;" + strings.Repeat("e", 4000) + "\r\nhello\r\n0\r\n\r\n", chunkedHead + "5\r\nhello\r\n0\r\n\r\n"},
		{"Content-Length 70000", "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + big, "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + big},
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
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String())
				c := proxytest.Dial(t, p.Addr())
				var raw bytes.Buffer
				br := bufio.NewReader(io.TeeReader(c.C, &raw))
				c.Send("GET http://backend/1 HTTP/1.1\r\nHost: backend\r\n\r\n")
				if got := advRead(t, br, &raw, "GET"); got != tc.want {
					t.Errorf("answer %q, want %q", brief3(got), brief3(tc.want))
				}
				c.Send("GET http://backend/2 HTTP/1.1\r\nHost: backend\r\n\r\n")
				if got := advRead(t, br, &raw, "GET"); got != advOK2 {
					t.Errorf("second answer %q, want %q", got, advOK2)
				}
			})
		}
	}
}

// TestAdv3ChunkExtensionFlood: CVE-2023-39326's shape against the proxy: an
// upstream that sends one chunk-size line of endless extension bytes (up
// to 64 MiB). The proxy reads at most a line's bound of it (4 KiB, Go's
// chunked reader's) and its buffers, then closes: the client gets the head
// and the close, and the upstream's writes fail after at most 8 MiB
// (loopback socket buffers included). Before, fasthttp's chunk parser
// read and dropped every byte: all 64 MiB taken, the client waiting
// throughout. And many tiny chunks each with a 3 KiB extension (under the
// line bound): Go's rule, at most 16 KiB of framing beyond what the data
// carries, cuts it after a few.
func TestAdv3ChunkExtensionFlood(t *testing.T) {
	const chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range []struct {
			name, first, endless string
			data                 int // at most this many bytes of data reach the client
		}{
			{"one endless extension", chunkedHead + "5;", strings.Repeat("e", 64<<10), 0},
			// Go's rule: 16 KiB of framing beyond 16 bytes and twice the
			// data a chunk: about 3 KiB a chunk here, cut at the 6th.
			{"tiny chunks with 3 KiB extensions", chunkedHead, "1;" + strings.Repeat("e", 3<<10) + "\r\na\r\n", 6},
		} {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				up := newStreamUpstream(t, []string{tc.first}, false, tc.endless)
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String())
				c := proxytest.Dial(t, p.Addr())
				_ = c.C.SetDeadline(time.Now().Add(proxytest.Bound))
				start := time.Now()
				c.Send("GET http://backend/1 HTTP/1.1\r\nHost: backend\r\n\r\n")
				got, err := io.ReadAll(c.BR)
				if err != nil && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("reading to the close: %v (read %q)", err, brief3(string(got)))
				}
				// The proxy re-chunks what it passes on: whole chunks of
				// data, never the body's end, then the close.
				rest, ok := strings.CutPrefix(string(got), chunkedHead)
				data, derr := io.ReadAll(httputil.NewChunkedReader(strings.NewReader(rest)))
				if !ok || !errors.Is(derr, io.ErrUnexpectedEOF) || len(data) > tc.data || strings.Trim(string(data), "a") != "" {
					t.Errorf("the client read %q (data %q, %v), want the head, at most %d bytes of data in whole chunks, then the close",
						brief3(string(got)), data, derr, tc.data)
				}
				proxytest.Wait(t, up.ended, "the upstream's end")
				n := up.written.Load()
				t.Logf("the upstream wrote %d bytes before the proxy stopped it (%v)", n, time.Since(start).Round(time.Millisecond))
				if up.werr.Load() == nil || n > 8<<20 {
					t.Errorf("the upstream wrote %d bytes (error %v), want its writes refused within 8 MiB", n, up.werr.Load())
				}
			})
		}
	}
}

// brief3 cuts long strings for failure messages.
func brief3(s string) string {
	if len(s) <= 300 {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)...%s", s[:200], len(s), s[len(s)-60:])
}

// TestAdv3EarlyAnswerBodyNeverRead: an upstream that answers an 8 MiB
// upload at once (413, with its length) and then neither reads the rest
// nor closes. Go's transport reads the answer while it writes and hands it
// over at once (RFC 9112 9.5 lets a server answer before the whole
// request); the proxy must pass it on too, within the per-try timeout
// (2 s here), and never reuse that connection (the rest of the request
// would be read as the next one). The upstream saw the POST once.
func TestAdv3EarlyAnswerBodyNeverRead(t *testing.T) {
	const answer = "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			hold := make(chan struct{})
			ln, accepted := proxytest.RawBackend(t, func(c *net.TCPConn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				if _, err := io.WriteString(c, answer); err != nil {
					return
				}
				select {
				case <-hold:
				case <-time.After(proxytest.Bound):
				}
			})
			defer close(hold)
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+ln.Addr().String())
			c := proxytest.Dial(t, p.Addr())
			_ = c.C.SetDeadline(time.Now().Add(proxytest.Bound))
			start := time.Now()
			go func() {
				_, _ = io.WriteString(c.C, "POST http://backend/1 HTTP/1.1\r\nHost: backend\r\nContent-Length: 8388608\r\n\r\n"+strings.Repeat("u", 8<<20))
			}()
			resp, err := http.ReadResponse(c.BR, &http.Request{Method: "POST"})
			if err != nil {
				t.Fatalf("reading the answer after %v: %v", time.Since(start), err)
			}
			body, _ := io.ReadAll(resp.Body)
			took := time.Since(start)
			t.Logf("answered %d %q after %v", resp.StatusCode, body, took.Round(time.Millisecond))
			if resp.StatusCode != 413 || string(body) != "big" {
				t.Errorf("answer %d %q, want the upstream's 413 \"big\"", resp.StatusCode, body)
			}
			if took > 1500*time.Millisecond {
				t.Errorf("answered after %v: want it at once, not after the per-try timeout (2 s)", took)
			}
			if n := accepted.Load(); n != 1 {
				t.Errorf("the upstream got %d connections, want 1 (the POST once)", n)
			}
		})
	}
}

// TestAdv3HTTP10AnswerNotReused: an HTTP/1.0 answer without "Connection:
// keep-alive" ends its connection's use (RFC 9112 9.3; Go's transport
// closes it): the next request goes on a new connection, even when the
// upstream keeps the old one open. With keep-alive it is reused.
func TestAdv3HTTP10AnswerNotReused(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range []struct{ name, raw, reqs string }{
			{"HTTP 1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "c1:GET /1,c2:GET /2"},
			{"HTTP 1.0 with keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", "c1:GET /1,c1:GET /2"},
		} {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				up := newAdvUpstream(t, func(n int) advAnswer {
					if n == 1 {
						return advAnswer{raw: tc.raw}
					}
					return advAnswer{raw: advOK2}
				})
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String())
				c := proxytest.Dial(t, p.Addr())
				c.Send("GET http://backend/1 HTTP/1.1\r\nHost: backend\r\n\r\n")
				c.Expect("GET", 200, "ok")
				c.Send("GET http://backend/2 HTTP/1.1\r\nHost: backend\r\n\r\n")
				c.Expect("GET", 200, "two")
				if got := strings.Join(up.requests(), ","); got != tc.reqs {
					t.Errorf("the upstream got %s, want %s", got, tc.reqs)
				}
			})
		}
	}
}
