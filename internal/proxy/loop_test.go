//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/proxy/engine/loop"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The event loop's own edge cases, through real sockets on loopback: raw
// TCP where the framing matters. The tests run on the engine -engine
// selects (the loop by default); what only the loop does (hand-offs, and
// their counter) is asserted when the proxy runs the loop, and the answers
// must be the same on either engine.

// ltHandoffs is retrycap_proxy_loop_handoffs_total by reason (non-zero
// ones only).
func ltHandoffs(t *testing.T, p *Proxy) map[string]float64 {
	t.Helper()
	mfs, err := p.m.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "retrycap_proxy_loop_handoffs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" {
						got[l.GetValue()] += v
					}
				}
			}
		}
	}
	return got
}

// ltWantHandoffs checks the hand-off counter, reason by reason (the
// reasons not named must be 0). The goroutine engine hands nothing off.
func ltWantHandoffs(t *testing.T, p *Proxy, want map[string]float64) {
	t.Helper()
	if p.loops == nil {
		want = nil
	}
	got := ltHandoffs(t, p)
	if len(got) != len(want) {
		t.Fatalf("hand-offs %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("hand-offs %v, want %v", got, want)
		}
	}
}

// ltWantIdle checks that no call is in flight any more.
func ltWantIdle(t *testing.T, p *Proxy) {
	t.Helper()
	proxytest.Eventually(t, "in-flight calls back to 0", func() bool { return p.m.InFlight.Load() == 0 })
}

// ltProxy is a proxy with one upstream, svc (3 attempts), at b.
func ltProxy(t *testing.T, b *proxytest.Backend) *Proxy {
	return startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.Addr())
}

// ltWantEnd checks what a test leaves behind: the hand-offs (ltWantHandoffs), and no call in
// flight any more.
func ltWantEnd(t *testing.T, p *Proxy, handoffs map[string]float64) {
	t.Helper()
	ltWantHandoffs(t, p, handoffs)
	ltWantIdle(t, p)
}

// ltWantHits checks that b received want requests since it had received since.
func ltWantHits(t *testing.T, b *proxytest.Backend, since, want int64) {
	t.Helper()
	if got := b.Hits.Load() - since; got != want {
		t.Fatalf("backend received %d requests, want %d", got, want)
	}
}

// ltPipeline is first, then n PUTs of body to /0 ... /n-1, then a GET of /last: requests to
// pipeline in one write.
func ltPipeline(first string, n int, body string) string {
	var all strings.Builder
	all.WriteString(first)
	for i := range n {
		fmt.Fprintf(&all, "PUT http://svc/%d HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
	}
	all.WriteString("GET http://svc/last HTTP/1.1\r\nHost: svc\r\n\r\n")
	return all.String()
}

// ltWaitListenerClosed waits until p's listener refuses connections (a drain has begun on every
// loop).
func ltWaitListenerClosed(t *testing.T, p *Proxy) {
	t.Helper()
	proxytest.Eventually(t, "the listener closed", func() bool {
		nc, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return true
		}
		_ = nc.Close()
		return false
	})
}

// ltWantStopped waits (5 s at most) for the result of the Shutdown named what on stopped, which
// must be nil.
func ltWantStopped(t *testing.T, what string, stopped <-chan error) {
	t.Helper()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5s", what)
	}
}

// The common request is served by the loop: answered as the upstream
// answered, the body forwarded intact, nothing handed off.
func TestLoopOrdinaryRequests(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := ltProxy(t, b)
	c := proxytest.Client(p.Addr())
	defer c.Transport.(*http.Transport).CloseIdleConnections()

	resp, err := c.Get("http://svc/get?x=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "/get:" || resp.Header.Get("X-Method") != "GET" {
		t.Fatalf("GET: %d %q X-Method %q", resp.StatusCode, body, resp.Header.Get("X-Method"))
	}

	sent := proxytest.Pattern(1024)
	req, _ := http.NewRequest("POST", "http://svc/post", bytes.NewReader(sent))
	req.Header.Set("Idempotency-Key", "k-loop-1")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "/post:"+string(sent) || resp.Header.Get("X-Method") != "POST" {
		t.Fatalf("POST: %d X-Method %q body of %d bytes", resp.StatusCode, resp.Header.Get("X-Method"), len(body))
	}

	reqs := b.Requests()
	if len(reqs) != 2 {
		t.Fatalf("backend received %d requests, want 2", len(reqs))
	}
	if r := reqs[0]; r.Method != "GET" || r.URI != "/get?x=1" || len(r.Body) != 0 {
		t.Fatalf("backend's first request: %s %s body %q", r.Method, r.URI, r.Body)
	}
	if r := reqs[1]; r.Method != "POST" || r.URI != "/post" || r.Key != "k-loop-1" || !bytes.Equal(r.Body, sent) {
		t.Fatalf("backend's second request: %s %s key %q body of %d bytes (intact %t)", r.Method, r.URI, r.Key, len(r.Body), bytes.Equal(r.Body, sent))
	}
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != 2 {
		t.Fatalf("attempts %v, want 2", got)
	}
	ltWantEnd(t, p, nil)
}

// Three requests in one write on one connection (the second with a
// body): three answers, in order.
func TestLoopPipelining(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := ltProxy(t, b)
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://svc/a HTTP/1.1\r\nHost: svc\r\n\r\n" +
		"POST http://svc/b HTTP/1.1\r\nHost: svc\r\nContent-Length: 5\r\n\r\nhello" +
		"GET http://svc/c HTTP/1.1\r\nHost: svc\r\n\r\n")
	c.Expect("", 200, "/a:")
	c.Expect("", 200, "/b:hello")
	c.Expect("", 200, "/c:")
	// And the connection goes on.
	c.Send("GET http://svc/d HTTP/1.1\r\nHost: svc\r\n\r\n")
	c.Expect("", 200, "/d:")
	ltWantHits(t, b, 0, 4)
	ltWantEnd(t, p, nil)
}

// Pipelined behind requests the loop serves: a request it hands off (the
// goroutine engine takes the connection with the bytes read ahead), and
// an answer that streams (the same, after the body).
func TestLoopPipelinedHandoffs(t *testing.T) {
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path == "/chunked" {
			rc := http.NewResponseController(w)
			for i := range 3 {
				fmt.Fprintf(w, "chunk %d\n", i)
				_ = rc.Flush()
			}
			return
		}
		proxytest.Echo(w, r, body)
	})
	for _, tc := range []struct {
		name, second, answer, reason string
	}{
		{"http/1.0", "GET http://svc/b HTTP/1.0\r\nHost: svc\r\nConnection: keep-alive\r\n\r\n", "/b:", "http/1.0"},
		{"streamed answer", "GET http://svc/chunked HTTP/1.1\r\nHost: svc\r\n\r\n", "chunk 0\nchunk 1\nchunk 2\n", "streamed-response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := b.Hits.Load()
			p := ltProxy(t, b)
			c := proxytest.Dial(t, p.Addr())
			c.Send("GET http://svc/a HTTP/1.1\r\nHost: svc\r\n\r\n" + tc.second +
				"POST http://svc/c HTTP/1.1\r\nHost: svc\r\nContent-Length: 3\r\n\r\nxyz" +
				"GET http://svc/d HTTP/1.1\r\nHost: svc\r\n\r\n")
			c.Expect("", 200, "/a:")
			c.Expect("", 200, tc.answer)
			c.Expect("", 200, "/c:xyz")
			c.Expect("", 200, "/d:")
			ltWantHits(t, b, hits, 4)
			ltWantEnd(t, p, map[string]float64{tc.reason: 1})
		})
	}
}

// More pipelined bytes than the loop reads ahead (loopMaxInput, 72 KiB):
// it stops reading the socket and resumes as it answers; every request is
// answered, in order.
func TestLoopPipelineBeyondReadAhead(t *testing.T) {
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		fmt.Fprintf(w, "%s:%d", r.URL.Path, len(body))
	})
	p := ltProxy(t, b)
	c := proxytest.Dial(t, p.Addr())
	const n = 8
	body := string(proxytest.Pattern(30 << 10))
	all := ltPipeline("", n, body)
	// Written while the answers are read: the proxy does not read it all
	// before answering.
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c.C, all)
		wrote <- err
	}()
	for i := range n {
		c.Expect("", 200, fmt.Sprintf("/%d:%d", i, len(body)))
	}
	c.Expect("", 200, "/last:0")
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	reqs := b.Requests()
	if len(reqs) != n+1 {
		t.Fatalf("backend received %d requests, want %d", len(reqs), n+1)
	}
	for i, r := range reqs[:n] {
		if r.URI != fmt.Sprintf("/%d", i) || string(r.Body) != body {
			t.Fatalf("request %d: %s, body of %d bytes (intact %t)", i, r.URI, len(r.Body), string(r.Body) == body)
		}
	}
	ltWantEnd(t, p, nil)
}

// The limits of what the loop buffers: a request body and an answer body
// of 64 KiB are served on the loop, one byte more is handed off (request)
// or streamed (answer); either way the connection goes on.
func TestLoopBodyLimits(t *testing.T) {
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/size/%d", &n); err == nil {
			w.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = w.Write(proxytest.Pattern(n))
			return
		}
		fmt.Fprintf(w, "%s:%d:%t", r.URL.Path, len(body), bytes.Equal(body, proxytest.Pattern(len(body))))
	})
	for _, tc := range []struct {
		name, req, answer, reason string
	}{
		{"request body of 64 KiB", fmt.Sprintf("PUT http://svc/put HTTP/1.1\r\nHost: svc\r\nContent-Length: 65536\r\n\r\n%s", proxytest.Pattern(65536)), "/put:65536:true", ""},
		{"request body of 64 KiB + 1", fmt.Sprintf("PUT http://svc/put HTTP/1.1\r\nHost: svc\r\nContent-Length: 65537\r\n\r\n%s", proxytest.Pattern(65537)), "/put:65537:true", "request-body"},
		{"answer body of 64 KiB", "GET http://svc/size/65536 HTTP/1.1\r\nHost: svc\r\n\r\n", string(proxytest.Pattern(65536)), ""},
		{"answer body of 64 KiB + 1", "GET http://svc/size/65537 HTTP/1.1\r\nHost: svc\r\n\r\n", string(proxytest.Pattern(65537)), "streamed-response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := b.Hits.Load()
			p := ltProxy(t, b)
			c := proxytest.Dial(t, p.Addr())
			c.Send(tc.req)
			resp := c.Expect("", 200, tc.answer)
			if resp.ContentLength != int64(len(tc.answer)) {
				t.Fatalf("Content-Length %d, want %d", resp.ContentLength, len(tc.answer))
			}
			c.Send("GET http://svc/next HTTP/1.1\r\nHost: svc\r\n\r\n")
			c.Expect("", 200, "/next:0:true")
			ltWantHits(t, b, hits, 2)
			want := map[string]float64{}
			if tc.reason != "" {
				want[tc.reason] = 1
			}
			ltWantEnd(t, p, want)
		})
	}
}

// A request that arrives one byte at a time, body included.
func TestLoopRequestByteByByte(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := ltProxy(t, b)
	c := proxytest.Dial(t, p.Addr())
	body := proxytest.Pattern(100)
	req := "POST http://svc/slow HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: k-slow\r\nContent-Length: 100\r\n\r\n" + string(body)
	for i := 0; i < len(req); i++ {
		c.Send(req[i : i+1])
	}
	c.Expect("", 200, "/slow:"+string(body))
	reqs := b.Requests()
	if len(reqs) != 1 || reqs[0].Key != "k-slow" || !bytes.Equal(reqs[0].Body, body) {
		t.Fatalf("backend received %d requests (%+v)", len(reqs), reqs)
	}
	ltWantEnd(t, p, nil)
}

// Each hand-off an ordinary client can cause: the answer it gets, the
// counter for that reason, and the goroutine engine serving the next
// request on the same connection (or, where fasthttp closes it after an
// error, the connection closed).
func TestLoopHandoffs(t *testing.T) {
	const next = "GET http://svc/next HTTP/1.1\r\nHost: svc\r\n\r\n"
	// fasthttp reads a head within its 8 KiB buffer: 8192 bytes (through
	// the empty line) are served, on the loop; one more is answered 431
	// after the hand-off, whether the head arrives whole or in pieces.
	bigHead := func(size int) string {
		h := "GET http://svc/big HTTP/1.1\r\nHost: svc\r\nX-Big: \r\n\r\n"
		return strings.Replace(h, "X-Big: ", "X-Big: "+strings.Repeat("b", size-len(h)), 1)
	}
	// step is what the client sends, and the answer it then reads (none
	// when code is 0).
	type step struct {
		send string
		code int
		body string
	}
	hits := func(want int64) func(*testing.T, *proxytest.Backend, *proxytest.Backend, *Proxy) {
		return func(t *testing.T, b, _ *proxytest.Backend, _ *Proxy) { ltWantHits(t, b, 0, want) }
	}
	for _, tc := range []struct {
		name  string
		steps []step
		// closed: the last answer closes the connection (Connection:
		// close, then the end); next goes on a new one.
		closed bool
		// check looks at what the backends svc (b) and other received.
		check  func(t *testing.T, b, other *proxytest.Backend, p *Proxy)
		reason string // the hand-off counted; empty: none
	}{
		{name: "http/1.0", steps: []step{{"GET http://svc/old HTTP/1.0\r\nHost: svc\r\nConnection: keep-alive\r\n\r\n", 200, "/old:"}},
			check: hits(2), reason: "http/1.0"},
		{name: "expect", steps: []step{{"PUT http://svc/e HTTP/1.1\r\nHost: svc\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", 100, ""}, {"hello", 200, "/e:hello"}},
			check: func(t *testing.T, b, _ *proxytest.Backend, _ *Proxy) {
				if reqs := b.Requests(); len(reqs) != 2 || string(reqs[0].Body) != "hello" {
					t.Fatalf("backend received %+v", reqs)
				}
			}, reason: "expect"},
		{name: "chunked request body", steps: []step{{"PUT http://svc/chunked HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 200, "/chunked:hello world"}},
			check: func(t *testing.T, b, _ *proxytest.Backend, _ *Proxy) {
				if reqs := b.Requests(); len(reqs) != 2 || string(reqs[0].Body) != "hello world" {
					t.Fatalf("backend received %+v", reqs)
				}
			}, reason: "request-body"},
		{name: "unknown host", steps: []step{{"GET http://other/u HTTP/1.1\r\nHost: other\r\n\r\n", 200, "/u:"}},
			check: func(t *testing.T, b, other *proxytest.Backend, p *Proxy) {
				if other.Hits.Load() != 1 || b.Hits.Load() != 1 {
					t.Fatalf("other received %d requests, svc %d; want 1 and 1", other.Hits.Load(), b.Hits.Load())
				}
				if got := testutil.ToFloat64(p.upstreamByName("unknown").M.Attempts); got != 1 {
					t.Fatalf("attempts to the unknown host %v, want 1", got)
				}
			}, reason: "unknown-host"},
		{name: "head of 8192 bytes", steps: []step{{bigHead(8192), 200, "/big:"}}, check: hits(2)},
		{name: "head of 8193 bytes in 1 writes", steps: []step{{bigHead(8193), 431, "retrycap-proxy: request header too large\n"}},
			closed: true, check: hits(1), reason: "head-too-large"},
		{name: "head of 8193 bytes in 2 writes", steps: []step{{bigHead(8193)[:4096], 0, ""}, {bigHead(8193)[4096:], 431, "retrycap-proxy: request header too large\n"}},
			closed: true, check: hits(1), reason: "head-too-large"},
		{name: "malformed head", steps: []step{{"GET http://svc/ HTTP/1.1\r\nbad header line\r\n\r\n", 400, "retrycap-proxy: malformed request: a header line without a colon\n"}},
			closed: true, check: hits(1), reason: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := proxytest.NewBackend(t, nil)
			other := proxytest.NewBackend(t, nil)
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.Addr()+",other="+other.Addr())
			c := proxytest.Dial(t, p.Addr())
			var resp *http.Response
			for _, st := range tc.steps {
				c.Send(st.send)
				if st.code != 0 {
					resp = c.Expect("", st.code, st.body)
				}
			}
			if tc.closed {
				if !resp.Close {
					t.Fatalf("%d without Connection: close (%v)", resp.StatusCode, resp.Header)
				}
				c.ExpectClosed()
				// A new connection is served.
				c = proxytest.Dial(t, p.Addr())
			}
			c.Send(next)
			c.Expect("", 200, "/next:")
			tc.check(t, b, other, p)
			var want map[string]float64
			if tc.reason != "" {
				want = map[string]float64{tc.reason: 1}
			}
			ltWantEnd(t, p, want)
		})
	}
}

// CONNECT is handed off (the tunnel itself is TestConnectTunnel's).
func TestLoopConnectHandoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	p := startProxy(t)
	c := proxytest.Dial(t, p.Addr())
	c.Send(fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", ln.Addr(), ln.Addr()))
	resp, err := http.ReadResponse(c.BR, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	c.Send("through")
	buf := make([]byte, len("through"))
	if _, err := io.ReadFull(c.BR, buf); err != nil || string(buf) != "through" {
		t.Fatalf("echo %q %v", buf, err)
	}
	ltWantHandoffs(t, p, map[string]float64{"connect": 1})
}

// Answers whose body must stream: decided on the loop, streamed by a
// goroutine, the client's connection then served by the goroutine engine.
func TestLoopStreamedResponses(t *testing.T) {
	large := proxytest.Pattern(200 << 10)
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch r.URL.Path {
		case "/chunked":
			// Flushed before the handler ends: net/http sends it chunked.
			rc := http.NewResponseController(w)
			for i := range 3 {
				fmt.Fprintf(w, "chunk %d\n", i)
				_ = rc.Flush()
			}
		case "/large":
			w.Header().Set("Content-Length", strconv.Itoa(len(large)))
			_, _ = w.Write(large)
		case "/eof":
			// Delimited by the end of the connection.
			c, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nX-Kind: eof\r\n\r\nuntil the end of the connection")
			_ = buf.Flush()
			_ = c.Close()
		default:
			proxytest.Echo(w, r, body)
		}
	})
	for _, tc := range []struct {
		path, body string
		chunked    bool
	}{
		{"/chunked", "chunk 0\nchunk 1\nchunk 2\n", true},
		{"/large", string(large), false},
		{"/eof", "until the end of the connection", true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			hits := b.Hits.Load()
			p := ltProxy(t, b)
			c := proxytest.Dial(t, p.Addr())
			c.Send("GET http://svc" + tc.path + " HTTP/1.1\r\nHost: svc\r\n\r\n")
			resp := c.Expect("", 200, tc.body)
			if tc.chunked {
				if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
					t.Fatalf("Transfer-Encoding %v, want chunked", resp.TransferEncoding)
				}
			} else if resp.ContentLength != int64(len(large)) {
				t.Fatalf("Content-Length %d, want %d", resp.ContentLength, len(large))
			}
			if resp.Close {
				t.Fatal("the streamed answer closes the client's connection")
			}
			// The connection goes on in the goroutine engine.
			c.Send("GET http://svc/next HTTP/1.1\r\nHost: svc\r\n\r\n")
			c.Expect("", 200, "/next:")
			ltWantHits(t, b, hits, 2)
			ltWantEnd(t, p, map[string]float64{"streamed-response": 1})
		})
	}
}

// An upstream answer that arrives in pieces, split inside the status
// line, between CR and LF, and in the body; and with an interim 100 before
// it. (Separate writes with TCP_NODELAY usually arrive apart; the answer
// must be the same when they do not.)
func TestLoopResponseInPieces(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string
	}{
		{"split", []string{"HTTP/1.1 20", "0 OK\r", "\nContent-Length: 11\r\nX-Pie", "ce: yes\r\n\r", "\nhel", "lo wo", "rld"}},
		{"after an interim 100", []string{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", "Content-Length: 11\r\n", "X-Piece: yes\r\n\r\nhello", " world"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := proxytest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				c, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer c.Close()
				for _, piece := range tc.pieces {
					_, _ = buf.WriteString(piece)
					_ = buf.Flush()
				}
			})
			p := ltProxy(t, b)
			c := proxytest.Dial(t, p.Addr())
			for i := range 2 {
				c.Send("GET http://svc/pieces HTTP/1.1\r\nHost: svc\r\n\r\n")
				resp := c.Expect("", 200, "hello world")
				if resp.Header.Get("X-Piece") != "yes" || resp.ContentLength != 11 {
					t.Fatalf("answer %d: X-Piece %q Content-Length %d", i, resp.Header.Get("X-Piece"), resp.ContentLength)
				}
			}
			ltWantHits(t, b, 0, 2)
			ltWantEnd(t, p, nil)
		})
	}
}

// An upstream that closes every connection after its answer: each
// request goes on a new upstream connection, the client's stays open.
func TestLoopUpstreamClosesEachConnection(t *testing.T) {
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Connection", "close")
		proxytest.Echo(w, r, body)
	})
	p := ltProxy(t, b)
	c := proxytest.Dial(t, p.Addr())
	for i := range 20 {
		c.Send(fmt.Sprintf("GET http://svc/%d HTTP/1.1\r\nHost: svc\r\n\r\n", i))
		if resp := c.Expect("", 200, fmt.Sprintf("/%d:", i)); resp.Close {
			t.Fatalf("answer %d closes the client's connection", i)
		}
	}
	if hits, conns := b.Hits.Load(), b.Conns.Load(); hits != 20 || conns != 20 {
		t.Fatalf("backend received %d requests on %d connections, want 20 on 20", hits, conns)
	}
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != 20 {
		t.Fatalf("attempts %v, want 20 (none retried)", got)
	}
	ltWantEnd(t, p, nil)
}

// An upstream that closes the connection right after its answer without
// saying so (no "Connection: close"). The loop must not keep such a
// connection in its pool, whether the end arrives with the answer or
// after it: there the next request would fail on it (a POST without a key
// is not retried: 502). Before each request the test waits for the pool to
// be empty, so that a later end has been seen; an end that came with the
// answer must not leave the connection there.
func TestLoopUpstreamClosesWithoutSaying(t *testing.T) {
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		_ = buf.Flush()
		_ = c.Close()
	})
	p := ltProxy(t, b)
	if p.loops == nil {
		t.Skip("fasthttp's client reuses such a connection: every second request fails")
	}
	c := proxytest.Dial(t, p.Addr())
	for i := range 20 {
		proxytest.Eventually(t, "the upstream's closed connection out of the pool", func() bool { return ltIdleUpstreams(p) == 0 })
		c.Send(fmt.Sprintf("POST http://svc/%d HTTP/1.1\r\nHost: svc\r\nContent-Length: 2\r\n\r\nhi", i))
		c.Expect("", 200, "ok")
	}
	if hits, conns := b.Hits.Load(), b.Conns.Load(); hits != 20 || conns != 20 {
		t.Fatalf("backend received %d requests on %d connections, want 20 on 20", hits, conns)
	}
	ltWantEnd(t, p, nil)
}

// ltIdleUpstreams counts the upstream connections in the loops' pools
// (asked on each loop).
func ltIdleUpstreams(p *Proxy) int { return p.loops.IdleUpstreams() }

// An upstream reached by its DNS name (no --resolve): looked up off the
// loop; a name that does not resolve is a connect failure, retried, then
// exhausted.
func TestLoopUpstreamByName(t *testing.T) {
	t.Run("localhost", func(t *testing.T) {
		b := proxytest.NewBackend(t, nil)
		_, port, _ := net.SplitHostPort(b.Addr())
		p := startProxy(t, "--upstreams", "localhost=3", "--per-try-timeout", "2s")
		c := proxytest.Dial(t, p.Addr())
		for i := range 2 { // the second from the loop's DNS cache
			c.Send("GET http://localhost:" + port + "/dns HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n")
			c.Expect("", 200, "/dns:")
			ltWantHits(t, b, 0, int64(i+1))
		}
		ltWantEnd(t, p, nil)
	})
	t.Run("unresolvable", func(t *testing.T) {
		p := startProxy(t, "--upstreams", "nonexistent.invalid=3", "--per-try-timeout", "2s")
		c := proxytest.Dial(t, p.Addr())
		c.Send("GET http://nonexistent.invalid/ HTTP/1.1\r\nHost: nonexistent.invalid\r\n\r\n")
		resp, body := c.Answer("")
		const want = "retrycap-proxy: upstream nonexistent.invalid (nonexistent.invalid:80): 3 attempt(s), last failed with connect-failure ("
		if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != "attempts" || !strings.HasPrefix(body, want) {
			t.Fatalf("answer %d Retrycap-Exhausted %q body %q; want 503, attempts, %q...", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body, want)
		}
		if got := testutil.ToFloat64(p.upstreamByName("nonexistent.invalid").M.Attempts); got != 3 {
			t.Fatalf("attempts %v, want 3", got)
		}
		ltWantEnd(t, p, nil)
	})
}

// ltBlocking is a backend whose /block requests wait for release, each
// signalling on arrived first, and on gone if the proxy closes the
// connection before the release; other paths echo.
func ltBlocking(t *testing.T) (b *proxytest.Backend, arrived, gone chan struct{}, release func()) {
	arrived, gone = make(chan struct{}, 16), make(chan struct{}, 16)
	released := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	b = proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path == "/block" {
			arrived <- struct{}{}
			select {
			case <-released:
			case <-r.Context().Done():
				gone <- struct{}{}
				return
			}
		}
		proxytest.Echo(w, r, body)
	})
	return b, arrived, gone, release
}

// A client that leaves while its call is in flight: the call ends when
// its upstream answers (nothing leaks), and the proxy serves on.
func TestLoopClientGoneMidCall(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "closed", true: "reset"}[reset], func(t *testing.T) {
			b, arrived, _, release := ltBlocking(t)
			p := ltProxy(t, b)
			c := proxytest.Dial(t, p.Addr())
			c.Send("GET http://svc/block HTTP/1.1\r\nHost: svc\r\n\r\n")
			proxytest.Wait(t, arrived, "the request reaching the backend")
			if got := p.m.InFlight.Load(); got != 1 {
				t.Fatalf("in flight %d, want 1", got)
			}
			if reset {
				_ = c.C.(*net.TCPConn).SetLinger(0)
			}
			_ = c.C.Close()
			release()
			ltWantIdle(t, p)
			c2 := proxytest.Dial(t, p.Addr())
			c2.Send("GET http://svc/after HTTP/1.1\r\nHost: svc\r\n\r\n")
			c2.Expect("", 200, "/after:")
			ltWantHits(t, b, 0, 2)
			ltWantEnd(t, p, nil)
		})
	}
}

// A client that reads slowly (a 4 KiB receive buffer) while large answers
// are pipelined: the loop keeps what the socket does not take and sends
// it as the socket drains, answer after answer, in order.
func TestLoopSlowReader(t *testing.T) {
	b := ltBigAnswers(t)
	p := ltProxy(t, b)
	c := proxytest.DialSlowReader(t, p.Addr())
	const n = 200
	c.Send(strings.Repeat("GET http://svc/big HTTP/1.1\r\nHost: svc\r\n\r\n", n))
	if p.loops != nil {
		// Read nothing until an answer waits in the loop for the socket.
		proxytest.Eventually(t, "an answer waiting for the client's socket", func() bool { return ltPendingOutput(p) })
	}
	want := string(proxytest.Pattern(60 << 10))
	for range n {
		c.Expect("", 200, want)
	}
	ltWantHits(t, b, 0, n)
	ltWantEnd(t, p, nil)
}

// ltPendingOutput reports whether a client connection of the loops has
// answer bytes its socket did not take yet (asked on each loop).
func ltPendingOutput(p *Proxy) bool {
	return ltClientFlags(p, func(c loop.ClientState) bool { return c.Writing })
}

// Graceful drain: the request in flight is answered (closing its
// connection), then the listener refuses new connections.
func TestLoopGracefulDrain(t *testing.T) {
	b, arrived, _, release := ltBlocking(t)
	p := ltProxy(t, b)
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://svc/block HTTP/1.1\r\nHost: svc\r\n\r\n")
	proxytest.Wait(t, arrived, "the request reaching the backend")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Shutdown(ctx) }()
	// Once the listener refuses, every loop is draining.
	ltWaitListenerClosed(t, p)
	release()
	resp := c.Expect("", 200, "/block:")
	// (net/http reads "Connection: close" into Close, and drops the header.)
	if !resp.Close {
		t.Fatal("the answer in flight during the drain lacks Connection: close")
	}
	c.ExpectClosed()
	ltWantStopped(t, "Shutdown", stopped)
	if nc, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if nc != nil {
			_ = nc.Close()
		}
		t.Fatalf("a connection after Shutdown: %v, want refused", err)
	}
	ltWantHits(t, b, 0, 1)
	ltWantEnd(t, p, nil)
}

// A drain that runs out of time: the loops close what is left. The call
// in flight is abandoned (its client's connection closed without an
// answer, its upstream connection closed) and no longer counted in flight.
// (The goroutine engine leaves such a call to finish.)
func TestLoopDrainTimeout(t *testing.T) {
	b, arrived, gone, release := ltBlocking(t)
	p := ltProxy(t, b)
	if p.loops == nil {
		t.Skip("the event loop's drain")
	}
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://svc/block HTTP/1.1\r\nHost: svc\r\n\r\n")
	proxytest.Wait(t, arrived, "the request reaching the backend")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the deadline exceeded", err)
	}
	c.ExpectClosed()
	proxytest.Wait(t, gone, "the upstream connection closed")
	release()
	ltWantIdle(t, p)
	ltWantHits(t, b, 0, 1)
	ltWantHandoffs(t, p, nil)
}

// 200 clients at once, each on its own connection, 5 requests each.
func TestLoopManyClients(t *testing.T) {
	const clients, each = 200, 5
	b := proxytest.NewBackend(t, nil)
	p := ltProxy(t, b)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := proxytest.Client(p.Addr())
			defer c.Transport.(*http.Transport).CloseIdleConnections()
			for j := range each {
				path := fmt.Sprintf("/c%d/r%d", i, j)
				resp, err := c.Get("http://svc" + path)
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(body) != path+":" {
					errs <- fmt.Errorf("%s: %d %q %v", path, resp.StatusCode, body, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ltWantHits(t, b, 0, clients*each)
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != clients*each {
		t.Fatalf("attempts %v, want %d", got, clients*each)
	}
	ltWantEnd(t, p, nil)
}

// TestLoopShutdownTwice: a second Shutdown returns once the first drain has
// ended, without a deadline of its own.
func TestLoopShutdownTwice(t *testing.T) {
	p := startProxy(t, "--upstreams", "backend=3")
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("first shutdown: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(context.Background()) }()
	ltWantStopped(t, "second shutdown", done)
}

// A client that pipelines more than the loop reads ahead behind a request
// in flight, then shuts its side down (a half-close: it still reads):
// every request it sent is answered, in order, before the proxy closes the
// connection. The end of the client's stream arrives while the loop is not
// reading the socket; what waits there before that end must still be
// served.
func TestLoopHalfCloseAfterPipelineBeyondReadAhead(t *testing.T) {
	arrived, released := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path == "/block" {
			arrived <- struct{}{}
			<-released
		}
		fmt.Fprintf(w, "%s:%d", r.URL.Path, len(body))
	})
	p := ltProxy(t, b)
	c := proxytest.Dial(t, p.Addr())
	const n = 5
	body := string(proxytest.Pattern(30 << 10))
	all := ltPipeline("GET http://svc/block HTTP/1.1\r\nHost: svc\r\n\r\n", n, body)
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c.C, all)
		if err == nil {
			err = c.C.(*net.TCPConn).CloseWrite()
		}
		wrote <- err
	}()
	proxytest.Wait(t, arrived, "the first request reaching the backend")
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pipeline not written within 5s")
	}
	if p.loops != nil {
		// The loop has seen the end of the client's stream, with requests
		// left unread in the socket.
		proxytest.Eventually(t, "the client's end seen by the loop", func() bool { return ltClientFlags(p, func(c loop.ClientState) bool { return c.EOF && c.Unread }) })
	}
	release()
	c.Expect("", 200, "/block:0")
	for i := range n {
		c.Expect("", 200, fmt.Sprintf("/%d:%d", i, len(body)))
	}
	c.Expect("", 200, "/last:0")
	c.ExpectClosed()
	ltWantHits(t, b, 0, n+2)
	ltWantEnd(t, p, nil)
}

// ltClientFlags reports whether a client connection of the loops satisfies
// cond (asked on each loop).
func ltClientFlags(p *Proxy, cond func(c loop.ClientState) bool) bool {
	found := false
	for _, c := range p.loops.Clients() {
		found = found || cond(c)
	}
	return found
}

// ltSetClientSndbuf sets a small send buffer on every client connection
// the loops hold, so that an answer of some size waits in the loop for the
// socket; it returns how many connections it set.
func ltSetClientSndbuf(p *Proxy) int {
	n := 0
	for _, c := range p.loops.Clients() {
		if unixSetSndbuf(c.FD, 4096) == nil {
			n++
		}
	}
	return n
}

func unixSetSndbuf(fd, size int) error {
	return syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, size)
}

// A drain that starts while an answer is still being written (the client
// reads slowly): once that answer is out, the connection is closed (it is
// idle now, and the drain closes idle connections) and Shutdown returns; it
// is not left open until the idle timeout.
func TestLoopDrainWhileWriting(t *testing.T) {
	b := ltBigAnswers(t)
	p := ltProxy(t, b)
	c := proxytest.DialSlowReader(t, p.Addr())
	if p.loops != nil {
		proxytest.Eventually(t, "the client's connection on a loop", func() bool { return ltSetClientSndbuf(p) == 1 })
	}
	c.Send("GET http://svc/big HTTP/1.1\r\nHost: svc\r\n\r\n")
	if p.loops != nil {
		proxytest.Eventually(t, "the answer waiting for the client's socket", func() bool { return ltPendingOutput(p) })
	} else {
		// The goroutine engine: the request taken (forwarded) before the
		// drain, or it would still wait in the listener's backlog, which
		// a drain closes.
		proxytest.Eventually(t, "the request forwarded", func() bool { return b.Hits.Load() == 1 })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Shutdown(ctx) }()
	ltWaitListenerClosed(t, p)
	c.Expect("", 200, string(proxytest.Pattern(60<<10)))
	c.ExpectClosed()
	ltWantStopped(t, "Shutdown", stopped)
	ltWantHits(t, b, 0, 1)
	ltWantEnd(t, p, nil)
}

// An upstream that answers before it has read the whole request (an early
// 401 to a large upload, keep-alive): the request's bytes the loop had not
// sent yet must never be dropped on a connection that goes back to the
// pool; there the upstream would read the next request as the rest of the
// previous body. The upstream's small window and segments keep the proxy
// from sending a 64 KiB body at once.
func TestLoopEarlyAnswerBeforeRequestSent(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096); serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 88)
			}
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var seconds atomic.Int64        // /second requests read whole and intact
	answered := make(chan struct{}) // the client has the early answer
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					_ = c.SetDeadline(time.Now().Add(5 * time.Second))
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if r.URL.Path == "/first" {
						// Answered on reading the head; the body is read once
						// the client has that answer.
						_, _ = io.WriteString(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\nno")
						select {
						case <-answered:
						case <-time.After(5 * time.Second):
						}
					}
					body, err := io.ReadAll(r.Body)
					if err != nil {
						return
					}
					if r.URL.Path == "/second" {
						if string(body) == "hi" {
							seconds.Add(1)
						}
						_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
					}
				}
			}()
		}
	}()
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String(), "--per-try-timeout", "1s")
	c := proxytest.Dial(t, p.Addr())
	c.Send(fmt.Sprintf("POST http://svc/first HTTP/1.1\r\nHost: svc\r\nContent-Length: 65536\r\n\r\n%s", proxytest.Pattern(65536)))
	c.Expect("", 401, "no")
	close(answered)
	// Not retried (a POST without a key): it must reach the upstream as sent.
	c.Send("POST http://svc/second HTTP/1.1\r\nHost: svc\r\nContent-Length: 2\r\n\r\nhi")
	c.Expect("", 200, "second")
	if got := seconds.Load(); got != 1 {
		t.Fatalf("the upstream read /second %d times, want 1", got)
	}
	ltWantEnd(t, p, nil)
}

// TestLoopConnectionsDealtOut: connections opened in a burst are dealt out
// to the loops in turn, not kept by the loop that accepted them.
func TestLoopConnectionsDealtOut(t *testing.T) {
	if testEngineFor(t) != "loop" {
		t.Skip("the loops' own state")
	}
	b := newBackend(t, status(200))
	p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+b.addr())
	n := p.loops.NumLoops()
	if n < 2 {
		t.Skipf("%d loop (GOMAXPROCS=1): nothing to deal out", n)
	}
	conns := make([]net.Conn, 4*n)
	for i := range conns {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	// A request on each: answered only once its connection is on a loop.
	for i, c := range conns {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	per := make([]int, n)
	for _, c := range p.loops.Clients() {
		per[c.Loop]++
	}
	for i, c := range per {
		if c != 4 {
			t.Errorf("loop %d serves %d connections, want 4 (of %d over %d loops)", i, c, len(conns), n)
		}
	}
}

// TestLoopDrainDeadlineCutsStreams: when a drain runs out of time, answers
// still streaming from goroutines are cut too (client and upstream
// connections closed), not left to their 60 s idle timeout.
func TestLoopDrainDeadlineCutsStreams(t *testing.T) {
	if testEngineFor(t) != "loop" {
		t.Skip("the loop's streamed answers")
	}
	gone := make(chan struct{}, 1)
	b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		_, _ = io.WriteString(w, "first chunk\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never finishes on its own
		gone <- struct{}{}
	})
	p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+b.Addr())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET http://backend/stream HTTP/1.1\r\nHost: backend\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("first chunk\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first chunk\n" {
		t.Fatalf("first chunk %q, %v", first, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown: %v, want the deadline exceeded", err)
	}
	start := time.Now()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("the cut body read to a clean end")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the client's connection stayed open %v after the drain deadline", d)
	}
	proxytest.Wait(t, gone, "the upstream connection closed")
}

// ltBigAnswers is a backend answering 60 KiB of ltPattern to every request.
func ltBigAnswers(t *testing.T) *proxytest.Backend {
	return proxytest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Length", strconv.Itoa(60<<10))
		_, _ = w.Write(proxytest.Pattern(60 << 10))
	})
}
