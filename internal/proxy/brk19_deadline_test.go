package proxy

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The breaker and a caller's deadline (docs/decisions.md, brk19): an
// attempt cut by the caller's deadline before the policy's own bound (the
// per-try timeout), and an upstream's 504 / DEADLINE_EXCEEDED answering a
// call whose propagated deadline was shorter than that bound, are the
// caller's budget running out, not the upstream failing: they do not open
// the breaker, so the next caller with a generous deadline is served. An
// upstream slower than the per-try timeout still opens it.

// brkArgs: a breaker opened by 2 failures, for a minute.
var brkArgs = []string{"--breaker-failures", "2", "--breaker-window", "1m", "--breaker-open-for", "1m"}

func brkProxy(t *testing.T, engine, addr string, args ...string) *Proxy {
	t.Helper()
	a := append([]string{"--upstreams", "svc=3", "--resolve", "svc=" + addr}, brkArgs...)
	return startProxyOn(t, engine, append(a, args...)...)
}

func breakerState(t *testing.T, p *Proxy) float64 {
	t.Helper()
	return counterValue(t, p, "retrycap_proxy_breaker_state", map[string]string{"upstream": "svc"})
}

// answersIn answers 200 "ok" after d, or stops when the proxy gives up.
func answersIn(d time.Duration) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
			_, _ = w.Write([]byte("ok"))
		case <-r.Context().Done():
		}
	}
}

// gatewayTimeoutUnder answers 504 at once to a request whose propagated
// Retrycap-Deadline is under 1s (as an app that checks the time it has
// does), else 200 "ok".
func gatewayTimeoutUnder(_ int64, w http.ResponseWriter, r *http.Request) {
	if ms, err := strconv.Atoi(r.Header.Get("Retrycap-Deadline")); err == nil && ms < 1000 {
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func TestBreakerCallerDeadlineHTTP(t *testing.T) {
	for _, proto := range []string{"loop", "goroutine", "h2"} {
		client := func(p *Proxy) *http.Client {
			if proto == "h2" {
				return h2Client(t, p)
			}
			return clientFor(p)
		}
		engine := proto
		if proto == "h2" {
			engine = "loop"
		}
		// Two calls with Retrycap-Deadline: 50 against an upstream that
		// answers in 200ms (the red team's 5 and 20, with room for a
		// loaded machine to forward the call before its time is gone): each cut by its own deadline (504 deadline),
		// one attempt each; the breaker stays closed and the next call,
		// without a deadline, is answered 200.
		t.Run(proto+" cut by the caller's deadline", func(t *testing.T) {
			b, _ := newDualBackend(t, answersIn(200*time.Millisecond))
			p := brkProxy(t, engine, b.addr())
			c := client(p)
			for i := range 2 {
				resp, _ := doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "50"})
				if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" {
					t.Fatalf("call %d: %d %q, want 504 deadline", i+1, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"))
				}
			}
			if n := waitHits(b, 2); n != 2 {
				t.Fatalf("upstream saw %d attempts, want 2", n)
			}
			if s := breakerState(t, p); s != 0 {
				t.Fatalf("breaker state %v after two calls cut by their own deadline, want 0 (closed)", s)
			}
			denied := "retrycap_proxy_retries_denied_total"
			if proto == "h2" {
				denied = "retrycap_proxy_h2_retries_denied_total"
			}
			if n := counterValue(t, p, denied, map[string]string{"upstream": "svc", "reason": "deadline"}); n != 2 {
				t.Fatalf("%s{reason=deadline} = %v, want 2 (counted under their own reason)", denied, n)
			}
			resp, body := doBody(t, c, "GET", "http://svc/", nil)
			if resp.StatusCode != 200 || body != "ok" || b.hits.Load() != 3 {
				t.Fatalf("next caller: %d %q after %d attempts, want 200 ok after 3", resp.StatusCode, body, b.hits.Load())
			}
		})
		// Two calls with Retrycap-Deadline: 300 (per-try 2s) answered 504
		// by the upstream for lack of time: passed on, not retried (no
		// room), not breaker failures.
		t.Run(proto+" upstream 504 under a short propagated deadline", func(t *testing.T) {
			b, _ := newDualBackend(t, gatewayTimeoutUnder)
			p := brkProxy(t, engine, b.addr())
			c := client(p)
			for i := range 2 {
				resp, _ := doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "300"})
				if resp.StatusCode != http.StatusGatewayTimeout {
					t.Fatalf("call %d: %d, want the upstream's 504", i+1, resp.StatusCode)
				}
			}
			if n := b.hits.Load(); n != 2 {
				t.Fatalf("upstream saw %d attempts, want 2", n)
			}
			if s := breakerState(t, p); s != 0 {
				t.Fatalf("breaker state %v after two 504s to short deadlines, want 0 (closed)", s)
			}
			resp, body := doBody(t, c, "GET", "http://svc/", nil)
			if resp.StatusCode != 200 || body != "ok" || b.hits.Load() != 3 {
				t.Fatalf("next caller: %d %q after %d attempts, want 200 ok after 3", resp.StatusCode, body, b.hits.Load())
			}
		})
		// --max-time-to-answer (100ms, under the 2s per-try timeout) is
		// the proxy's own bound: an upstream slower than it opens the
		// breaker (2 calls, 2 attempts, the third refused); a caller
		// lowering it to 50ms is its own budget (closed: the third call
		// reaches the upstream).
		t.Run(proto+" --max-time-to-answer", func(t *testing.T) {
			for _, tc := range []struct {
				deadline string
				state    float64
			}{{"", 1}, {"50", 0}} {
				b, _ := newDualBackend(t, answersIn(2*time.Second))
				p := brkProxy(t, engine, b.addr(), "--upstreams", "svc=1", "--max-time-to-answer", "100ms")
				c := client(p)
				hdr := map[string]string{}
				if tc.deadline != "" {
					hdr["Retrycap-Deadline"] = tc.deadline
				}
				for i := range 2 {
					resp, _ := doBody(t, c, "GET", "http://svc/", hdr)
					if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" {
						t.Fatalf("deadline %q call %d: %d %q, want 504 deadline", tc.deadline, i+1, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"))
					}
				}
				if s := breakerState(t, p); s != tc.state {
					t.Fatalf("deadline %q: breaker state %v, want %v", tc.deadline, s, tc.state)
				}
				resp, body := doBody(t, c, "GET", "http://svc/", nil)
				if tc.state == 1 && (resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "circuit breaker open")) {
					t.Fatalf("third call: %d %q, want 503 circuit breaker open", resp.StatusCode, body)
				}
				want := int64(2)
				if tc.state == 0 {
					want = 3
				}
				if n := waitHits(b, want); n != want {
					t.Fatalf("deadline %q: upstream saw %d attempts, want %d", tc.deadline, n, want)
				}
			}
		})
		// Control: an upstream slower than the per-try timeout (100ms,
		// answers after 2s), one attempt per call: two calls open the
		// breaker, the third is refused without reaching it.
		t.Run(proto+" slower than the per-try timeout", func(t *testing.T) {
			b, _ := newDualBackend(t, answersIn(2*time.Second))
			p := brkProxy(t, engine, b.addr(), "--upstreams", "svc=1", "--per-try-timeout", "100ms")
			c := client(p)
			for i := range 2 {
				resp, _ := doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "5000"})
				if resp.StatusCode != http.StatusGatewayTimeout {
					t.Fatalf("call %d: %d, want 504 (per-try timeout)", i+1, resp.StatusCode)
				}
			}
			if s := breakerState(t, p); s != 1 {
				t.Fatalf("breaker state %v after two per-try timeouts, want 1 (open)", s)
			}
			resp, body := doBody(t, c, "GET", "http://svc/", nil)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "circuit breaker open") {
				t.Fatalf("third call: %d %q, want 503 circuit breaker open", resp.StatusCode, body)
			}
			if n := waitHits(b, 2); n != 2 {
				t.Fatalf("upstream saw %d attempts, want 2", n)
			}
		})
	}
}

// grpcIn is a grpc-go server whose every call answers OK after d, or, its
// deadline first, ends as grpc-go ends it (RST_STREAM CANCEL from its
// transport, DEADLINE_EXCEEDED from the handler); with shortDeadline it
// answers DEADLINE_EXCEEDED at once to a call with under 1s left.
func grpcIn(t *testing.T, d time.Duration, shortDeadline bool) (*atomic.Int64, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		calls.Add(1)
		ctx := stream.Context()
		if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
			return err
		}
		if dl, ok := ctx.Deadline(); shortDeadline && ok && time.Until(dl) < time.Second {
			return grpcstatus.Error(codes.DeadlineExceeded, "not enough time left")
		}
		select {
		case <-time.After(d):
			return stream.SendMsg(new(emptypb.Empty))
		case <-ctx.Done():
			return grpcstatus.FromContextError(ctx.Err()).Err()
		}
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return &calls, ln.Addr().String()
}

func callIn(t *testing.T, cc *grpc.ClientConn, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return cc.Invoke(ctx, "/seam.Test/Call", new(emptypb.Empty), new(emptypb.Empty))
}

// connected makes cc's connection and waits until it is ready (5s at
// most), so that a call with a tight deadline is not spent dialling.
func connected(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("connection to the proxy not ready: %v", s)
		}
	}
}

func waitCalls(n *atomic.Int64, want int64) int64 {
	for end := time.Now().Add(5 * time.Second); n.Load() < want && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	return n.Load()
}

func TestBreakerCallerDeadlineGRPC(t *testing.T) {
	// Two calls with grpc-timeout 50m against an upstream answering in
	// 200ms (the connection made first): DEADLINE_EXCEEDED each, one attempt each, the breaker closed,
	// the next call (5s) answered OK.
	t.Run("cut by the caller's deadline", func(t *testing.T) {
		calls, addr := grpcIn(t, 200*time.Millisecond, false)
		p := brkProxy(t, "loop", addr, "--retry-on", "unavailable,deadline-exceeded")
		cc := grpcDirect(t, p)
		connected(t, cc)
		for i := range 2 {
			if err := callIn(t, cc, 50*time.Millisecond); grpcstatus.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("call %d: %v, want DEADLINE_EXCEEDED", i+1, err)
			}
		}
		if n := waitCalls(calls, 2); n != 2 {
			t.Fatalf("upstream saw %d calls, want 2", n)
		}
		if s := breakerState(t, p); s != 0 {
			t.Fatalf("breaker state %v after two calls cut by their own deadline, want 0 (closed)", s)
		}
		// (Not asserted: retries denied for deadline. grpc-go's client
		// resets its stream at the same deadline, and when its
		// RST_STREAM comes before the proxy's timer the call is its
		// cancellation, not a denial: not a breaker failure either way.)
		if err := callIn(t, cc, 5*time.Second); err != nil || calls.Load() != 3 {
			t.Fatalf("next caller: %v after %d calls, want OK after 3", err, calls.Load())
		}
	})
	// The upstream answers DEADLINE_EXCEEDED at once to calls with 300ms
	// left (per-try 2s): passed on, not breaker failures.
	t.Run("upstream DEADLINE_EXCEEDED under a short propagated deadline", func(t *testing.T) {
		calls, addr := grpcIn(t, 0, true)
		p := brkProxy(t, "loop", addr, "--retry-on", "unavailable")
		cc := grpcDirect(t, p)
		for i := range 2 {
			if err := callIn(t, cc, 300*time.Millisecond); grpcstatus.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("call %d: %v, want DEADLINE_EXCEEDED", i+1, err)
			}
		}
		if n := calls.Load(); n != 2 {
			t.Fatalf("upstream saw %d calls, want 2", n)
		}
		if s := breakerState(t, p); s != 0 {
			t.Fatalf("breaker state %v after two DEADLINE_EXCEEDED to short deadlines, want 0 (closed)", s)
		}
		if err := callIn(t, cc, 5*time.Second); err != nil || calls.Load() != 3 {
			t.Fatalf("next caller: %v after %d calls, want OK after 3", err, calls.Load())
		}
	})
	// Control: slower than the per-try timeout (100ms; answers after 2s),
	// one attempt per call: two calls open the breaker, the third gets
	// UNAVAILABLE "circuit breaker open" without reaching the upstream.
	t.Run("slower than the per-try timeout", func(t *testing.T) {
		calls, addr := grpcIn(t, 2*time.Second, false)
		p := brkProxy(t, "loop", addr, "--upstreams", "svc=1", "--per-try-timeout", "100ms")
		cc := grpcDirect(t, p)
		for i := range 2 {
			if err := callIn(t, cc, 5*time.Second); err == nil {
				t.Fatalf("call %d answered OK, want the per-try timeout", i+1)
			}
		}
		if s := breakerState(t, p); s != 1 {
			t.Fatalf("breaker state %v after two per-try timeouts, want 1 (open)", s)
		}
		err := callIn(t, cc, 5*time.Second)
		if grpcstatus.Code(err) != codes.Unavailable || !strings.Contains(grpcstatus.Convert(err).Message(), "circuit breaker open") {
			t.Fatalf("third call: %v, want UNAVAILABLE circuit breaker open", err)
		}
		if n := waitCalls(calls, 2); n != 2 {
			t.Fatalf("upstream saw %d calls, want 2", n)
		}
	})
}

// Retrycap-Deadline: 1 leaves less than a millisecond by the time the
// first attempt would go: answered 504 "no time left", nothing
// forwarded, on both HTTP/1.1 engines as on HTTP/2. Before, HTTP/1.1
// answered 200 with an empty body and Retrycap-Exhausted: deadline (the
// give-up of a retry, with no answer to pass on): a false success.
func TestDeadlineOneMillisecondNothingForwarded(t *testing.T) {
	for _, proto := range []string{"loop", "goroutine", "h2"} {
		t.Run(proto, func(t *testing.T) {
			b, _ := newDualBackend(t, answersIn(0))
			engine := proto
			if proto == "h2" {
				engine = "loop"
			}
			p := startProxyOn(t, engine, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
			c := clientFor(p)
			if proto == "h2" {
				c = h2Client(t, p)
			}
			resp, body := doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "1"})
			const want = "retrycap-proxy: upstream svc: no time left (Retrycap-Deadline: 0): nothing forwarded\n"
			if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" || body != want {
				t.Fatalf("%d %q %q, want 504 deadline %q", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body, want)
			}
			if n := b.hits.Load(); n != 0 {
				t.Fatalf("upstream saw %d requests, want 0", n)
			}
			// The healthy path still works.
			resp, body = doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "5000"})
			if resp.StatusCode != 200 || body != "ok" || b.hits.Load() != 1 {
				t.Fatalf("%d %q after %d requests, want 200 ok after 1", resp.StatusCode, body, b.hits.Load())
			}
		})
	}
}
