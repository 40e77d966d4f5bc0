package forward

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

type cancelLogBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *cancelLogBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *cancelLogBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The exchange's glue to policy.Judge, as both HTTP/1.1 engines drive it
// when the client goes: told before AfterAttempt (ClientGone: the attempt
// failed, then the engine saw the client's end), or the attempt dropped
// with no outcome (Abandon: the loop closed the client's connection
// while the attempt ran). Either way: one attempt counted, one access-log
// line "cancelled" without exhausted, the breaker (1 failure opens it)
// not charged, nothing retried or denied; a half-open probe's place given
// back. Abandon after the attempt was judged, or twice, adds nothing. The
// same failure with the client present opens the breaker (the control).
func TestExchangeClientGone(t *testing.T) {
	ro, err := policy.ParseRetryOn("connect-failure,reset,timeout,503")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		halfOpen bool
		end      func(x *Exchange, resp *fasthttp.Response)
		breaker  policy.BreakerState
		attempts float64
		denied   float64 // retries denied, any reason
		log      string  // the access-log line's tail after "attempt"
	}{
		{"timeout, then the client's end seen", false, func(x *Exchange, _ *fasthttp.Response) {
			x.ClientGone()
			if retry, _ := x.AfterAttempt(fasthttp.ErrTimeout); retry {
				t.Error("a cancelled attempt retried")
			}
		}, policy.BreakerClosed, 1, 0, `"status":0,DUR,"error":"cancelled"}`},
		{"503, then the client's end seen", false, func(x *Exchange, resp *fasthttp.Response) {
			resp.SetStatusCode(503)
			x.ClientGone()
			if retry, _ := x.AfterAttempt(nil); retry {
				t.Error("a cancelled attempt retried")
			}
		}, policy.BreakerClosed, 1, 0, `"status":503,DUR,"error":"cancelled"}`},
		{"200, then the client's end seen", false, func(x *Exchange, resp *fasthttp.Response) {
			resp.SetStatusCode(200)
			x.ClientGone()
			_, _ = x.AfterAttempt(nil)
		}, policy.BreakerClosed, 1, 0, `"status":200,DUR}`},
		{"abandoned", false, func(x *Exchange, _ *fasthttp.Response) {
			x.Abandon()
			x.Abandon()
		}, policy.BreakerClosed, 1, 0, `"status":0,DUR,"error":"cancelled"}`},
		{"abandoned after the answer was judged", false, func(x *Exchange, resp *fasthttp.Response) {
			resp.SetStatusCode(200)
			_, _ = x.AfterAttempt(nil)
			x.Abandon()
		}, policy.BreakerClosed, 1, 0, `"status":200,DUR}`},
		{"half-open probe abandoned", true, func(x *Exchange, _ *fasthttp.Response) {
			x.Abandon()
		}, policy.BreakerHalfOpen, 1, 0, `"status":0,DUR,"error":"cancelled"}`},
		{"timeout, client present (control)", false, func(x *Exchange, _ *fasthttp.Response) {
			if retry, _ := x.AfterAttempt(fasthttp.ErrTimeout); retry {
				t.Error("retried with the breaker open")
			}
		}, policy.BreakerOpen, 1, 1, `"status":0,DUR,"exhausted":"breaker","error":"timeout"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(&Config{
				Upstreams: []UpstreamConfig{{Name: "svc", Attempts: 3}}, PerTryTimeout: time.Second,
				RetryOn: ro, RetryMethods: []string{"GET"}, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond,
				BudgetPercent: 100, BudgetMinPerSecond: 100, BudgetWindow: 10 * time.Second,
				BreakerFailures: 1, BreakerWindow: 10 * time.Second, BreakerOpenFor: time.Minute,
			}, nil)
			out := &cancelLogBuf{}
			w := accesslog.New("client", out, 0)
			f.EnableAccessLog(w)
			up := f.Upstreams[0]
			if tc.halfOpen {
				up.Breaker.Failure(NowNanos()-int64(2*time.Minute), false)
			}
			var req fasthttp.Request
			var resp fasthttp.Response
			req.SetRequestURI("http://svc/x")
			req.Header.SetHost("svc")
			var x Exchange
			if !x.Begin(f, up, &req, &resp, ScanRequestHeaders(&req.Header), &Scratch{}) || !x.NextAttempt() {
				t.Fatalf("no attempt: %d %s", resp.StatusCode(), resp.Body())
			}
			if tc.halfOpen && !x.probe {
				t.Fatal("setup: the attempt is not the half-open probe")
			}
			tc.end(&x, &resp)
			x.End()
			if st := up.Breaker.State(NowNanos()); st != tc.breaker {
				t.Errorf("breaker %v, want %v", st, tc.breaker)
			}
			if tc.breaker == policy.BreakerHalfOpen {
				if ok, probe := up.Breaker.Allow(NowNanos()); !ok || !probe {
					t.Errorf("next attempt: Allow = %v, %v; want the probe", ok, probe)
				}
			}
			if got := testutil.ToFloat64(up.M.Attempts); got != tc.attempts {
				t.Errorf("%v attempts, want %v", got, tc.attempts)
			}
			if got := testutil.ToFloat64(up.M.Retries); got != 0 {
				t.Errorf("%v retries, want 0", got)
			}
			denied := 0.0
			for _, m := range up.M.Denied {
				if m != nil {
					denied += testutil.ToFloat64(m)
				}
			}
			if denied != tc.denied {
				t.Errorf("%v retries denied, want %v", denied, tc.denied)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := strings.TrimSuffix(out.String(), "\n")
			if strings.Count(got, "\n") != 0 {
				t.Fatalf("access log, want one line:\n%s", got)
			}
			dur := strings.Index(got, `"duration_us":`)
			end := strings.IndexAny(got[max(dur, 0):], ",}")
			if dur < 0 || end < 0 {
				t.Fatalf("access log line without duration: %s", got)
			}
			got = got[:dur] + "DUR" + got[dur+end:]
			want := `"path":"/x","attempt":1,` + tc.log
			if !strings.HasSuffix(got, want) {
				t.Errorf("access log line\n%s\nwant it to end in\n%s", got, want)
			}
		})
	}
}
