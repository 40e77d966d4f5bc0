package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Interim (1xx) answers of an HTTP/1.1 upstream are passed on to an
// HTTP/1.1 client, on both engines (docs/decisions.md, h1left20): every
// 1xx but 100 and 101, without the fields of the upstream's connection,
// at most forward.MaxInterimRelayed bytes of them per call; an attempt
// whose 1xx went out is not retried.

// earlyHints is a Go net/http upstream that sends 103 Early Hints with a
// Link field, then 200 "ok" without it.
func earlyHints(_ int64, w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Link", "</style.css>; rel=preload; as=style")
	w.WriteHeader(http.StatusEarlyHints)
	w.Header().Del("Link")
	w.Header().Set("X-Final", "yes")
	_, _ = io.WriteString(w, "ok")
}

type got1xx struct {
	code int
	link string
}

// traced is a GET through c that records the 1xx answers it got (Go's
// httptrace Got1xxResponse, its one way to see them).
func traced(t *testing.T, c *http.Client, target string) (*http.Response, string, []got1xx) {
	t.Helper()
	var mu sync.Mutex
	var seen []got1xx
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, got1xx{code, h.Get("Link")})
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return resp, string(body), append([]got1xx(nil), seen...)
}

func TestInterimAnswersPassedOnGoClient(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newBackend(t, earlyHints)
			p := startProxyOn(t, engine, "--pass-interim-answers", "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
			c := clientFor(p)
			for i := range 2 { // the second on the kept-alive connection
				resp, body, seen := traced(t, c, "http://svc/")
				if resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Final") != "yes" || resp.Header.Get("Link") != "" {
					t.Fatalf("call %d: %d %q %v, want 200 ok with X-Final and no Link", i+1, resp.StatusCode, body, resp.Header)
				}
				if len(seen) != 1 || seen[0] != (got1xx{103, "</style.css>; rel=preload; as=style"}) {
					t.Fatalf("call %d: 1xx seen %v, want one 103 with the Link", i+1, seen)
				}
			}
			if n := b.hits.Load(); n != 2 {
				t.Fatalf("upstream saw %d requests, want 2", n)
			}
		})
	}
}

func TestInterimAnswersPassedOnCurl(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newBackend(t, earlyHints)
			p := startProxyOn(t, engine, "--pass-interim-answers", "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
			out := runCurl(t, []string{"http_proxy=http://" + p.Addr()}, nil, "http://svc/")
			want := []string{"HTTP/1.1 103 Early Hints", "HTTP/1.1 200 OK"}
			if out.exit != 0 || strings.Join(out.heads, "|") != strings.Join(want, "|") || string(out.body) != "ok" {
				t.Fatalf("curl: %v, want heads %q and body ok", out, want)
			}
		})
	}
}

// interimScript answers every request on its connection with answer.
func interimScript(t *testing.T, answer string) (net.Listener, *atomic.Int64) {
	t.Helper()
	var reqs atomic.Int64
	ln, _ := proxytest.RawBackend(t, func(c *net.TCPConn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			reqs.Add(1)
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	})
	return ln, &reqs
}

// rawAll writes req to the proxy and reads all it answers until it closes.
func rawAll(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answer: %v (got %q)", err, b)
	}
	return string(b)
}

// The bytes passed on: the 103 and the 102 as the proxy writes them (its
// HTTP/1.1 status line, the upstream's connection fields and a 1xx's
// framing fields dropped, the end-to-end fields in their order), the 100
// not (the proxy answers Expect itself); none to an HTTP/1.0 client.
func TestInterimAnswersBytes(t *testing.T) {
	const upstream = "HTTP/1.0 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: X-Hop\r\nX-Hop: 1\r\n" +
		"Keep-Alive: timeout=5\r\nContent-Length: 0\r\nLink: </b.js>; rel=preload\r\n\r\n" +
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\nX-Step: 1\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	const passed = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n" +
		"HTTP/1.1 102 Processing\r\nX-Step: 1\r\n\r\nHTTP/1.1 200 OK\r\n"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			ln, reqs := interimScript(t, upstream)
			p := startProxyOn(t, engine, "--pass-interim-answers", "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String())
			got := rawAll(t, p.Addr(), "GET http://svc/ HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n")
			if !strings.HasPrefix(got, passed) || !strings.HasSuffix(got, "\r\n\r\nok") {
				t.Fatalf("HTTP/1.1 client got %q, want it to begin %q and end in the body ok", got, passed)
			}
			got = rawAll(t, p.Addr(), "GET http://svc/ HTTP/1.0\r\nHost: svc\r\n\r\n")
			if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(got, "\r\n\r\nok") {
				t.Fatalf("HTTP/1.0 client got %q, want the 200 alone", got)
			}
			if n := reqs.Load(); n != 2 {
				t.Fatalf("upstream saw %d requests, want 2", n)
			}
		})
	}
}

// An attempt whose 103 went out is not retried: the upstream resets
// after it, a GET allowed 3 attempts is tried once and answered the
// proxy's 502 after the 103 (a retry's answer would follow another
// attempt's hints; Envoy retries no more after a 1xx either). Before
// this change the 103 was dropped and the GET tried 3 times.
func TestInterimAnswerEndsRetries(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			var reqs atomic.Int64
			ln, _ := proxytest.RawBackend(t, func(c *net.TCPConn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				reqs.Add(1)
				_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
				_ = c.SetLinger(0)
			})
			p := startProxyOn(t, engine, "--pass-interim-answers", "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String())
			resp, body, seen := traced(t, clientFor(p), "http://svc/")
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Retrycap-Exhausted") != "" ||
				!strings.Contains(body, "1 attempt(s), last failed with reset") {
				t.Fatalf("%d %q %q, want the proxy's 502 after 1 attempt", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body)
			}
			if len(seen) != 1 || seen[0].code != 103 {
				t.Fatalf("1xx seen %v, want one 103", seen)
			}
			if n := reqs.Load(); n != 1 {
				t.Fatalf("upstream saw %d attempts, want 1", n)
			}
		})
	}
}

// Pipelined requests: an interim answer is written only once every answer
// before it on the connection went out, so it never lands ahead of (or
// inside) an earlier request's answer. The loop serves them one at a
// time and passes every 1xx on. The goroutine engine's server holds an
// answer while the next request is read whole already (a POST with its
// body): the second call's 103 is dropped there; when the next request's
// framing is still unknown (a GET at the end of a read) the engine
// flushes the answer first, and the 103 goes on.
func TestInterimAnswersPipelined(t *testing.T) {
	const upstream = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	const get = "GET http://svc/ HTTP/1.1\r\nHost: svc\r\n\r\n"
	for _, tc := range []struct{ engine, second, want string }{
		{"loop", "GET", "103 200 103 200"},
		{"loop", "POST", "103 200 103 200"},
		{"goroutine", "GET", "103 200 103 200"},
		{"goroutine", "POST", "103 200 200"},
	} {
		t.Run(tc.engine+" then "+tc.second, func(t *testing.T) {
			ln, reqs := interimScript(t, upstream)
			p := startProxyOn(t, tc.engine, "--pass-interim-answers", "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String())
			second := "GET http://svc/ HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n"
			if tc.second == "POST" {
				second = "POST http://svc/ HTTP/1.1\r\nHost: svc\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi"
			}
			got := rawAll(t, p.Addr(), get+second)
			br := bufio.NewReader(strings.NewReader(got))
			var seq []string
			for finals := 0; finals < 2; {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("answer %d: %v (all: %q)", len(seq)+1, err, got)
				}
				seq = append(seq, resp.Status[:3])
				if resp.StatusCode >= 200 {
					finals++
					body, err := io.ReadAll(resp.Body)
					if err != nil || string(body) != "ok" {
						t.Fatalf("answer %d: body %q %v (all: %q)", len(seq), body, err, got)
					}
				}
			}
			if s := strings.Join(seq, " "); s != tc.want || br.Buffered() != 0 {
				t.Fatalf("answers %q (%d bytes left), want %q", s, br.Buffered(), tc.want)
			}
			if n := reqs.Load(); n != 2 {
				t.Fatalf("upstream saw %d requests, want 2", n)
			}
		})
	}
}

// Without --pass-interim-answers (the default) a 103 is dropped: Go's
// client sees no 1xx, and Python's requests (urllib3, http.client), which
// would take a 103 for the final answer and then hang on the connection
// (checked: Debian's python3 3.11, requests 2.28, urllib3 1.26, against an
// upstream sending one directly), gets 200 "ok" twice on its keep-alive
// connection, on both engines.
func TestInterimAnswersDroppedByDefault(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newBackend(t, earlyHints)
			p := startProxyOn(t, engine, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
			resp, body, seen := traced(t, clientFor(p), "http://svc/")
			if resp.StatusCode != 200 || body != "ok" || len(seen) != 0 {
				t.Fatalf("Go client: %d %q, 1xx %v; want 200 ok and no 1xx", resp.StatusCode, body, seen)
			}
			get := pyHTTPReq{Method: "GET", URL: "http://svc/"}
			res, conns := requestsPlan(t, p.Addr(), nil, get, get)
			for i, r := range res {
				if r.Status != 200 || r.Body != "ok" {
					t.Fatalf("requests call %d: %d %q, want 200 ok", i+1, r.Status, r.Body)
				}
			}
			if conns != 1 || b.hits.Load() != 3 {
				t.Fatalf("requests used %d connections, upstream saw %d requests; want 1 and 3", conns, b.hits.Load())
			}
		})
	}
}

// A chunked request body the loop hands to the goroutine engine (it
// streams bodies of unknown length there): the 103 is passed on too.
func TestInterimAnswersHandedOff(t *testing.T) {
	b := newBackend(t, earlyHints)
	p := startProxyOn(t, "loop", "--pass-interim-answers", "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
	var mu sync.Mutex
	var seen []int
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, code)
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "POST", "http://svc/", io.MultiReader(strings.NewReader(strings.Repeat("a", 100000))))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked
	resp, err := clientFor(p).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	mu.Lock()
	defer mu.Unlock()
	if err != nil || resp.StatusCode != 200 || string(body) != "ok" || len(seen) != 1 || seen[0] != 103 || b.hits.Load() != 1 {
		t.Fatalf("%d %q %v, 1xx %v, %d requests upstream; want 200 ok, one 103, 1 request", resp.StatusCode, body, err, seen, b.hits.Load())
	}
}

// At most forward.MaxInterimRelayed (64 KiB) of 1xx heads per call: three
// 103s of 30 KiB each, then 200: the first two are passed on, the third
// dropped (it would take the call past 64 KiB), the answer whole.
func TestInterimAnswersBounded(t *testing.T) {
	hint := "HTTP/1.1 103 Early Hints\r\nLink: </" + strings.Repeat("a", 30<<10) + ">; rel=preload\r\n\r\n"
	upstream := hint + hint + hint + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			ln, reqs := interimScript(t, upstream)
			p := startProxyOn(t, engine, "--pass-interim-answers", "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String())
			resp, body, seen := traced(t, clientFor(p), "http://svc/")
			if resp.StatusCode != 200 || body != "ok" || len(seen) != 2 || reqs.Load() != 1 {
				t.Fatalf("%d %q, %d 1xx, %d requests upstream; want 200 ok, 2 1xx, 1 request", resp.StatusCode, body, len(seen), reqs.Load())
			}
			for _, s := range seen {
				if s.code != 103 || len(s.link) != 30<<10+len("</>; rel=preload") {
					t.Fatalf("1xx %d with a Link of %d bytes, want 103 with %d", s.code, len(s.link), 30<<10+len("</>; rel=preload"))
				}
			}
		})
	}
}

// An upstream that sends a 103 and then nothing: the per-try timeout
// (200ms) still ends the attempt, and it is not retried (its 103 went
// out): 504 after 1 attempt, well within the 3 attempts' 600ms.
func TestInterimAnswerThenSilence(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			var reqs atomic.Int64
			ln, _ := proxytest.RawBackend(t, func(c *net.TCPConn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
				br := bufio.NewReader(c)
				r, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				reqs.Add(1)
				_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
				_, _ = io.Copy(io.Discard, br) // silent until the proxy (or the test's end) closes it
			})
			p := startProxyOn(t, engine, "--pass-interim-answers", "--per-try-timeout", "200ms", "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String())
			start := time.Now()
			resp, body, seen := traced(t, clientFor(p), "http://svc/")
			took := time.Since(start)
			if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "1 attempt(s), last failed with timeout") || len(seen) != 1 || seen[0].code != 103 {
				t.Fatalf("%d %q, 1xx %v; want 504 after 1 attempt and one 103", resp.StatusCode, body, seen)
			}
			if n := reqs.Load(); n != 1 || took >= 600*time.Millisecond {
				t.Fatalf("upstream saw %d attempts, answered in %v; want 1, under 600ms", n, took)
			}
		})
	}
}
