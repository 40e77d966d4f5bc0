package proxy

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// backend is a loopback HTTP server whose behaviour a test sets per request
// number, and which counts and records what it received.
type backend struct {
	t       *testing.T
	ln      net.Listener
	srv     *http.Server
	hits    atomic.Int64
	mu      sync.Mutex
	budgets []string
	keys    []string
	bags    []string
	// behave answers request number n (1-based); it may hijack.
	behave func(n int64, w http.ResponseWriter, r *http.Request)
}

func newBackend(t *testing.T, behave func(n int64, w http.ResponseWriter, r *http.Request)) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{t: t, ln: ln, behave: behave}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.hits.Add(1)
		b.mu.Lock()
		b.budgets = append(b.budgets, r.Header.Get("Retrycap-Budget"))
		b.keys = append(b.keys, r.Header.Get("Idempotency-Key"))
		b.bags = append(b.bags, r.Header.Get("Baggage"))
		b.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		b.behave(n, w, r)
	})}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Close() })
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }

func status(code int) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// failFirst answers code to the first k requests, then 200.
func failFirst(k int64, code int) func(int64, http.ResponseWriter, *http.Request) {
	return func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n <= k {
			w.WriteHeader(code)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

// testEngine is the engine startProxy's proxies use: `make test` runs the
// package once with each (go test ./internal/proxy -args -engine=goroutine;
// that run is limited to the tests that can reach this variable, see
// EngineRun). Read it through testEngineFor(t).
var testEngine = flag.String("engine", "loop", "retrycap-proxy --engine for in-process proxies: loop or goroutine")

// startProxy runs an in-process proxy on loopback with fast backoff (for a
// test, a benchmark or a fuzz target).
func startProxy(t testing.TB, args ...string) *Proxy {
	t.Helper()
	return startProxyOn(t, testEngineFor(t), args...)
}

// startProxyOn is startProxy on the given engine: a test that names its
// engine does not read the -engine flag, so the -engine=goroutine run
// (EngineRun) need not repeat it.
func startProxyOn(t testing.TB, engine string, args ...string) *Proxy {
	t.Helper()
	base := []string{"--engine", engine, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--backoff-base", "1ms", "--backoff-max", "5ms",
		"--per-try-timeout", "2s", "--breaker-failures", "0", "--budget-percent", "100", "--budget-min-per-second", "1000"}
	cfg, err := ParseFlags(append(base, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(t.Context()) })
	return p
}

func clientFor(p *Proxy) *http.Client {
	u, _ := url.Parse("http://" + p.Addr())
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
}

func do(t *testing.T, c *http.Client, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (p *Proxy) upstreamByName(name string) *forward.Upstream {
	for _, u := range p.fw.Upstreams {
		if u.Name == name {
			return u
		}
	}
	return p.fw.Unknown
}

func TestAttemptsPerFault(t *testing.T) {
	closedAddr := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		a := ln.Addr().String()
		ln.Close()
		return a
	}
	resetMid := func(_ int64, w http.ResponseWriter, _ *http.Request) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
		_ = buf.Flush()
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := func(_ int64, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	cases := []struct {
		name      string
		behave    func(int64, http.ResponseWriter, *http.Request)
		refused   bool
		args      []string
		method    string
		hdr       map[string]string
		wantHits  int64 // -1: not countable (refused)
		wantCode  int
		exhausted string
		attempts  float64
	}{
		{name: "503 burst shorter than attempts", behave: failFirst(2, 503), wantHits: 3, wantCode: 200, attempts: 3},
		{name: "503 burst longer than attempts", behave: failFirst(10, 503), wantHits: 3, wantCode: 503, exhausted: "attempts", attempts: 3},
		{name: "connection refused", refused: true, wantHits: -1, wantCode: 503, exhausted: "attempts", attempts: 3},
		{name: "reset mid-response", behave: resetMid, wantHits: 3, wantCode: 503, exhausted: "attempts", attempts: 3},
		{name: "hang past per-try timeout", behave: hang, args: []string{"--per-try-timeout", "100ms", "--retry-on", "timeout,503"},
			wantHits: 3, wantCode: 503, exhausted: "attempts", attempts: 3},
		{name: "hang, timeout not retryable", behave: hang, args: []string{"--per-try-timeout", "100ms"}, wantHits: 1, wantCode: 504, attempts: 1},
		{name: "429 Retry-After 0 honoured", behave: func(n int64, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(429)
				return
			}
			_, _ = io.WriteString(w, "ok")
		}, args: []string{"--retry-on", "429,503"}, wantHits: 2, wantCode: 200, attempts: 2},
		{name: "429 Retry-After past the deadline", behave: func(n int64, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(429)
		}, args: []string{"--retry-on", "429,503"}, wantHits: 1, wantCode: 429, attempts: 1},
		{name: "500 not retryable", behave: status(500), wantHits: 1, wantCode: 500, attempts: 1},
		{name: "404 not retryable", behave: status(404), wantHits: 1, wantCode: 404, attempts: 1},
		{name: "exhausted from below not retried", behave: func(_ int64, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retrycap-Exhausted", "attempts")
			w.WriteHeader(503)
		}, wantHits: 1, wantCode: 503, exhausted: "attempts", attempts: 1},
		{name: "POST without key sent once", behave: status(503), method: "POST", wantHits: 1, wantCode: 503, attempts: 1},
		{name: "POST with key retried", behave: status(503), method: "POST", hdr: map[string]string{"Idempotency-Key": "k1"},
			wantHits: 3, wantCode: 503, exhausted: "attempts", attempts: 3},
		// A key an entry proxy generated (an app propagating Idempotency-Key
		// passes it down) is no promise of idempotency: sent once.
		{name: "POST with a generated key sent once", behave: status(503), method: "POST",
			hdr: map[string]string{"Idempotency-Key": "retrycap-gen-00112233445566778899aabbccddeeff"}, wantHits: 1, wantCode: 503, attempts: 1},
		{name: "PATCH with a generated key in upper case sent once", behave: status(503), method: "PATCH",
			hdr: map[string]string{"Idempotency-Key": "RETRYCAP-GEN-1"}, wantHits: 1, wantCode: 503, attempts: 1},
		{name: "GET with a generated key retried (the method allows it)", behave: status(503), method: "GET",
			hdr: map[string]string{"Idempotency-Key": "retrycap-gen-1"}, wantHits: 3, wantCode: 503, exhausted: "attempts", attempts: 3},
		{name: "body over max-replay-bytes sent once", behave: status(503), method: "PUT", args: []string{"--max-replay-bytes", "2"},
			wantHits: 1, wantCode: 503, attempts: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var addr string
			var b *backend
			if c.refused {
				addr = closedAddr()
			} else {
				b = newBackend(t, c.behave)
				addr = b.addr()
			}
			p := startProxy(t, append([]string{"--upstreams", "svc=3", "--resolve", "svc=" + addr}, c.args...)...)
			method := c.method
			if method == "" {
				method = "GET"
			}
			resp := do(t, clientFor(p), method, "http://svc/x", c.hdr)
			if resp.StatusCode != c.wantCode {
				t.Errorf("status %d want %d", resp.StatusCode, c.wantCode)
			}
			if got := resp.Header.Get("Retrycap-Exhausted"); got != c.exhausted {
				t.Errorf("Retrycap-Exhausted %q want %q", got, c.exhausted)
			}
			if b != nil && b.hits.Load() != c.wantHits {
				t.Errorf("backend received %d requests, want %d", b.hits.Load(), c.wantHits)
			}
			if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != c.attempts {
				t.Errorf("attempts metric %v want %v", got, c.attempts)
			}
		})
	}
}

func TestEntrypointGeneratesKey(t *testing.T) {
	b := newBackend(t, status(503))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--entrypoint", "--chain-cap", "4")
	c := clientFor(p)
	resp := do(t, c, "POST", "http://svc/pay", nil)
	key := resp.Header.Get("Idempotency-Key")
	if resp.StatusCode != 503 || key == "" {
		t.Fatalf("status %d key %q", resp.StatusCode, key)
	}
	if b.hits.Load() != 1 || b.keys[0] != key {
		t.Fatalf("hits %d, backend saw key %q, returned %q", b.hits.Load(), b.keys[0], key)
	}
	if !strings.HasPrefix(key, "retrycap-gen-") || len(key) != len("retrycap-gen-")+32 {
		t.Fatalf("generated key %q: want retrycap-gen- and 32 hex digits", key)
	}
	// The first call reserved 2 of the cap for the client's retries: it
	// forwarded budget 2. The client's retry with the key gets what is
	// left (2) in one attempt: a generated key does not make the POST
	// retryable (the app never said it is idempotent); after that nothing
	// is left.
	if b.budgets[0] != "2" {
		t.Fatalf("first call forwarded budget %q, want 2", b.budgets[0])
	}
	resp = do(t, c, "POST", "http://svc/pay", map[string]string{"Idempotency-Key": key})
	if resp.StatusCode != 503 || b.hits.Load() != 2 {
		t.Fatalf("retry with key: status %d hits %d, want 503 and 2", resp.StatusCode, b.hits.Load())
	}
	if got := strings.Join(b.budgets[1:], ","); got != "2" {
		t.Fatalf("retry budgets %s, want 2", got)
	}
	resp = do(t, c, "POST", "http://svc/pay", map[string]string{"Idempotency-Key": key})
	if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != "chain" || b.hits.Load() != 2 {
		t.Fatalf("spent key: status %d exhausted %q hits %d", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), b.hits.Load())
	}
}

func TestChainBudgetHeaders(t *testing.T) {
	b := newBackend(t, status(503))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--chain-cap", "4")
	c := clientFor(p)
	do(t, c, "GET", "http://svc/", nil) // absent: the cap, split 2,1,1
	do(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Budget": "2"})
	do(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Budget": "999"}) // spoofed: clamped to 4
	do(t, c, "GET", "http://svc/", map[string]string{"Baggage": "a=1, retrycap-budget=1;x, b=2"})
	got := strings.Join(b.budgets, ",")
	if want := "2,1,1,1,1,2,1,1,1"; got != want {
		t.Fatalf("budgets forwarded %s, want %s", got, want)
	}
	if last := b.bags[len(b.bags)-1]; last != "a=1,retrycap-budget=1,b=2" {
		t.Fatalf("baggage forwarded %q", last)
	}
	// With the chain cap off, the header passes untouched and attempts are per hop.
	b2 := newBackend(t, status(503))
	p2 := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b2.addr())
	do(t, clientFor(p2), "GET", "http://svc/", map[string]string{"Retrycap-Budget": "1"})
	if b2.hits.Load() != 3 {
		t.Fatalf("chain cap off: %d hits, want 3", b2.hits.Load())
	}
	resp := do(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Budget": "1"})
	if resp.Header.Get("Retrycap-Exhausted") != "chain" {
		t.Fatalf("chain-limited give-up marked %q", resp.Header.Get("Retrycap-Exhausted"))
	}
	_ = p
}

func TestUnknownHostForwardedOnce(t *testing.T) {
	b := newBackend(t, status(503))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "other="+b.addr())
	resp := do(t, clientFor(p), "GET", "http://other/", nil)
	if resp.StatusCode != 503 || b.hits.Load() != 1 {
		t.Fatalf("status %d hits %d", resp.StatusCode, b.hits.Load())
	}
}

// Within one window under 100 % failure the budget grants exactly
// max(floor, percent of requests) retries.
func TestRetryBudgetLimitsRetries(t *testing.T) {
	b := newBackend(t, status(503))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(),
		"--budget-percent", "20", "--budget-min-per-second", "1", "--budget-window", "10s")
	c := clientFor(p)
	for i := 0; i < 100; i++ {
		do(t, c, "GET", "http://svc/", nil)
	}
	if got := b.hits.Load(); got != 120 {
		t.Fatalf("backend received %d, want 100 requests + 20 retries", got)
	}
	// Every request that got fewer than its 2 retries was denied once.
	if denied := testutil.ToFloat64(p.upstreamByName("svc").M.Denied[policy.ReasonBudget]); denied < 80 {
		t.Fatalf("budget denials %v, want at least 80", denied)
	}
}

// Longer than the window: over 3 short windows, retries stay within the
// per-window limit summed over the windows the run touched.
func TestRetryBudgetAcrossWindows(t *testing.T) {
	b := newBackend(t, status(503))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(),
		"--budget-percent", "10", "--budget-min-per-second", "20", "--budget-window", "200ms")
	c := clientFor(p)
	start := time.Now()
	var reqs int64
	for time.Since(start) < 700*time.Millisecond && reqs < 3000 {
		do(t, c, "GET", "http://svc/", nil)
		reqs++
	}
	elapsed := time.Since(start)
	retries := b.hits.Load() - reqs
	// Each window of 200ms allows max(4, 10% of its requests); the run
	// overlaps at most ceil(elapsed/200ms)+1 windows.
	windows := int64(elapsed/(200*time.Millisecond)) + 2
	limit := windows * max(4, reqs/10)
	if retries > limit {
		t.Fatalf("%d retries for %d requests in %v, limit %d", retries, reqs, elapsed, limit)
	}
	if retries < 4 {
		t.Fatalf("only %d retries: the floor was not granted", retries)
	}
}

func TestBreaker(t *testing.T) {
	var healthy atomic.Bool
	b := newBackend(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(503)
	})
	p := startProxy(t, "--upstreams", "svc=1", "--resolve", "svc="+b.addr(),
		"--breaker-failures", "3", "--breaker-window", "10s", "--breaker-open-for", "150ms")
	c := clientFor(p)
	for i := 0; i < 3; i++ {
		if r := do(t, c, "GET", "http://svc/", nil); r.StatusCode != 503 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
	}
	r := do(t, c, "GET", "http://svc/", nil)
	if r.StatusCode != 503 || r.Header.Get("Retrycap-Exhausted") != "breaker" || b.hits.Load() != 3 {
		t.Fatalf("open breaker: status %d exhausted %q hits %d", r.StatusCode, r.Header.Get("Retrycap-Exhausted"), b.hits.Load())
	}
	healthy.Store(true)
	// Poll: every call fails fast until openFor has passed, then exactly
	// one probe reaches the backend and closes the breaker.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = do(t, c, "GET", "http://svc/", nil)
		if r.StatusCode == 200 {
			break
		}
		if r.Header.Get("Retrycap-Exhausted") != "breaker" || time.Now().After(deadline) {
			t.Fatalf("while open: status %d exhausted %q", r.StatusCode, r.Header.Get("Retrycap-Exhausted"))
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if b.hits.Load() != 4 {
		t.Fatalf("backend received %d, want 3 failures + 1 probe", b.hits.Load())
	}
	for i := 0; i < 5; i++ {
		if r := do(t, c, "GET", "http://svc/", nil); r.StatusCode != 200 {
			t.Fatalf("closed breaker: %d", r.StatusCode)
		}
	}
	if b.hits.Load() != 9 {
		t.Fatalf("hits %d after closing", b.hits.Load())
	}
}

func TestConnectTunnel(t *testing.T) {
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
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p := startProxy(t)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", ln.Addr(), ln.Addr())
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	_, _ = io.WriteString(conn, "hello tunnel")
	buf := make([]byte, len("hello tunnel"))
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "hello tunnel" {
		t.Fatalf("echo %q %v", buf, err)
	}
}

func TestUpgradePassthrough(t *testing.T) {
	b := newBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" || r.URL.Path != "/ws" {
			w.WriteHeader(400)
			return
		}
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = buf.Flush()
		_, _ = io.Copy(c, buf)
	})
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET http://svc/ws HTTP/1.1\r\nHost: svc\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %+v %v", resp, err)
	}
	_, _ = io.WriteString(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q %v", buf, err)
	}
	if b.hits.Load() != 1 {
		t.Fatalf("hits %d", b.hits.Load())
	}
}

func TestAdminEndpoints(t *testing.T) {
	b := newBackend(t, status(503))
	p := startProxy(t, "--upstreams", "svc=2", "--resolve", "svc="+b.addr())
	do(t, clientFor(p), "GET", "http://svc/", nil)
	for _, path := range []string{"/healthz", "/readyz"} {
		r, err := http.Get("http://" + p.AdminAddr() + path)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, r, err)
		}
		r.Body.Close()
	}
	r, err := http.Get("http://" + p.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{
		`retrycap_proxy_requests_total{code="503",upstream="svc"} 1`,
		`retrycap_proxy_attempts_total{upstream="svc"} 2`,
		`retrycap_proxy_retries_denied_total{reason="attempts",upstream="svc"} 1`,
		`retrycap_proxy_breaker_state{upstream="svc"} 0`,
		`retrycap_proxy_retry_budget_available{upstream="svc"}`,
		`retrycap_proxy_upstream_latency_seconds_count{upstream="svc"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--per-try-timeout x", `"x" for "--per-try-timeout"`},
		{"--upstreams order=0", `"order=0" for --upstreams`},
		{"--chain-cap -1", `"-1" for --chain-cap`},
		{"--retry-on 5xy", `"5xy" for --retry-on`},
		{"--resolve order", `"order" for --resolve`},
		{"--backoff-base 2s --backoff-max 1s", `"1s" for --backoff-max`},
		{"--listen nope", `"nope" for --listen`},
	} {
		_, err := ParseFlags(strings.Fields(c.args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %s", c.args, err, c.want)
		}
	}
}

// Header names are matched case-insensitively (many clients send them
// lower-case), so a lower-case budget still limits the call.
func TestLowerCaseHeaders(t *testing.T) {
	b := newBackend(t, status(503))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--chain-cap", "4")
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET http://svc/ HTTP/1.1\r\nhost: svc\r\nretrycap-budget: 1\r\nbaggage: retrycap-budget=1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b.hits.Load() != 1 || resp.Header.Get("Retrycap-Exhausted") != "chain" {
		t.Fatalf("hits %d exhausted %q", b.hits.Load(), resp.Header.Get("Retrycap-Exhausted"))
	}
	if b.budgets[0] != "1" || b.bags[0] != "retrycap-budget=1" {
		t.Fatalf("forwarded budget %q baggage %q", b.budgets[0], b.bags[0])
	}
}

// A repeated Retrycap-Budget or baggage header can only lower the budget,
// and the hop below sees exactly one of each; hop-by-hop headers (the fixed
// list and those Connection nominates) are not forwarded.
func TestRepeatedBudgetAndHopByHopHeaders(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	b := newBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "secret")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.WriteHeader(503)
	})
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--chain-cap", "4")
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET http://svc/ HTTP/1.1\r\nHost: svc\r\n"+
		"Retrycap-Budget: 3\r\nRetrycap-Budget: 2\r\n"+
		"Baggage: a=1\r\nBaggage: retrycap-budget=4;p, b=2\r\n"+
		"Connection: keep-alive, X-Secret\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"+
		"Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Budget 2 (the smaller header): two attempts carrying 1 each.
	if b.hits.Load() != 2 || resp.Header.Get("Retrycap-Exhausted") != "chain" {
		t.Fatalf("hits %d exhausted %q, want 2 and chain", b.hits.Load(), resp.Header.Get("Retrycap-Exhausted"))
	}
	if resp.Header.Get("X-Hop") != "" || resp.Header.Get("Keep-Alive") != "" {
		t.Fatalf("response hop-by-hop headers passed to the app: %v", resp.Header)
	}
	h := got[0]
	if v := h.Values("Retrycap-Budget"); len(v) != 1 || v[0] != "1" {
		t.Fatalf("forwarded Retrycap-Budget %q, want [1]", v)
	}
	if v := h.Values("Baggage"); len(v) != 1 || v[0] != "a=1,retrycap-budget=1,b=2" {
		t.Fatalf("forwarded baggage %q, want [a=1,retrycap-budget=1,b=2]", v)
	}
	for _, k := range []string{"Connection", "X-Secret", "Keep-Alive", "Te", "Proxy-Connection", "Proxy-Authorization"} {
		if v := h.Values(k); len(v) != 0 {
			t.Errorf("hop-by-hop header %s forwarded: %q", k, v)
		}
	}
}

// At an entrypoint the generated Idempotency-Key comes back on every failed
// response the client may retry (5xx, 429, a --retry-on status), not on a
// success or a plain client error.
func TestEntrypointKeyOnFailedResponses(t *testing.T) {
	for _, tt := range []struct {
		code    int
		wantKey bool
	}{{200, false}, {404, false}, {409, true}, {429, true}, {500, true}, {503, true}} {
		t.Run(fmt.Sprint(tt.code), func(t *testing.T) {
			b := newBackend(t, status(tt.code))
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--entrypoint", "--chain-cap", "4",
				"--retry-on", "connect-failure,reset,409,502,503,504")
			resp := do(t, clientFor(p), "POST", "http://svc/pay", nil)
			key := resp.Header.Get("Idempotency-Key")
			if resp.StatusCode != tt.code || (key != "") != tt.wantKey {
				t.Fatalf("status %d key %q, want %d and key %t", resp.StatusCode, key, tt.code, tt.wantKey)
			}
			if tt.wantKey && b.keys[0] != key {
				t.Fatalf("backend saw key %q, client got %q", b.keys[0], key)
			}
		})
	}
}

// A request addressed to the proxy itself is refused with 508 instead of
// being forwarded to itself until the connections run out; an unknown host
// on another port is still forwarded once.
func TestRequestToItselfRefused(t *testing.T) {
	b := newBackend(t, status(200))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
	_, port, _ := net.SplitHostPort(p.Addr())
	for _, target := range []string{"http://" + p.Addr() + "/", "http://localhost:" + port + "/", "http://[::1]:" + port + "/"} {
		resp := do(t, clientFor(p), "GET", target, nil)
		if resp.StatusCode != 508 {
			t.Errorf("%s: status %d, want 508", target, resp.StatusCode)
		}
	}
	// Origin-form, straight at the proxy port (no HTTP_PROXY).
	resp, err := http.Get("http://" + p.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 508 {
		t.Errorf("origin-form: status %d, want 508", resp.StatusCode)
	}
	if got := testutil.ToFloat64(p.m.Requests.WithLabelValues("unknown", "508")); got != 4 {
		t.Errorf("requests{unknown,508} = %v, want 4", got)
	}
	resp = do(t, clientFor(p), "GET", "http://"+b.addr()+"/", nil)
	if resp.StatusCode != 200 || b.hits.Load() != 1 {
		t.Fatalf("unknown host: status %d hits %d", resp.StatusCode, b.hits.Load())
	}
}

// A request body over the proxy's limit gets 413 saying so, not 400.
func TestRequestBodyTooLarge(t *testing.T) {
	b := newBackend(t, status(200))
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
	// Only the head: the proxy answers from Content-Length, before the body
	// (a client still writing would see its connection reset).
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT http://svc/ HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\n\r\n", forward.MaxRequestBody+1)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", forward.MaxRequestBody); resp.StatusCode != 413 || string(body) != want {
		t.Fatalf("status %d body %q, want 413 %q", resp.StatusCode, body, want)
	}
	if b.hits.Load() != 0 {
		t.Fatalf("backend hit %d times", b.hits.Load())
	}
}
