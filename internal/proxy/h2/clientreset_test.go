package h2

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// h2Counters are the registry's retrycap_proxy_h2_* counter series, one
// "name{labels} value" line each, sorted (the latency histogram left out).
func h2Counters(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if mf.GetType() != 0 || !strings.HasPrefix(mf.GetName(), "retrycap_proxy_h2_") { // 0: COUNTER
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetCounter().GetValue() == 0 {
				continue
			}
			b.WriteString(mf.GetName() + "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(l.GetName() + "=" + l.GetValue())
			}
			b.WriteString("} " + strconvF(m.GetCounter().GetValue()) + "\n")
		}
	}
	return b.String()
}

func strconvF(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// A client that gives up on a call (RST_STREAM: its context cancelled; or
// its connection closed) while an attempt is under way: its own
// cancellation, not an upstream failure: one attempt counted, one
// access-log line with error "cancelled", nothing retried (the client is
// gone) and the breaker not charged (threshold 1: the next call goes
// through and is answered).

func TestClientResetJudged(t *testing.T) {
	for _, how := range []string{"rst-stream", "connection-lost"} {
		t.Run(how, func(t *testing.T) {
			upCancelled := make(chan struct{}, 1)
			b := startBackend(t, &backend{unary: func(ctx context.Context, n int, _ string) (string, error) {
				if n > 1 {
					return "ok", nil
				}
				<-ctx.Done() // until the proxy resets the upstream stream
				upCancelled <- struct{}{}
				return "", ctx.Err()
			}})
			out := &lockedBuf{}
			w := accesslog.New("client", out, 0)
			br := policy.NewBreaker(1, 10*time.Second, time.Minute)
			h, reg := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4, accessLog: w, breaker: br})
			theFront.route(t, "echo", h, b.addr)
			cc := dialName(t, "echo")
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			errc := make(chan error, 1)
			go func() { _, err := callUnary(ctx, cc, "x"); errc <- err }()
			waitFor(t, "the attempt at the server", func() bool { return b.attempts.Load() == 1 })
			if how == "rst-stream" {
				cancel()
			} else {
				_ = cc.Close()
			}
			if err := <-errc; status.Code(err) != codes.Canceled {
				t.Fatalf("client: %v", err)
			}
			select {
			case <-upCancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream stream was not reset")
			}
			waitFor(t, "the attempt judged", func() bool {
				return strings.Contains(h2Counters(t, reg), "attempts_total")
			})
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			wantM := "retrycap_proxy_h2_attempts_total{protocol=grpc,upstream=echo} 1\n" +
				"retrycap_proxy_h2_connections_total{kind=connect} 1\n"
			if got := h2Counters(t, reg); got != wantM {
				t.Fatalf("metrics:\n%s\nwant:\n%s", got, wantM)
			}
			wantL := `{"log":"retrycap-access",TIME,"service":"client","upstream":"echo","method":"POST","authority":"echo:50051",` +
				`"path":"/retrycap.test.Echo/Call","attempt":1,"budget_in":4,"budget_out":2,"status":0,DUR,"error":"cancelled"}` + "\n"
			got := logTime.ReplaceAllStringFunc(out.b.String(), func(m string) string {
				if m[1] == 't' {
					return "TIME"
				}
				return "DUR"
			})
			if got != wantL {
				t.Fatalf("access log:\n%s\nwant:\n%s", got, wantL)
			}
			if b.attempts.Load() != 1 {
				t.Fatalf("server saw %d attempts, want 1", b.attempts.Load())
			}
			// The breaker was not charged: the next call is answered.
			if out, err := callUnary(ctxT(t), dialName(t, "echo"), "x"); err != nil || out != "ok" {
				t.Fatalf("next call: %q, %v; want ok", out, err)
			}
			if st := br.State(time.Now().UnixNano()); st != policy.BreakerClosed {
				t.Fatalf("breaker %v, want closed", st)
			}
		})
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Sixty calls cancelled by their clients at once (RST_STREAM CANCEL while
// the upstream holds them) against a breaker that opens at 5 failures:
// the breaker stays closed (policy.Judge, the rule of the HTTP/1.1 engines
// too: TestClientCancelNotUpstreamFailure in package proxy), nothing is
// retried, denied or taken from the retry budget, the upstream saw each
// call once, each cancelled attempt is one access-log line with error
// "cancelled" and no exhausted field, and the next client's call is
// answered (before: 503 / UNAVAILABLE "circuit breaker open").
func TestClientCancellationsDoNotOpenBreaker(t *testing.T) {
	const calls = 60
	held := make(chan struct{}, calls)
	b := startBackend(t, &backend{unary: func(ctx context.Context, _ int, in string) (string, error) {
		if in == "healthy" {
			return "ok", nil
		}
		held <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	}})
	br := policy.NewBreaker(5, 10*time.Second, time.Minute)
	budget := policy.NewRetryBudget(0, 0, 10*time.Second) // no retry allowed: a retry would be denied and counted
	logBuf := &lockedBuf{}
	w := accesslog.New("client", logBuf, 0)
	h, reg := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4, breaker: br, budget: budget, accessLog: w})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	ctx, cancel := context.WithCancel(ctxT(t))
	errs := make(chan error, calls)
	for range calls {
		go func() { _, err := callUnary(ctx, cc, "x"); errs <- err }()
	}
	for range calls {
		<-held
	}
	cancel()
	for range calls {
		if err := <-errs; status.Code(err) != codes.Canceled {
			t.Fatalf("cancelled call: %v", err)
		}
	}
	waitFor(t, "60 attempts judged", func() bool {
		return strings.Contains(h2Counters(t, reg), "attempts_total{protocol=grpc,upstream=echo} 60\n")
	})
	if st := br.State(time.Now().UnixNano()); st != policy.BreakerClosed {
		t.Fatalf("breaker %v after %d client cancellations, want closed", st, calls)
	}
	out, err := callUnary(ctxT(t), dialName(t, "echo"), "healthy")
	if err != nil || out != "ok" {
		t.Fatalf("next client: %q, %v; want ok", out, err)
	}
	want := "retrycap_proxy_h2_attempts_total{protocol=grpc,upstream=echo} 61\n" +
		"retrycap_proxy_h2_connections_total{kind=connect} 2\n" +
		"retrycap_proxy_h2_requests_total{code=OK,protocol=grpc,upstream=echo} 1\n"
	if got := h2Counters(t, reg); got != want {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, want)
	}
	if got := b.attempts.Load(); got != calls+1 {
		t.Fatalf("the upstream saw %d calls, want %d (a cancelled call is not retried)", got, calls+1)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	norm := logTime.ReplaceAllStringFunc(logBuf.b.String(), func(m string) string {
		if m[1] == 't' {
			return "TIME"
		}
		return "DUR"
	})
	const prefix = `{"log":"retrycap-access",TIME,"service":"client","upstream":"echo","method":"POST","authority":"echo:50051",` +
		`"path":"/retrycap.test.Echo/Call","attempt":1,"budget_in":4,"budget_out":2,`
	cancelled := prefix + `"status":0,DUR,"error":"cancelled"}`
	answered := prefix + `"status":200,"grpc_status":0,DUR}`
	lines := strings.Split(strings.TrimSuffix(norm, "\n"), "\n")
	nc, na := 0, 0
	for _, l := range lines {
		switch l {
		case cancelled:
			nc++
		case answered:
			na++
		default:
			t.Errorf("unexpected access-log line %s", l)
		}
	}
	if nc != calls || na != 1 {
		t.Fatalf("access log: %d cancelled, %d answered lines; want %d and 1:\n%s", nc, na, calls, norm)
	}
}

// A half-open breaker's probe abandoned by its client (RST_STREAM while
// the upstream holds it) gives its place back: the breaker stays
// half-open, not reopened, and the next call is the probe, answered, and
// closes the breaker. Before, the abandoned probe was judged a failure and
// the next call was refused "circuit breaker open" for openFor.
func TestClientAbandonedProbeGivenBack(t *testing.T) {
	const openFor = 2 * time.Second
	held := make(chan struct{}, 1)
	b := startBackend(t, &backend{unary: func(ctx context.Context, _ int, in string) (string, error) {
		if in == "healthy" {
			return "ok", nil
		}
		held <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	}})
	br := policy.NewBreaker(1, 10*time.Second, openFor)
	br.Failure(time.Now().UnixNano(), false) // threshold 1: open
	h, reg := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4, breaker: br})
	theFront.route(t, "echo", h, b.addr)
	waitFor(t, "the breaker half-open", func() bool {
		return br.State(time.Now().UnixNano()) == policy.BreakerHalfOpen
	})
	cc := dialName(t, "echo")
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	go func() { _, err := callUnary(ctx, cc, "x"); errc <- err }()
	<-held // the probe is at the upstream
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled probe: %v", err)
	}
	waitFor(t, "the probe judged", func() bool {
		return strings.Contains(h2Counters(t, reg), "attempts_total{protocol=grpc,upstream=echo} 1\n")
	})
	if st := br.State(time.Now().UnixNano()); st != policy.BreakerHalfOpen {
		t.Fatalf("breaker %v after an abandoned probe, want half-open", st)
	}
	out, err := callUnary(ctxT(t), dialName(t, "echo"), "healthy")
	if err != nil || out != "ok" {
		t.Fatalf("next call: %q, %v; want ok (the probe)", out, err)
	}
	if st := br.State(time.Now().UnixNano()); st != policy.BreakerClosed {
		t.Fatalf("breaker %v after the next probe answered, want closed", st)
	}
}
