package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/netpoll"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// cutBackend is a Go net/http backend whose /slow handlers wait for their
// request's context to end (the proxy closed the upstream connection) or
// for the test's release; it counts the handlers running, the requests
// whose context it saw cancelled and each request id's executions.
type cutBackend struct {
	*backend
	running, cancelled atomic.Int64
	release            chan struct{}
	mu                 sync.Mutex
	execs              map[string]int
}

func newCutBackend(t *testing.T, released bool, slow func(w http.ResponseWriter, r *http.Request)) *cutBackend {
	cb := &cutBackend{release: make(chan struct{}), execs: map[string]int{}}
	if released {
		// The handlers return once slow did (nothing waits in them).
		close(cb.release)
	} else {
		t.Cleanup(func() { close(cb.release) })
	}
	cb.backend = newBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		cb.mu.Lock()
		cb.execs[r.Header.Get("X-Id")]++
		cb.mu.Unlock()
		cb.running.Add(1)
		defer cb.running.Add(-1)
		if slow != nil {
			slow(w, r)
		}
		select {
		case <-r.Context().Done():
			cb.cancelled.Add(1)
		case <-cb.release:
		}
	})
	return cb
}

// TestClientGoneCutsUpstream (issues 25 and 29: no work after the caller
// gave up): 40 clients at once go away while their call runs, by a reset
// (RST) of their connection; the proxy closes each attempt's upstream
// connection at once, so that the Go backend sees every request's context
// cancelled long before the per-try timeout (60 s) or the streamed body's
// idle timeout (60 s) could have ended it: 0 handlers left running, 40
// cancellations, no retry sent, the calls ended, the next client 200.
//   - before the answer: keyless POSTs (each executed exactly once, never
//     re-sent), the client's socket closed with SO_LINGER 0; each attempt
//     is logged "cancelled"; again with a chunked body, which the loop
//     hands to the goroutine engine;
//   - mid-body: the answer's head and first chunk came, the client closes
//     with bytes unread (the kernel resets such a connection); the answer
//     was the upstream's success, logged 200;
//   - during the backoff: the upstream answered 503 Retry-After: 60, the
//     client resets while the proxy waits to retry: the retry is never
//     sent (the calls end at once, not 60 s later).
func TestClientGoneCutsUpstream(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name    string
		slow    func(w http.ResponseWriter, r *http.Request)
		request string
		// leave makes the client go once the backend runs all n requests.
		leave   func(t *testing.T, c net.Conn, br *bufio.Reader)
		logLine string // each gone call's access-log line has it
		errors  int    // "error":"cancelled" lines
		hits    int64  // requests the backend got for /slow
	}{
		{"reset before the answer", nil,
			"POST http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Id: %d\r\nContent-Length: 4\r\n\r\nbody",
			resetNow, `"status":0,`, n, n},
		// A chunked body: the loop hands the connection to the goroutine
		// engine, which serves the call (through the hand-off's wrappers).
		{"reset before the answer, chunked POST", nil,
			"POST http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Id: %d\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
			resetNow, `"status":0,`, n, n},
		{"reset mid-body", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "partial") // no length: chunked, the answer streams on both engines
			w.(http.Flusher).Flush()
		}, "GET http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Id: %d\r\n\r\n", closeWithBytesUnread, `"status":200,`, 0, n},
		{"reset during the backoff", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(503)
		}, "GET http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Id: %d\r\n\r\n", resetNow, `"status":503,`, 0, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// During the backoff the 503 returned at once: nothing runs in
			// the backend while the proxy waits.
			backoff := strings.Contains(tc.name, "backoff")
			b := newCutBackend(t, backoff, tc.slow)
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--per-try-timeout", "60s",
				"--retry-on", "reset,timeout,503", "--access-log", logPath)
			up := p.upstreamByName("svc")
			conns := make([]net.Conn, n)
			readers := make([]*bufio.Reader, n)
			for i := range conns {
				c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns[i], readers[i] = c, bufio.NewReader(c)
				if _, err := fmt.Fprintf(c, tc.request, i); err != nil {
					t.Fatal(err)
				}
			}
			if backoff {
				proxytest.Eventually(t, "every call waiting to retry", func() bool { return testutil.ToFloat64(up.M.Retries) == n })
			} else {
				proxytest.Eventually(t, "the backend runs all requests", func() bool { return b.running.Load() == n })
			}
			start := time.Now()
			var wg sync.WaitGroup
			for i, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tc.leave(t, c, readers[i])
				}()
			}
			wg.Wait()
			proxytest.Eventually(t, "every handler's context cancelled", func() bool {
				return backoff || b.running.Load() == 0 && b.cancelled.Load() == n
			})
			proxytest.Eventually(t, "no call in flight", func() bool { return p.m.InFlight.Load() == 0 })
			t.Logf("%s: %d clients gone; all their calls ended %v after", testEngineFor(t), n, time.Since(start).Round(time.Millisecond))
			if !backoff {
				if got := b.cancelled.Load(); got != n {
					t.Fatalf("%d handlers saw their request cancelled, want %d", got, n)
				}
			}
			if got := b.running.Load(); got != 0 {
				t.Fatalf("%d handlers still running, want 0", got)
			}
			proxytest.Eventually(t, "no client socket watched", func() bool { return netpoll.HangupsWatched() == 0 })
			k := &keepAliveClient{addr: p.Addr()}
			defer k.close()
			code, body, err := k.do("GET", "GET http://svc/ok HTTP/1.1\r\nHost: svc\r\n\r\n")
			if err != nil || code != 200 || body != "ok" {
				t.Fatalf("after %d clients gone: %d %q %v, want 200 \"ok\"", n, code, body, err)
			}
			b.mu.Lock()
			for i := range n {
				if got := b.execs[fmt.Sprint(i)]; got != 1 {
					t.Errorf("request %d executed %d times, want 1", i, got)
				}
			}
			b.mu.Unlock()
			if got := b.hits.Load(); got != tc.hits+1 {
				t.Fatalf("the backend got %d requests, want %d (no retry sent)", got, tc.hits+1)
			}
			wantRetries := 0.0
			if backoff {
				wantRetries = n // decided before the client went; none sent
			}
			if got := testutil.ToFloat64(up.M.Retries); got != wantRetries {
				t.Fatalf("%v retries, want %v", got, wantRetries)
			}
			if got := testutil.ToFloat64(up.M.Attempts); got != n+1 {
				t.Fatalf("%v attempts counted, want %d", got, n+1)
			}
			if err := p.accessLog.w.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			gone := 0
			for _, l := range lines {
				if strings.Contains(l, `"path":"/slow"`) && strings.Contains(l, tc.logLine) {
					gone++
				}
			}
			if len(lines) != n+1 || gone != n || strings.Count(string(data), `"error":"cancelled"`) != tc.errors {
				t.Fatalf("access log: %d lines, %d gone calls logged with %s, %d \"error\":\"cancelled\"; want %d, %d, %d:\n%s",
					len(lines), gone, tc.logLine, strings.Count(string(data), `"error":"cancelled"`), n+1, n, tc.errors, data)
			}
		})
	}
}

// resetNow closes c with SO_LINGER 0: the kernel sends a reset (a client
// that aborts, or is killed with its socket so set).
func resetNow(t *testing.T, c net.Conn, _ *bufio.Reader) {
	if err := c.(*net.TCPConn).SetLinger(0); err != nil {
		t.Error(err)
	}
	_ = c.Close()
}

// closeWithBytesUnread reads the answer's status line, then closes c while
// the rest of the answer waits unread in its socket: Linux then resets the
// connection (RFC 2525 2.17), as it does for a browser or an HTTP client
// that gives up on a body mid-transfer.
func closeWithBytesUnread(t *testing.T, c net.Conn, _ *bufio.Reader) {
	_ = c.SetReadDeadline(time.Now().Add(proxytest.Bound))
	status := make([]byte, len("HTTP/1.1 200"))
	if _, err := io.ReadFull(c, status); err != nil || string(status) != "HTTP/1.1 200" {
		t.Errorf("answer began %q (%v), want \"HTTP/1.1 200\"", status, err)
	}
	proxytest.Eventually(t, "bytes of the answer waiting unread", func() bool { return unreadBytes(c) > 0 })
	_ = c.Close()
}

// unreadBytes is how many bytes wait in c's receive queue (SIOCINQ).
func unreadBytes(c net.Conn) int {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }) //nolint:gosec // a descriptor
	return n
}

// TestHalfClosedClientGetsAnswer: a client that shuts down its write side
// after its request (a FIN: it still reads; some Connection: close clients
// do) is not a client gone: 20 of them at once, half-closed before the
// backend answers, each get their whole answer, byte for byte, a small one
// (of known length) and a large one that streams (chunked, 200 KiB): no
// handler cancelled, no "cancelled" in the access log.
func TestHalfClosedClientGetsAnswer(t *testing.T) {
	const n = 20
	for _, size := range []int{5, 200 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			want := proxytest.Pattern(size)
			var halfClosed atomic.Int64
			b := newCutBackend(t, true, func(w http.ResponseWriter, r *http.Request) {
				// Answer once every client has half-closed.
				for halfClosed.Load() < n {
					select {
					case <-r.Context().Done():
						return
					case <-time.After(time.Millisecond):
					}
				}
				if size < 100 {
					w.Header().Set("Content-Length", fmt.Sprint(size))
				}
				_, _ = w.Write(want)
			})
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--per-try-timeout", "60s", "--access-log", logPath)
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
					if err != nil {
						errs <- err
						return
					}
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
					if _, err := fmt.Fprintf(c, "GET http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Id: %d\r\n\r\n", i); err != nil {
						errs <- err
						return
					}
					if err := c.(*net.TCPConn).CloseWrite(); err != nil {
						errs <- err
						return
					}
					halfClosed.Add(1)
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						errs <- fmt.Errorf("client %d: %w", i, err)
						return
					}
					body, err := io.ReadAll(resp.Body)
					if err != nil || resp.StatusCode != 200 || string(body) != string(want) {
						errs <- fmt.Errorf("client %d: %d, %d bytes (%v), want 200 and the %d bytes sent", i, resp.StatusCode, len(body), err, size)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			proxytest.Eventually(t, "no call in flight", func() bool { return p.m.InFlight.Load() == 0 })
			if got := b.cancelled.Load(); got != 0 {
				t.Fatalf("%d handlers cancelled, want 0", got)
			}
			if got := b.hits.Load(); got != n {
				t.Fatalf("the backend got %d requests, want %d", got, n)
			}
			proxytest.Eventually(t, "no client socket watched", func() bool { return netpoll.HangupsWatched() == 0 })
			if err := p.accessLog.w.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(data), `"status":200,`); got != n || strings.Contains(string(data), `"error"`) {
				t.Fatalf("access log: %d answers 200, want %d, and no error:\n%s", got, n, data)
			}
		})
	}
}

// BenchmarkGoroutineForwardSocket is a request through the goroutine
// engine over a real client socket (one keep-alive connection, the
// deployed retry budget and breaker): the anchor for
// BenchmarkClientWatch, what watching each call's client adds to it.
func BenchmarkGoroutineForwardSocket(b *testing.B) {
	benchLoopRequests(b, []byte("GET http://backend/ HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 3\r\n\r\n"), "--engine", "goroutine")
}

// BenchmarkClientWatch is the hang-up watch of one call (begun and
// stopped on a live client socket), as the goroutine engine adds it to
// each call and the loop to each streamed answer.
func BenchmarkClientWatch(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rc, err := s.(*net.TCPConn).SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	fd := -1
	_ = rc.Control(func(f uintptr) { fd = int(f) }) //nolint:gosec // a descriptor
	var h nopHangup
	b.ReportAllocs()
	for b.Loop() {
		tok, err := netpoll.WatchHangup(fd, h)
		if err != nil {
			b.Fatal(err)
		}
		if !netpoll.StopHangup(tok) {
			b.Fatal("the watch of a live socket fired")
		}
	}
}

type nopHangup struct{}

func (nopHangup) Hungup() {}

// TestClientGoneMidBodyAfterFIN: 40 clients read an answer's head and
// first chunk, nothing left unread, and close (a FIN only, as a Go
// http.Client whose context ends mid-body does): the proxy cannot tell
// that from a half-close, so the stream goes on; the upstream's next bytes,
// passed on, draw each client's reset, and that cuts the upstream at once
// (before: it ran on until the next bytes after those, or the 60 s idle
// timeout, as the backend sends nothing more).
func TestClientGoneMidBodyAfterFIN(t *testing.T) {
	const n = 40
	more := make(chan struct{})
	b := newCutBackend(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-more:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "more")
		w.(http.Flusher).Flush()
	})
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--per-try-timeout", "60s")
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
			if _, err := fmt.Fprintf(c, "GET http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Id: %d\r\n\r\n", i); err != nil {
				errs <- err
				return
			}
			// The head and the first chunk, byte by byte: nothing read
			// beyond them.
			var got []byte
			one := make([]byte, 1)
			for !strings.HasSuffix(string(got), "\r\n7\r\npartial\r\n") {
				if _, err := c.Read(one); err != nil {
					errs <- fmt.Errorf("client %d: after %q: %w", i, got, err)
					return
				}
				got = append(got, one[0])
			}
			if u := unreadBytes(c); u != 0 {
				errs <- fmt.Errorf("client %d: %d bytes unread before the close, want 0 (a FIN only)", i, u)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// (That a FIN alone cuts nothing is TestHalfClosedClientGetsAnswer's.)
	close(more)
	proxytest.Eventually(t, "every handler's context cancelled", func() bool {
		return b.running.Load() == 0 && b.cancelled.Load() == n
	})
	proxytest.Eventually(t, "no call in flight", func() bool { return p.m.InFlight.Load() == 0 })
	proxytest.Eventually(t, "no client socket watched", func() bool { return netpoll.HangupsWatched() == 0 })
	k := &keepAliveClient{addr: p.Addr()}
	defer k.close()
	if code, body, err := k.do("GET", "GET http://svc/ok HTTP/1.1\r\nHost: svc\r\n\r\n"); err != nil || code != 200 || body != "ok" {
		t.Fatalf("after %d clients gone: %d %q %v, want 200 \"ok\"", n, code, body, err)
	}
	if got := b.hits.Load(); got != n+1 {
		t.Fatalf("the backend got %d requests, want %d", got, n+1)
	}
}
