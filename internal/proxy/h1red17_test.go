package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Session 17's red team of the HTTP/1.1 data path (branch h1red17).

// TestH1Red17ExpectRefusedWithoutContinue: a request with Expect:
// 100-continue whose body the proxy refuses by its head alone (a
// Content-Length over 16 MiB; one that does not fit in
// --max-buffered-body-bytes) gets its final answer at once, with no 100
// Continue before it, and the connection closes with nothing of the body
// sent: RFC 9110 10.1.1 ("send an immediate response with a final status
// code, if that status can be determined by examining just the request
// line and header fields"); nginx 1.22 (client_max_body_size 16m, checked
// on loopback) answers its 413 the same way, no 100 first. Before, both
// engines (the loop hands Expect to the goroutine engine) sent fasthttp's
// 100 Continue first: the client began its upload, the proxy closed with
// it unread, and the client's upload met a reset that could take the
// answer with it (curl -T of 2 MB against the budget: `curl: (55) Send
// failure: Connection reset by peer`, status 100, in 1 of 12 runs).
// The backend executes nothing.
func TestH1Red17ExpectRefusedWithoutContinue(t *testing.T) {
	const max = 64 << 10
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max))
			for _, tc := range []struct {
				name string
				size int64
				want string
			}{
				{"over 16 MiB", 20000000, string(forward.OwnAnswer(http.StatusRequestEntityTooLarge,
					fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", forward.MaxRequestBody), true))},
				// Over what large bodies may hold (61,440 of 65,536): refused
				// as its head is read.
				{"over the budget", 100000, string(forward.BudgetAnswer(budgetWords(100000, 0, max, budgetHeld("goroutine", 100000))))},
			} {
				c := proxytest.Dial(t, p.Addr())
				c.Send(strings.Replace(postHead("/"+strconv.FormatInt(tc.size, 10), int(tc.size)), "\r\n\r\n", "\r\nExpect: 100-continue\r\n\r\n", 1))
				if got := c.Rest(); got != tc.want {
					t.Errorf("%s: answer\n%q\nwant\n%q", tc.name, got, tc.want)
				}
			}
			// The connection's own requests still work: one that fits gets
			// its 100 and is forwarded whole.
			c := proxytest.Dial(t, p.Addr())
			c.Send(strings.Replace(postHead("/fits", 5), "\r\n\r\n", "\r\nExpect: 100-continue\r\n\r\n", 1))
			c.Expect("POST", http.StatusContinue, "")
			c.Send("hello")
			c.Expect("POST", http.StatusOK, "/fits:hello")
			if n := b.Hits.Load(); n != 1 {
				t.Errorf("the backend executed %d requests, want 1 (only the body that fits)", n)
			}
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
		})
	}
}

// TestH1Red17CurlExpectRefused: curl -T of a file over 16 MiB sends
// Expect: 100-continue and waits for the 100 before it uploads: it now
// gets the 413 alone, exits 0 and uploads nothing (before: the 100, then
// the upload into a closing connection).
func TestH1Red17CurlExpectRefused(t *testing.T) {
	curlPath(t)
	file := writeFile(t, make([]byte, 20000000))
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			for i := range 3 {
				o := runCurl(t, []string{"http_proxy=http://" + p.Addr()}, nil, "-T", file, "http://backend/up")
				want := fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", forward.MaxRequestBody)
				if o.exit != 0 || len(o.heads) != 1 || o.heads[0] != "HTTP/1.1 413 Request Entity Too Large" || string(o.body) != want {
					t.Errorf("run %d: %s; want exit 0, the one head %q, body %q", i, o, "HTTP/1.1 413 Request Entity Too Large", want)
				}
			}
			if n := b.Hits.Load(); n != 0 {
				t.Errorf("the backend executed %d requests, want 0", n)
			}
		})
	}
}

// TestH1Red17RefusalReachesUploadingClient: a client still uploading the
// body the proxy refused (curl -T with Expect emptied: a 20 MB body over
// the 16 MiB limit, a 2 MB one over --max-buffered-body-bytes 1 MiB) gets
// the 413 or 503 every time. The proxy half-closes after its answer and
// reads what the client still sends for a bounded while before it closes
// (nginx's lingering_close, Go's net/http's close after a write shutdown),
// so that its close carries no reset into the client's upload. Before,
// it closed at once with the body unread, the reset met curl's upload and
// curl lost the answer: `curl: (55) Send failure: Connection reset by
// peer`, no status, in about 1 of 10 runs on each engine.
func TestH1Red17RefusalReachesUploadingClient(t *testing.T) {
	curlPath(t)
	const runs = 20
	big, over := writeFile(t, make([]byte, 20000000)), writeFile(t, make([]byte, 2000000))
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(1<<20))
			for _, tc := range []struct {
				file, head, body string
			}{
				{big, "HTTP/1.1 413 Request Entity Too Large", fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", forward.MaxRequestBody)},
				{over, "HTTP/1.1 503 Service Unavailable", forward.BudgetBody(2000000, 0, 1<<20, 1<<20-1<<20/16)},
			} {
				failed := 0
				for i := range runs {
					o := runCurl(t, []string{"http_proxy=http://" + p.Addr()}, nil, "-H", "Expect:", "-T", tc.file, "http://backend/up")
					if o.exit != 0 || len(o.heads) != 1 || o.heads[0] != tc.head || string(o.body) != tc.body {
						failed++
						t.Logf("run %d: %s", i, o)
					}
				}
				if failed > 0 {
					t.Errorf("%s: %d of %d runs without the answer %q %q", tc.head, failed, runs, tc.head, tc.body)
				}
			}
			if n := b.Hits.Load(); n != 0 {
				t.Errorf("the backend executed %d requests, want 0", n)
			}
		})
	}
}

// TestH1Red17PipelinedAnswerNotHeld: a request pipelined behind another,
// its head in the same read, its body still to come, does not hold the
// answer to the request before it: the client gets that answer before it
// sends the next body, as from the loop and as Go's net/http server
// answers (it writes each answer out before it reads the next request's
// body). The goroutine engine's fasthttp flushes an answer only when
// nothing more was read; it held the first answer in its buffer while it
// waited for the second body, until that came or --client-timeout (60 s)
// cut the connection: a client that reads each answer before it streams
// the next body (or waits for it, as for a 100) saw nothing at all. Each
// shape: the next body by length, chunked, or awaited with Expect.
func TestH1Red17PipelinedAnswerNotHeld(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range []struct {
			name, first, next, nextBody, want string
		}{
			{"length", "GET http://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n",
				"POST http://backend/b HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\n", "world", "/b:world"},
			{"post-length", "POST http://backend/a HTTP/1.1\r\nHost: backend\r\nContent-Length: 0\r\n\r\n",
				"PUT http://backend/b HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nwo", "rld", "/b:world"},
			{"chunked", "GET http://backend/a HTTP/1.1\r\nHost: backend\r\n\r\n",
				"POST http://backend/b HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nwo\r\n", "3\r\nrld\r\n0\r\n\r\n", "/b:world"},
		} {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				b := proxytest.NewBackend(t, proxytest.Echo)
				p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
				c := proxytest.Dial(t, p.Addr())
				c.Send(tc.first + tc.next)
				c.Expect("GET", http.StatusOK, "/a:") // before the next body is sent
				c.Send(tc.nextBody)
				c.Expect("POST", http.StatusOK, tc.want)
			})
		}
	}
}

// TestH1Red17ExpectPipelined: a request with Expect: 100-continue whose
// body came with it, another request's head behind it in the same read.
// The refusal by the head (TestH1Red17ExpectRefusedWithoutContinue) is
// asked of that request's own head only: before its fix, asking framed
// the head behind it as if it were this one's, which ended the
// pre-parser's scan for the connection, so that a later head with a bare
// LF reached fasthttp's parser, which waits for CRLF CRLF (no answer),
// where the proxy answers its 400. The first answer also goes out before
// the next body comes (TestH1Red17PipelinedAnswerNotHeld).
func TestH1Red17ExpectPipelined(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			c := proxytest.Dial(t, p.Addr())
			c.Send("POST http://backend/a HTTP/1.1\r\nHost: backend\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello" +
				"POST http://backend/b HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\n")
			c.Expect("POST", http.StatusContinue, "")
			c.Expect("POST", http.StatusOK, "/a:hello")
			c.Send("world" + "GET http://backend/c HTTP/1.1\r\nHost: backend\nX: y\r\n\r\n")
			c.Expect("POST", http.StatusOK, "/b:world")
			if got, want := c.Rest(), string(forward.MalformedAnswer("a line ends in a bare LF")); got != want {
				t.Errorf("after the pipeline, a head with a bare LF: %q, want %q", got, want)
			}
			if n := b.Hits.Load(); n != 2 {
				t.Errorf("the backend executed %d requests, want 2", n)
			}
		})
	}
}

// TestH1Red17InvalidPortRefused: a Host (or an absolute target's
// authority) whose port is no number is refused 400 `invalid port` on
// both engines, the same bytes, and nothing reaches the upstream. Before,
// the goroutine engine refused it so (fasthttp's URI parser) and the loop,
// which did not look at its parse's error, forwarded the request with its
// path and query lost: `DELETE /users/42?x=1` with `Host: backend:abc` ran
// as `DELETE /` at the upstream. A port with leading zeros is a number
// and goes on as sent, on both.
func TestH1Red17InvalidPortRefused(t *testing.T) {
	refused := string(forward.MalformedAnswer("invalid port"))
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			for _, req := range []string{
				"DELETE /users/42?x=1 HTTP/1.1\r\nHost: backend:abc\r\n\r\n",
				"POST /orders HTTP/1.1\r\nHost: backend:8o\r\nContent-Length: 2\r\n\r\nhi",
				"GET http://backend:abc/x HTTP/1.1\r\nHost: backend\r\n\r\n",
				"GET /x HTTP/1.1\r\nHost: backend: 80\r\n\r\n",
				"GET /x HTTP/1.1\r\nHost: backend:+80\r\n\r\n",
				"GET /x HTTP/1.1\r\nHost: backend:-1\r\n\r\n",
			} {
				c := proxytest.Dial(t, p.Addr())
				c.Send(req)
				if got := c.Rest(); got != refused {
					t.Errorf("%q: answered\n%q\nwant\n%q", req, got, refused)
				}
			}
			if n := b.Hits.Load(); n != 0 {
				t.Errorf("the backend executed %d requests, want 0", n)
			}
			c := proxytest.Dial(t, p.Addr())
			c.Send("DELETE /users/42?x=1 HTTP/1.1\r\nHost: backend:0080\r\n\r\n")
			c.Expect("DELETE", http.StatusOK, "/users/42:")
		})
	}
}

// TestH1Red17EmptyHostName: a Host or an absolute target whose host name
// is empty (`Host: :80`, `http://:80/x`) is a request with no host, 400
// `request has no host` as for `http:///x`, on both engines, nothing
// dialled (RFC 9110 4.2.1: an http URI with an empty host is invalid).
// Before, it was forwarded as to an unknown host and failed its dial in
// words naming an address the client never wrote: 502 `upstream unknown
// (:80): ... dial tcp: address :80:80: too many colons in address`.
func TestH1Red17EmptyHostName(t *testing.T) {
	want := string(forward.OwnAnswer(http.StatusBadRequest, "retrycap-proxy: request has no host\n", false))
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, proxytest.Echo)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			c := proxytest.Dial(t, p.Addr())
			for _, req := range []string{
				"GET /x HTTP/1.1\r\nHost: :80\r\n\r\n",
				"GET http://:80/x HTTP/1.1\r\nHost: backend\r\n\r\n",
				"GET /x HTTP/1.1\r\nHost: :\r\n\r\n",
			} {
				c.Send(req)
				got := make([]byte, len(want))
				if _, err := io.ReadFull(c.BR, got); err != nil || string(got) != want {
					t.Fatalf("%q: answered\n%q (%v)\nwant\n%q", req, got, err, want)
				}
			}
			// The connection goes on: the refusal does not close it.
			c.Send("GET /y HTTP/1.1\r\nHost: backend\r\n\r\n")
			c.Expect("GET", http.StatusOK, "/y:")
			if n := b.Hits.Load(); n != 1 {
				t.Errorf("the backend executed %d requests, want 1", n)
			}
		})
	}
}

// TestH1Red17StuckClientReleasesUpstream: a client that reads the head of
// a streamed answer and then stops reading, its connection left open
// (its receive window shut), has the proxy cut the answer once a write to
// it made no progress for the body's idle bound (forward.BodyIdleTimeout,
// 60 s; 300 ms here), on both engines: the upstream connection is closed
// (the upstream's write fails) and so is the client's. nginx's
// send_timeout (60 s) and HAProxy's timeout client bound a response's
// writes the same way. Before, only the upstream's reads were bounded,
// and none was pending while the write to the client blocked: the
// upstream connection (and the goroutine writing) stayed held for as long
// as the client kept its connection, still so after 80 s with the default
// bound (both engines).
func TestH1Red17StuckClientReleasesUpstream(t *testing.T) {
	const idle = 300 * time.Millisecond
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range []struct {
			chunked bool
			proto   string // the client's: HTTP/1.0 gets a chunked answer delimited by the close
		}{{true, "HTTP/1.1"}, {false, "HTTP/1.1"}, {true, "HTTP/1.0"}} {
			chunked := tc.chunked
			t.Run(fmt.Sprintf("%s/chunked=%v/%s", engine, chunked, tc.proto), func(t *testing.T) {
				ended := make(chan error, 1)
				ln, _ := proxytest.RawBackend(t, func(c *net.TCPConn) {
					defer c.Close()
					br := bufio.NewReader(c)
					if _, err := http.ReadRequest(br); err != nil {
						ended <- err
						return
					}
					head := "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n"
					block := proxytest.Pattern(64 << 10)
					if chunked {
						head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
						block = fmt.Appendf(nil, "%x\r\n%s\r\n", len(block), block)
					}
					_, err := io.WriteString(c, head)
					// 1 GiB at most: a proxy that never cuts fails the wait
					// below, not this loop.
					for i := 0; err == nil && i < 1<<14; i++ {
						_, err = c.Write(block)
					}
					ended <- err
				})
				cfg, err := ParseFlags([]string{"--engine", engine, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
					"--upstreams", "backend=1", "--resolve", "backend=" + ln.Addr().String()}, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				cfg.bodyIdle = idle
				p, err := New(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Shutdown(t.Context()) })
				c := proxytest.Dial(t, p.Addr())
				c.Send("GET http://backend/big " + tc.proto + "\r\nHost: backend\r\n\r\n")
				resp, err := http.ReadResponse(c.BR, &http.Request{Method: "GET"})
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("the head: %v %v", resp, err)
				}
				// Reads nothing more: the upstream's write must fail once
				// the proxy gives up on the client.
				select {
				case err := <-ended:
					if err == nil {
						t.Fatal("the upstream wrote 1 GiB: the client was never cut")
					}
				case <-time.After(proxytest.Bound):
					t.Fatalf("the upstream connection still held %v after the client stopped reading (idle bound %v)", proxytest.Bound, idle)
				}
				// The client's connection ends too: what it has not read
				// yet, then the close (a truncated body, never a whole one;
				// to an HTTP/1.0 client the close is the body's end).
				_ = c.C.SetReadDeadline(time.Now().Add(proxytest.Bound))
				n, err := io.Copy(io.Discard, resp.Body)
				if (err == nil && tc.proto == "HTTP/1.1") || n >= 1<<30 {
					t.Errorf("the client read %d body bytes and %v, want a cut short of 1 GiB", n, err)
				}
			})
		}
	}
}
