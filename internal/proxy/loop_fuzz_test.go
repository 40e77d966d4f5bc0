//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/engine/loop"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Fuzz tests of the event loop's input handling: whatever bytes a client
// or an upstream sends, no loop may panic (that would end the sidecar) or
// wedge. Each input runs against one proxy started for the whole fuzz
// target; after it, the proxy must still answer a well-formed request on
// every loop, and no call may stay in flight. The seeds run as ordinary
// tests under `go test`; `go test -run '^$' -fuzz '^FuzzLoopClientBytes$'
// ./internal/proxy` (or FuzzLoopUpstreamBytes) fuzzes.

// fzGoodBackend is a loopback HTTP server that reads each request's body
// and answers 200 "ok".
func fzGoodBackend(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// fzServes checks that the proxy answers a well-formed request to host
// with 200 within 2 seconds, on each of its loops (accepted connections
// are dealt out to the loops in turn).
func fzServes(t *testing.T, p *Proxy, host string) {
	t.Helper()
	n := 1
	if p.loops != nil {
		n = p.loops.NumLoops()
	}
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
		if err != nil {
			t.Fatalf("the proxy no longer accepts: %v", err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = io.WriteString(c, "GET http://"+host+"/fz-check HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(bufio.NewReader(c), nil)
		}
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		_ = c.Close()
		if err != nil {
			t.Fatalf("the proxy no longer serves (connection %d): %v", i, err)
		}
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("the proxy no longer serves (connection %d): %d %q", i, resp.StatusCode, body)
		}
	}
}

// fzWantIdle polls until no call is in flight, for at most 5 seconds (a
// request handed off to an unknown host may take its 2s per-try timeout).
func fzWantIdle(t *testing.T, p *Proxy) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.m.InFlight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still in flight after 5s", p.m.InFlight.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// fzPieces cuts b into pieces for the seed's chunking: bits 2-3 zero, one
// write; else random cuts (the rest of the seed drives them), at most 16.
func fzPieces(b []byte, seed uint64) [][]byte {
	if seed>>2&3 == 0 || len(b) < 2 {
		return [][]byte{b}
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed)) //nolint:gosec // test chunking, not crypto
	var out [][]byte
	for len(b) > 0 {
		if len(out) == 15 {
			out = append(out, b)
			break
		}
		n := 1 + r.IntN(len(b))
		if r.IntN(3) == 0 {
			n = 1 + r.IntN(min(len(b), 8)) // small pieces split lines and CRLFs
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// The client's bytes: requests of every shape, and garbage.
var fzClientSeeds = []string{
	"GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: backend\r\n\r\n",
	"GET /a?b=c HTTP/1.1\r\nHost: backend:80\r\nConnection: close\r\n\r\n",
	"HEAD http://backend/h HTTP/1.1\r\nHost: backend\r\n\r\n",
	"POST http://backend/p HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nhello",
	"PUT http://backend/p HTTP/1.1\r\nHost: backend\r\nContent-Length: 10\r\n\r\nshort",
	"GET http://backend/1 HTTP/1.1\r\nHost: backend\r\n\r\nGET http://backend/2 HTTP/1.1\r\nHost: backend\r\n\r\n",
	"POST http://backend/1 HTTP/1.1\r\nHost: backend\r\nContent-Length: 3\r\n\r\nabcGET http://backend/2 HTTP/1.1\r\nHost: backend\r\n\r\n",
	"POST http://backend/c HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST http://backend/c HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n",
	"POST http://backend/e HTTP/1.1\r\nHost: backend\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody",
	"GET http://backend/ HTTP/1.0\r\n\r\n",
	"GET http://backend/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n",
	"CONNECT backend:80 HTTP/1.1\r\nHost: backend:80\r\n\r\nGET / HTTP/1.1\r\nHost: backend\r\n\r\n",
	"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n",
	"GET http://backend/ws HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
	"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nX-Big: " + strings.Repeat("x", 9000) + "\r\n\r\n",
	"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nX-Big: " + strings.Repeat("y", 20000),
	"GET http://backend/lf HTTP/1.1\nHost: backend\n\n",
	"GET http://backend/lf HTTP/1.1\nHost: backend\r\n\nGET http://backend/lf2 HTTP/1.1\r\nHost: backend\n\r\n",
	"GET http://backend/fold HTTP/1.1\r\nHost: backend\r\nX-Fold: a\r\n b\r\n\r\n",
	"POST http://backend/cl HTTP/1.1\r\nHost: backend\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
	"POST http://backend/cl HTTP/1.1\r\nHost: backend\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST http://backend/clte HTTP/1.1\r\nHost: backend\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST http://backend/neg HTTP/1.1\r\nHost: backend\r\nContent-Length: -1\r\n\r\n",
	"POST http://backend/huge HTTP/1.1\r\nHost: backend\r\nContent-Length: 99999999999999999999\r\n\r\n",
	"POST http://backend/big HTTP/1.1\r\nHost: backend\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("b", 1000),
	"GET https://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n",
	"GET http://nosuch.invalid/ HTTP/1.1\r\nHost: nosuch.invalid\r\n\r\n",
	"GET http://backend/ HTTP/1.1\r\nHost: other\r\n\r\n",
	"GET http://:80/ HTTP/1.1\r\n\r\n",
	"GET HTTP/1.1\r\n\r\n",
	"\r\n\r\nGET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n",
	"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nX: \x00\x7f\xff\r\n\r\n",
	"GET http://backend/ HTTP/9.9\r\nHost: backend\r\n\r\n",
	" GET / HTTP/1.1\r\n\r\n",
	"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
	"\n\n\n\n",
	"\r\n",
	"",
}

// FuzzLoopClientBytes writes arbitrary bytes to the proxy, in pieces, then
// checks that it still serves. seed: bit 0, half-close the write side
// after the last piece; bit 1, pause a millisecond between pieces; bits
// 2-3 zero, one write; the rest drives the cuts.
func FuzzLoopClientBytes(f *testing.F) {
	backend := fzGoodBackend(f)
	p := startProxy(f, "--upstreams", "backend=3", "--resolve", "backend="+backend, "--per-try-timeout", "2s")
	for i, s := range fzClientSeeds {
		f.Add([]byte(s), uint64(1))
		if i%4 == 0 {
			f.Add([]byte(s), uint64(i)<<4|0b1111)
		}
	}
	f.Add([]byte(fzClientSeeds[0]), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		if len(data) > 256<<10 {
			data = data[:256<<10]
		}
		c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		// Read all along: a proxy that answers what it reads must not
		// stall on a client that does not read.
		got := make(chan int, 1)
		go func() {
			n, _ := io.Copy(io.Discard, c)
			got <- int(n)
		}()
		for _, piece := range fzPieces(data, seed) {
			if _, err := c.Write(piece); err != nil {
				break // closed by the proxy (an answered error)
			}
			if seed&2 != 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if seed&1 != 0 {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		<-got
		_ = c.Close()
		fzServes(t, p, "backend")
		fzWantIdle(t, p)
	})
}

// fzRawBackend answers each request head it reads with the bytes of the
// input being run.
type fzRawBackend struct {
	ln    net.Listener
	mu    sync.Mutex
	resp  []byte
	seed  uint64
	conns map[net.Conn]struct{}
}

func newFzRawBackend(tb testing.TB) *fzRawBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &fzRawBackend{ln: ln, conns: map[net.Conn]struct{}{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns[c] = struct{}{}
			b.mu.Unlock()
			go b.serve(c)
		}
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		b.reset()
	})
	return b
}

// set makes resp (and seed) the answer to the next requests.
func (b *fzRawBackend) set(resp []byte, seed uint64) {
	b.mu.Lock()
	b.resp, b.seed = resp, seed
	b.mu.Unlock()
}

// reset closes every connection, so that nothing of an input outlives it
// (a pooled connection, a body being streamed).
func (b *fzRawBackend) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		_ = c.Close()
		delete(b.conns, c)
	}
}

func (b *fzRawBackend) serve(c net.Conn) {
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		_ = c.Close()
	}()
	br := bufio.NewReader(c)
	for {
		// The request head (the proxy forwards a GET or HEAD, no body).
		size := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			size += len(line)
			if size > 64<<10 {
				return
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		b.mu.Lock()
		resp, seed := b.resp, b.seed
		b.mu.Unlock()
		for _, piece := range fzPieces(resp, seed) {
			if _, err := c.Write(piece); err != nil {
				return
			}
			if seed&2 != 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if seed&1 != 0 {
			return
		}
	}
}

// The upstream's bytes: answers of every shape, and garbage.
var fzUpstreamSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\nzz\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: t\r\n\r\n",
	"HTTP/1.1 200 OK\r\n\r\nclose-delimited body",
	"HTTP/1.0 200 OK\r\n\r\nold",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 120) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nraw",
	"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 304 Not Modified\r\n\r\nbody",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("x", 9000) + "\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("y", 20000),
	"HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("b", 70000),
	"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokTRAILING GARBAGE",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 200 OK\r\nX-Fold: a\r\n b\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 2000 OK\r\n\r\n",
	"HTTP/1.1 abc OK\r\n\r\n",
	"HTTP/1.1 0 Zero\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
	"HTTP/2 200\r\n\r\n",
	"SSH-2.0-OpenSSH\r\n",
	"\r\n\r\n",
	"HTTP/1.1 200 OK\r\n\x00: \xff\r\n\r\n",
	"",
}

// FuzzLoopUpstreamBytes makes an upstream answer a GET (or HEAD) with
// arbitrary bytes, in pieces, and checks that the client gets an answer or
// a clean close in bounded time, and that the proxy still serves. seed: bit
// 0, the upstream closes the connection after its bytes; bit 1, pause a
// millisecond between pieces; bits 2-3 zero, one write; bit 4, HEAD; the
// rest drives the cuts.
func FuzzLoopUpstreamBytes(f *testing.F) {
	raw := newFzRawBackend(f)
	good := fzGoodBackend(f)
	p := startProxy(f, "--upstreams", "backend=2,good=1", "--resolve", "backend="+raw.ln.Addr().String()+",good="+good,
		"--per-try-timeout", "300ms", "--retry-on", "connect-failure,reset,timeout,5xx")
	for i, s := range fzUpstreamSeeds {
		f.Add([]byte(s), uint64(1))
		if i%3 == 0 {
			f.Add([]byte(s), uint64(i)<<5|0b11111)
		}
	}
	f.Add([]byte(fzUpstreamSeeds[0]), uint64(0))
	f.Add([]byte(fzUpstreamSeeds[6]), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		if len(data) > 256<<10 {
			data = data[:256<<10]
		}
		raw.set(data, seed)
		defer raw.reset()
		method := "GET"
		if seed&16 != 0 {
			method = "HEAD"
		}
		c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Two attempts of 300ms and a backoff: an answer within 2s.
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, method+" http://backend/fz HTTP/1.1\r\nHost: backend\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
		var ne net.Error
		switch {
		case err == nil:
			// A body the upstream never ends streams until its idle
			// timeout: read what comes for a while.
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("no answer and no close within 2s: %v", err)
		}
		_ = c.Close()
		raw.reset()
		fzServes(t, p, "good")
		fzWantIdle(t, p)
	})
}

// A request whose bytes fill the loop's 64 KiB read buffer exactly (here a
// POST written at once, or its first bytes and then 65536 more) is
// answered: the loop kept a full read's bytes and read on, and when the
// socket then had nothing more it returned without serving them, leaving
// the request unanswered until the client sent more or closed.
func TestLoopRequestFillsReadBuffer(t *testing.T) {
	backend := fzGoodBackend(t)
	p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+backend)
	for _, first := range []int{0, 100} {
		head := "POST http://backend/fill HTTP/1.1\r\nHost: backend\r\nContent-Length: %06d\r\n\r\n"
		n := first + loop.ReadBufferSize - len(fmt.Sprintf(head, 0))
		req := fmt.Sprintf(head, n) + strings.Repeat("a", n)
		for i := 0; i < 5; i++ {
			c := proxytest.Dial(t, p.Addr())
			if first > 0 {
				c.Send(req[:first])
				time.Sleep(10 * time.Millisecond)
			}
			c.Send(req[first:])
			c.Expect("POST", 200, "ok")
			_ = c.C.Close()
		}
	}
	fzWantIdle(t, p)
}

// An interim answer (1xx) that ends the bytes read so far, after a read
// that left part of the response kept, is skipped: the loop panicked
// taking the address of the first of no bytes left to keep.
func TestLoopInterimEndsRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				for _, piece := range []string{"HTTP/1.1 100 Cont", "inue\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"} {
					_, _ = io.WriteString(c, piece)
					time.Sleep(20 * time.Millisecond)
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	p := startProxy(t, "--upstreams", "backend=1", "--resolve", "backend="+ln.Addr().String())
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://backend/interim HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "ok")
	fzWantIdle(t, p)
}
