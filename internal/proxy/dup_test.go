package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/policy"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Issue 25, part 1: a request that is not safe to repeat reaches the
// upstream at most once. The backend below reads each request whole (the
// app has it) and then, for some, resets the connection (SO_LINGER 0: a
// crash mid-request, a killed pod). Before the fix the proxy took such a
// reset on a pooled connection for a stale connection and re-sent the POST
// on a fresh one: executed twice.

// resetBackend is a raw-socket keep-alive upstream. Each request names an
// id in its path (/p/ID); the backend reads the whole request, counts an
// execution of that id, and then either answers 200 "ok ID" or, when
// reset(id), resets the connection without answering.
type resetBackend struct {
	ln    net.Listener
	reset func(id int) bool

	mu     sync.Mutex
	execs  map[int]int // executions per id
	resets atomic.Int64
	conns  *atomic.Int64 // connections accepted
}

func newResetBackend(t *testing.T, reset func(id int) bool) *resetBackend {
	t.Helper()
	b := &resetBackend{reset: reset, execs: map[int]int{}}
	b.ln, b.conns = proxytest.RawBackend(t, func(c *net.TCPConn) { b.serve(c) })
	return b
}

func (b *resetBackend) serve(c *net.TCPConn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		id, err := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/p/"))
		if err != nil {
			id = -1
		}
		b.mu.Lock()
		b.execs[id]++
		b.mu.Unlock()
		if b.reset(id) {
			b.resets.Add(1)
			_ = c.SetLinger(0) // close sends RST
			return
		}
		body := "ok " + strconv.Itoa(id)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
	}
}

func (b *resetBackend) executions() map[int]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int]int, len(b.execs))
	for k, v := range b.execs {
		out[k] = v
	}
	return out
}

// keepAliveClient sends requests through the proxy on one client
// connection, dialling a new one when the proxy closed the last.
type keepAliveClient struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
}

func (k *keepAliveClient) do(method, raw string) (int, string, error) {
	if k.c == nil {
		c, err := net.DialTimeout("tcp", k.addr, 5*time.Second)
		if err != nil {
			return 0, "", err
		}
		k.c, k.br = c, bufio.NewReader(c)
	}
	_ = k.c.SetDeadline(time.Now().Add(20 * time.Second))
	_, err := io.WriteString(k.c, raw)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(k.br, &http.Request{Method: method})
	}
	if err != nil {
		k.close()
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		k.close()
		return 0, "", err
	}
	if resp.Close {
		k.close()
	}
	return resp.StatusCode, string(body), nil
}

func (k *keepAliveClient) close() {
	if k.c != nil {
		_ = k.c.Close()
		k.c = nil
	}
}

// runKeylessPosts sends n keyless POSTs (ids 0..n-1) through the proxy,
// conc at a time, and returns the answer status per id.
func runKeylessPosts(t *testing.T, proxyAddr string, n, conc int) map[int]int {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := &keepAliveClient{addr: proxyAddr}
			defer k.close()
			for {
				id := int(next.Add(1)) - 1
				if id >= n {
					return
				}
				body := "order " + strconv.Itoa(id)
				raw := fmt.Sprintf("POST http://svc/p/%d HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\n\r\n%s", id, len(body), body)
				code, got, err := k.do("POST", raw)
				if err != nil {
					errs <- fmt.Errorf("POST %d: %w", id, err)
					return
				}
				if code == 200 && got != "ok "+strconv.Itoa(id) {
					errs <- fmt.Errorf("POST %d: 200 with body %q", id, got)
					return
				}
				mu.Lock()
				codes[id] = code
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return codes
}

// TestKeylessPostResetNotResent: 300 keyless POSTs, 20 at a time (and 60
// one at a time), to a backend that reads every request whole and resets
// the connection after every third. Each POST is executed exactly once;
// the reset ones are answered 502 (never re-sent, neither as a stale
// connection nor as a retry), the others 200.
func TestKeylessPostResetNotResent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, conc int
	}{{"concurrent", 300, 20}, {"sequential", 60, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newResetBackend(t, func(id int) bool { return id%3 == 0 })
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.ln.Addr().String())
			codes := runKeylessPosts(t, p.Addr(), tc.n, tc.conc)
			execs := b.executions()
			var dups, missing, got502, got200 int
			for id := range tc.n {
				switch e := execs[id]; {
				case e == 0:
					missing++
				case e > 1:
					dups++
					t.Errorf("POST %d executed %d times", id, e)
				}
				switch codes[id] {
				case 502:
					got502++
					if id%3 != 0 {
						t.Errorf("POST %d (not reset) answered 502", id)
					}
				case 200:
					got200++
					if id%3 == 0 {
						t.Errorf("POST %d (reset) answered 200", id)
					}
				default:
					t.Errorf("POST %d answered %d", id, codes[id])
				}
			}
			wantResets := (tc.n + 2) / 3
			t.Logf("%s: %d POSTs, %d executed twice or more, %d never, %d answered 502, %d answered 200, backend resets %d, connections %d, stale re-sends %v",
				tc.name, tc.n, dups, missing, got502, got200, b.resets.Load(), b.conns.Load(), testutil.ToFloat64(p.m.StaleResends))
			if dups != 0 || missing != 0 || len(execs) != tc.n {
				t.Fatalf("%d POSTs executed more than once, %d never, %d ids seen; want each of %d exactly once", dups, missing, len(execs), tc.n)
			}
			if got502 != wantResets || got200 != tc.n-wantResets || b.resets.Load() != int64(wantResets) {
				t.Fatalf("%d answered 502 and %d 200, backend reset %d; want %d, %d, %d", got502, got200, b.resets.Load(), wantResets, tc.n-wantResets, wantResets)
			}
			if got := testutil.ToFloat64(p.m.StaleResends); got != 0 {
				t.Fatalf("%v stale re-sends, want 0 (the backend never closes an idle connection)", got)
			}
			if got := testutil.ToFloat64(p.upstreamByName("svc").M.Retries); got != 0 {
				t.Fatalf("%v retries, want 0 (a keyless POST is not retryable)", got)
			}
		})
	}
}

// TestClientCancelNotUpstreamFailure (issue 25, part 4): 60 clients send a
// request to an upstream that is slow but healthy, and go away while it
// runs (a user who gave up): raw sockets closed before the answer came
// (the attempt then ends at the per-try timeout), or net/http clients
// cancelling their context mid-response, after the headers and the first
// body bytes. Their cancellations are not the upstream's failures
// (policy.Judge, the rule the h2 relay applies too): the breaker (5
// failures open it) stays closed, nothing is retried or denied, each
// attempt is counted once and logged once ("error":"cancelled" when it
// failed, its 200 when the answer had come), and the next client gets 200
// (HAProxy and nginx do the same; before the fix: 503 "circuit breaker
// open").
func TestClientCancelNotUpstreamFailure(t *testing.T) {
	const n = 60
	for _, tc := range []struct {
		name     string
		cancel   func(t *testing.T, p *Proxy, started func() bool)
		logLine  string // each cancelled call's access-log line has it
		answered bool   // the answer's head had come when the client went (judged 200, not cancelled)
	}{
		{"closed before the answer", cancelBeforeAnswer, `"status":0,`, false},
		{"cancelled mid-response", cancelMidResponse, `"status":200,`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var running atomic.Int64
			release := make(chan struct{})
			b := newBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					running.Add(1)
					if tc.answered {
						// Chunked (no length): the answer streams, on both engines.
						_, _ = io.WriteString(w, "partial")
						w.(http.Flusher).Flush()
					}
					select {
					// The proxy closed the upstream connection (before the
					// answer: at the per-try timeout; mid-response: only when
					// the streamed body's next bytes find the client gone, or
					// after forward.BodyIdleTimeout).
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				_, _ = io.WriteString(w, "ok")
			})
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) })
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--breaker-failures", "5",
				"--breaker-open-for", "1m", "--per-try-timeout", "500ms", "--access-log", logPath)
			tc.cancel(t, p, func() bool { return running.Load() == n })
			// Every cancelled call has ended in the proxy (the goroutine
			// engine notices only when its attempt ends, after the per-try
			// timeout).
			proxytest.Eventually(t, "no call in flight", func() bool { return p.m.InFlight.Load() == 0 })
			up := p.upstreamByName("svc")
			c := &keepAliveClient{addr: p.Addr()}
			defer c.close()
			code, body, err := c.do("GET", "GET http://svc/ok HTTP/1.1\r\nHost: svc\r\n\r\n")
			if err != nil || code != 200 || body != "ok" {
				t.Fatalf("after %d cancelled calls: %d %q %v, want 200 \"ok\"", n, code, body, err)
			}
			if st := up.Breaker.State(forward.NowNanos()); st != policy.BreakerClosed {
				t.Fatalf("breaker %v, want closed", st)
			}
			if got := b.hits.Load(); got != n+1 {
				t.Fatalf("the backend got %d requests, want %d (a cancelled call is not retried)", got, n+1)
			}
			if got := testutil.ToFloat64(up.M.Attempts); got != n+1 {
				t.Fatalf("%v attempts counted, want %d", got, n+1)
			}
			if got := testutil.ToFloat64(up.M.Retries); got != 0 {
				t.Fatalf("%v retries, want 0", got)
			}
			for r, m := range up.M.Denied {
				if m == nil { // ReasonNone has no series
					continue
				}
				if got := testutil.ToFloat64(m); got != 0 {
					t.Fatalf("%v retries denied for %s, want 0 (a cancelled call asks for no retry)", got, policy.Reason(r))
				}
			}
			if tc.answered {
				// A streamed answer's line is written when its body ends (the client's reset
				// ends it at once; a FIN does not): the backend ends the bodies, and the proxy
				// writes them to clients that are gone.
				releaseOnce.Do(func() { close(release) })
				proxytest.Eventually(t, "every line written", func() bool { return p.accessLog.w.Written() >= n+1 })
			}
			if err := p.accessLog.w.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), `"cut":"upstream"`) {
				t.Errorf("a cancelled call's body logged as cut by the upstream:\n%s", data)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			cancelled, ok := 0, 0
			for _, l := range lines {
				switch {
				case strings.Contains(l, `"path":"/slow"`) && strings.Contains(l, tc.logLine) && !strings.Contains(l, "exhausted"):
					cancelled++
				case strings.Contains(l, `"path":"/ok"`) && strings.Contains(l, `"status":200,`) && !strings.Contains(l, `"error"`):
					ok++
				}
			}
			wantErr := 0
			if !tc.answered {
				wantErr = n
			}
			if len(lines) != n+1 || cancelled != n || ok != 1 || strings.Count(string(data), `"error":"cancelled"`) != wantErr ||
				strings.Count(string(data), `"error"`) != wantErr {
				t.Fatalf("access log: %d lines, %d cancelled calls logged as %s, %d healthy; want %d, %d, 1, and %d \"error\":\"cancelled\":\n%s",
					len(lines), cancelled, tc.logLine, ok, n+1, n, wantErr, data)
			}
		})
	}
}

// cancelBeforeAnswer: 60 raw connections each send a request and, once
// the backend runs all of them, close (no answer came yet).
func cancelBeforeAnswer(t *testing.T, p *Proxy, started func() bool) {
	conns := make([]net.Conn, 60)
	for i := range conns {
		c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		if _, err := fmt.Fprintf(c, "GET http://svc/slow HTTP/1.1\r\nHost: svc\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	proxytest.Eventually(t, "the backend runs all 60 requests", started)
	for _, c := range conns {
		_ = c.Close()
	}
}

// cancelMidResponse: 60 net/http clients at once, each reading the
// answer's headers and first body bytes ("partial", the first chunk),
// then cancelling its request's context (the transport closes the
// connection), as a user closing a page mid-load.
func cancelMidResponse(t *testing.T, p *Proxy, started func() bool) {
	hc := clientFor(p)
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "GET", "http://svc/slow", nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, len("partial"))
			if _, err := io.ReadFull(resp.Body, buf); err != nil || resp.StatusCode != 200 || string(buf) != "partial" {
				errs <- fmt.Errorf("answer %d %q %v, want 200 \"partial\"", resp.StatusCode, buf, err)
				return
			}
			cancel()
			if _, err := io.ReadAll(resp.Body); err == nil {
				errs <- fmt.Errorf("the body read on after the cancel")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !started() {
		t.Fatal("the backend does not run all 60 requests")
	}
}
