package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/observe"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The chain cap and the stale-connection re-send (branch resendcap). A
// replayable request (a GET, a POST with the client's Idempotency-Key) that
// a reused pooled connection lost after its bytes were written may have run
// at the upstream. Until this branch the proxy re-sent it on a fresh
// connection within the same attempt, with the same Retrycap-Budget, not
// counted: against an upstream that reads each request and resets, 3
// attempts under a cap of 4 ran it 4 times with budgets 2,2,1,1 (6 handed
// down against a cap of 4), 4 attempts ran it 5 times. Found with real
// Python clients (branch pyclient). Now that repeat is the next attempt:
// its number, its lowered budget, none when none is left. A re-send after
// no byte was written stays free (TestResendOnlyWhenNoByteLeft).

// rstBackend is a raw keep-alive upstream: it answers GET /warm 200 "ok"
// (pooling the proxy's connection), and reads every other request whole,
// records it with the Retrycap-Budget it carried, and resets the
// connection (RST: the app had the request).
type rstBackend struct {
	ln    net.Listener
	mu    sync.Mutex
	execs []string // "METHOD PATH budget=N", in order
}

func newRstBackend(t *testing.T) *rstBackend {
	t.Helper()
	b := &rstBackend{}
	b.ln, _ = proxytest.RawBackend(t, func(c *net.TCPConn) { b.serve(c) })
	return b
}

func (b *rstBackend) serve(c *net.TCPConn) {
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
		if req.URL.Path == "/warm" {
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
			continue
		}
		b.mu.Lock()
		b.execs = append(b.execs, fmt.Sprintf("%s %s budget=%s", req.Method, req.URL.Path, req.Header.Get("Retrycap-Budget")))
		b.mu.Unlock()
		_ = c.SetLinger(0) // close sends RST
		return
	}
}

func (b *rstBackend) executions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.execs...)
}

// staleCapResult is what one engine did with one call: compared across
// the engines and against the figures the cap allows.
type staleCapResult struct {
	Execs     []string // at the backend, with the budget each carried
	Status    int
	Exhausted string
	Body      string // up to the error's text, which is the engine's
	Attempts  float64
	Retries   float64
	Resends   float64
	Log       []string // the access log: "attempt error budget-out exhausted"
}

func runStaleCap(t *testing.T, engine, upstreams, warm, method, raw string) staleCapResult {
	t.Helper()
	b := newRstBackend(t)
	path := filepath.Join(t.TempDir(), "access.log")
	p := startProxyOn(t, engine, "--upstreams", upstreams, "--chain-cap", "4",
		"--resolve", "svc="+b.ln.Addr().String(), "--access-log", path)
	c := proxytest.Dial(t, p.Addr())
	c.Send(warm)
	c.Expect(strings.Fields(warm)[0], 200, "ok")
	c.Send(raw)
	resp, body := c.Answer(method)
	// The upstream's address as ADDR; the error's text, the engine's, cut.
	body = strings.Replace(body, " ("+b.ln.Addr().String()+")", " (ADDR)", 1)
	if i := strings.Index(body, "reset ("); i >= 0 {
		i += len("reset")
		if j := strings.LastIndex(body, ")"); j > i {
			body = body[:i] + body[j+1:]
		}
	}
	if err := p.accessLog.w.Close(); err != nil { // flush
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		a, ok, err := observe.ParseLine([]byte(l), observe.Source{})
		if err != nil || !ok {
			t.Fatalf("access-log line %q: %v %v", l, ok, err)
		}
		if a.Path == "/warm" {
			continue
		}
		log = append(log, fmt.Sprintf("%d %s %d %s", a.Number, a.Error, a.BudgetOut, a.Exhausted))
	}
	up := p.upstreamByName("svc")
	return staleCapResult{
		Execs: b.executions(), Status: resp.StatusCode, Exhausted: resp.Header.Get("Retrycap-Exhausted"), Body: body,
		Attempts: testutil.ToFloat64(up.M.Attempts) - 1, Retries: testutil.ToFloat64(up.M.Retries),
		Resends: testutil.ToFloat64(p.m.StaleResends), Log: log,
	}
}

// TestStaleResendWithinCap: an upstream that reads every request and
// resets, after a GET pooled the proxy's connection to it. The first
// attempt goes on that pooled connection (a stale reset after the write:
// logged "stale", repeated at once, no backoff); the next ones on fresh
// connections (plain resets). Exact executions and the budget each saw, on
// both engines, and the two engines alike (a differential check). Before
// the fix (same calls): 3 attempts ran 4 times, budgets 2,2,1,1; 4 attempts
// 5 times, 1,1,1,1,1; 1 attempt twice, 4,4.
func TestStaleResendWithinCap(t *testing.T) {
	const key = "Idempotency-Key: k-1\r\n"
	const warm = "GET http://svc/warm HTTP/1.1\r\nHost: svc\r\n\r\n"
	calls := []struct{ name, warm, method, path, raw string }{
		{"keyed POST", warm, "POST", "/order", "POST http://svc/order HTTP/1.1\r\nHost: svc\r\n" + key + "Content-Length: 7\r\n\r\norder 1"},
		// A chunked body: the loop hands the connection to the goroutine
		// engine, the warm-up's too, so that the upstream connection it
		// pools is the goroutine engine's.
		{"keyed chunked POST", "POST http://svc/warm HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "POST", "/order", "POST http://svc/order HTTP/1.1\r\nHost: svc\r\n" + key + "Transfer-Encoding: chunked\r\n\r\n7\r\norder 1\r\n0\r\n\r\n"},
		{"GET", warm, "GET", "/item", "GET http://svc/item HTTP/1.1\r\nHost: svc\r\n\r\n"},
	}
	cases := []struct {
		upstreams string
		budgets   []string
	}{
		{"svc=3", []string{"2", "1", "1"}},
		{"svc=4", []string{"1", "1", "1", "1"}},
		// No attempt left for the repeat: answered as the attempt's failure.
		{"svc=1", []string{"4"}},
	}
	for _, call := range calls {
		for _, tc := range cases {
			t.Run(call.name+"/"+tc.upstreams, func(t *testing.T) {
				n := len(tc.budgets)
				want := staleCapResult{
					Status: 503, Exhausted: "attempts",
					Body:     fmt.Sprintf("retrycap-proxy: upstream svc (ADDR): %d attempt(s), last failed with reset; not retried: attempts\n", n),
					Attempts: float64(n), Retries: float64(n - 1),
				}
				sum := 0
				for i, bud := range tc.budgets {
					want.Execs = append(want.Execs, call.method+" "+call.path+" budget="+bud)
					exh, errName := "", "reset"
					if i == 0 {
						errName = "stale"
					}
					if i == n-1 {
						exh = "attempts"
					}
					want.Log = append(want.Log, fmt.Sprintf("%d %s %s %s", i+1, errName, bud, exh))
					var v int
					fmt.Sscan(bud, &v)
					sum += v
				}
				if n > 1 {
					want.Resends = 1 // the stale attempt's repeat, counted as a retry too
				}
				if n > 4 || sum > 4 {
					t.Fatalf("the test's figures break the cap of 4: %d executions, %d handed down", n, sum)
				}
				got := map[string]staleCapResult{}
				for _, engine := range []string{"loop", "goroutine"} {
					r := runStaleCap(t, engine, tc.upstreams, call.warm, call.method, call.raw)
					if !reflect.DeepEqual(r, want) {
						t.Errorf("%s engine:\n got %+v\nwant %+v", engine, r, want)
					}
					got[engine] = r
				}
				if !reflect.DeepEqual(got["loop"], got["goroutine"]) {
					t.Errorf("the engines differ:\n loop      %+v\n goroutine %+v", got["loop"], got["goroutine"])
				}
			})
		}
	}
}

// TestStaleResetNoBreakerFailure: a breaker that one failure opens. A
// stale attempt is no breaker failure (an upstream closing idle
// connections must not open the breaker): with 1 attempt it is answered
// as out of attempts and the next call is served; with 2, its retry is
// not refused by the breaker (it would be, had the stale reset opened it)
// and runs on a fresh connection, whose reset is a plain failure that does
// open it: an upstream that crashes on every request is still seen.
func TestStaleResetNoBreakerFailure(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range []struct {
			upstreams string
			execs     int
			after     int    // the next call's status
			afterBody string // and body
		}{
			{"svc=1", 1, 200, "ok"},
			{"svc=2", 2, 503, "retrycap-proxy: upstream svc: circuit breaker open\n"},
		} {
			t.Run(engine+"/"+tc.upstreams, func(t *testing.T) {
				b := newRstBackend(t)
				p := startProxyOn(t, engine, "--upstreams", tc.upstreams, "--resolve", "svc="+b.ln.Addr().String(),
					"--breaker-failures", "1", "--breaker-open-for", "1m")
				c := proxytest.Dial(t, p.Addr())
				c.Send("GET http://svc/warm HTTP/1.1\r\nHost: svc\r\n\r\n")
				c.Expect("GET", 200, "ok")
				c.Send("GET http://svc/item HTTP/1.1\r\nHost: svc\r\n\r\n")
				if resp, body := c.Answer("GET"); resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != "attempts" {
					t.Fatalf("GET /item: %d %q Retrycap-Exhausted %q, want 503 attempts", resp.StatusCode, body, resp.Header.Get("Retrycap-Exhausted"))
				}
				if got := b.executions(); len(got) != tc.execs {
					t.Fatalf("the backend ran %q, want %d executions", got, tc.execs)
				}
				c.Send("GET http://svc/warm HTTP/1.1\r\nHost: svc\r\n\r\n")
				c.Expect("GET", tc.after, tc.afterBody)
			})
		}
	}
}
