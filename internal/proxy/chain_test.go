package proxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/labapp"
	"github.com/retrycap/retrycap/internal/proxy"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// proxyBin is retrycap-proxy built once for the tests that need real
// processes (the chain and graceful shutdown).
var proxyBin string

func TestMain(m *testing.M) {
	os.Exit(labapp.RunTestsWithProxy(runFunc(func() int { return proxy.EngineRun(m) }), "../..", &proxyBin))
}

type runFunc func() int

func (f runFunc) Run() int { return f() }

// chain is the storm topology: user -> client app -> [client proxy] ->
// gateway app -> [gateway proxy] -> order app -> [order proxy] -> payment.
type chain struct {
	client, gateway, order, payment *labapp.App
	proxies                         []*labapp.ProxyProc
}

func startProxy(t *testing.T, args ...string) *labapp.ProxyProc {
	t.Helper()
	p, err := labapp.StartProxy(proxyBin, 10*time.Second, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(5 * time.Second); err != nil {
			t.Logf("proxy stop: %v\n%s", err, p.Log())
		}
	})
	return p
}

func startApp(t *testing.T, cfg labapp.Config) *labapp.App {
	t.Helper()
	a, err := labapp.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// startChain builds the chain bottom-up (each proxy must know the address
// of the app it resolves to). Every hop makes 3 attempts.
func startChain(t *testing.T, chainCap int) *chain {
	common := []string{"--chain-cap", fmt.Sprint(chainCap), "--backoff-base", "1ms", "--backoff-max", "2ms",
		"--budget-percent", "100", "--budget-min-per-second", "10000", "--breaker-failures", "0", "--per-try-timeout", "5s"}
	c := &chain{}
	c.payment = startApp(t, labapp.Config{Name: "payment"})
	c.payment.SetFailing(true)
	po := startProxy(t, append(common, "--service", "order", "--upstreams", "payment=3", "--resolve", "payment="+c.payment.Addr())...)
	c.order = startApp(t, labapp.Config{Name: "order", Upstreams: []string{"http://payment/charge"}, ProxyURL: po.URL()})
	pg := startProxy(t, append(common, "--service", "gateway", "--upstreams", "order=3", "--resolve", "order="+c.order.Addr())...)
	c.gateway = startApp(t, labapp.Config{Name: "gateway", Upstreams: []string{"http://order/checkout"}, ProxyURL: pg.URL()})
	pc := startProxy(t, append(common, "--service", "client", "--entrypoint", "--upstreams", "gateway=3", "--resolve", "gateway="+c.gateway.Addr())...)
	c.client = startApp(t, labapp.Config{Name: "client", Upstreams: []string{"http://gateway/buy"}, ProxyURL: pc.URL()})
	c.proxies = []*labapp.ProxyProc{po, pg, pc}
	return c
}

func (c *chain) setPropagation(p labapp.Propagation) {
	for _, a := range []*labapp.App{c.client, c.gateway, c.order} {
		a.SetPropagation(p)
	}
}

// userRequest sends one user request to the client app and returns how
// many requests payment received for it.
func (c *chain) userRequest(t *testing.T, hdr map[string]string) (int, int64) {
	t.Helper()
	before := c.payment.Received()
	req, _ := http.NewRequest("GET", c.client.URL()+"/buy", nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, c.payment.Received() - before
}

func TestChainCapBoundsPaymentLoad(t *testing.T) {
	t.Parallel()
	c := startChain(t, 4)
	for i := 0; i < 3; i++ {
		code, n := c.userRequest(t, nil)
		if code < 500 || n != 4 {
			t.Fatalf("user request %d: status %d, payment received %d, want 4", i, code, n)
		}
	}
	// A spoofed budget above the cap is clamped at the entry.
	if _, n := c.userRequest(t, map[string]string{"Retrycap-Budget": "1000"}); n != 4 {
		t.Fatalf("spoofed header: payment received %d, want 4", n)
	}
	if max := c.payment.Stats().MaxBudgetSeen; max != 1 {
		t.Fatalf("payment saw budget %d, want 1", max)
	}
	// Apps that propagate only baggage get the same bound.
	c.setPropagation(labapp.PropagateBaggage)
	if _, n := c.userRequest(t, map[string]string{"Baggage": "retrycap-budget=1000,user=x"}); n != 4 {
		t.Fatalf("baggage only: payment received %d, want 4", n)
	}
	// Payment recovers: one request each.
	c.payment.SetFailing(false)
	if code, n := c.userRequest(t, nil); code != 200 || n != 1 {
		t.Fatalf("healthy: status %d, payment received %d", code, n)
	}
}

func TestChainCapOffMultiplies(t *testing.T) {
	t.Parallel()
	c := startChain(t, 0)
	code, n := c.userRequest(t, nil)
	if code < 500 || n != 27 {
		t.Fatalf("status %d, payment received %d, want 27", code, n)
	}
}

// SIGTERM stops accepting and lets the in-flight request finish.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	var started atomic.Int64
	release := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		<-release
		_, _ = io.WriteString(w, "done")
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	p, err := labapp.StartProxy(proxyBin, 10*time.Second, "--upstreams", "slow", "--resolve", "slow="+ln.Addr().String(), "--drain-timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	u, _ := url.Parse(p.URL())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}, Timeout: 10 * time.Second}
	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := c.Get("http://slow/")
		if err != nil {
			res <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{code: resp.StatusCode, body: string(b)}
	}()
	proxytest.Eventually(t, "the request at the backend", func() bool { return started.Load() == 1 })
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(10 * time.Second) }()
	// New connections are refused once the listener is closed.
	proxytest.Eventually(t, "the listener closed", func() bool {
		conn, err := net.DialTimeout("tcp", p.Addr, 100*time.Millisecond)
		if err != nil {
			return true
		}
		conn.Close()
		return false
	})
	close(release)
	r := <-res
	if r.err != nil || r.code != 200 || r.body != "done" {
		t.Fatalf("in-flight request: %+v", r)
	}
	err = <-stopped
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Log())
	}
	if !strings.Contains(p.Log(), "draining") {
		t.Fatalf("log: %s", p.Log())
	}
}

// --check validates and prints; bad values exit 2 naming flag and value.
func TestCheckFlag(t *testing.T) {
	t.Parallel()
	out, err := runBin("--check", "--upstreams", "order=3, inventory=2*4", "--chain-cap", "4")
	if err != nil || !strings.Contains(out, "upstreams order=3*1,inventory=2*4") || !strings.Contains(out, "chain-cap 4") {
		t.Fatalf("--check: %v\n%s", err, out)
	}
	out, err = runBin("--check", "--max-time-to-answer", "2500ms")
	if err != nil || !strings.Contains(out, "\nmax-time-to-answer 2.5s\n") {
		t.Fatalf("--check --max-time-to-answer: %v\n%s", err, out)
	}
	for _, v := range []string{"-1s", "25h", "500us"} {
		out, err = runBin("--check", "--max-time-to-answer", v)
		ee, ok := err.(interface{ ExitCode() int })
		if !ok || ee.ExitCode() != 2 || !strings.Contains(out, "for --max-time-to-answer: must be 0 (none) or 1ms..24h") {
			t.Fatalf("--max-time-to-answer %s: %v\n%s", v, err, out)
		}
	}
	out, err = runBin("--check", "--budget-percent", "101")
	ee, ok := err.(interface{ ExitCode() int })
	if !ok || ee.ExitCode() != 2 || !strings.Contains(out, `"101" for --budget-percent`) {
		t.Fatalf("bad flag: %v\n%s", err, out)
	}
}
