package proxy

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An HTTP/1.1 upstream that cuts its connection when the deadline it was
// forwarded (Retrycap-Deadline) passes, as a server honouring it may, is
// the caller's budget running out, not the upstream failing (brk19's rule,
// docs/decisions.md "h1left20"): the same answer as the proxy's own cut
// (504, Retrycap-Exhausted: deadline), not a breaker failure. A cut with
// time left still is one.

// cutsAt hijacks each request that carries Retrycap-Deadline and closes
// its connection (reset: with linger 0) after the time it was given plus
// extra; a request without one is answered 200 "ok".
func cutsAt(reset bool, extra time.Duration) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("Retrycap-Deadline")
		if v == "" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		ms, err := strconv.Atoi(v)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		at := time.Now().Add(time.Duration(ms)*time.Millisecond + extra)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		time.Sleep(time.Until(at)) // the upstream's own timer: part of what it does, not synchronisation
		if tc, ok := conn.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

func TestBreakerUpstreamCutAtForwardedDeadlineHTTP1(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		for _, reset := range []bool{false, true} {
			how := "close"
			if reset {
				how = "reset"
			}
			// Two calls with Retrycap-Deadline: 50 (3 attempts allowed,
			// per-try 2s): the upstream cuts each at the deadline it was
			// given; one attempt each, 504 deadline, the breaker closed;
			// the next caller is answered 200 by the third attempt.
			t.Run(engine+" "+how+" at the deadline", func(t *testing.T) {
				b := newBackend(t, cutsAt(reset, 0))
				p := brkProxy(t, engine, b.addr())
				c := clientFor(p)
				for i := range 2 {
					resp, body := doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "50"})
					if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" {
						t.Fatalf("call %d: %d %q %q, want 504 deadline", i+1, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body)
					}
				}
				if n := waitHits(b, 2); n != 2 {
					t.Fatalf("upstream saw %d attempts, want 2", n)
				}
				if s := breakerState(t, p); s != 0 {
					t.Fatalf("breaker state %v after two calls cut at their own deadline, want 0 (closed)", s)
				}
				if n := counterValue(t, p, "retrycap_proxy_retries_denied_total", map[string]string{"upstream": "svc", "reason": "deadline"}); n != 2 {
					t.Fatalf("retries denied for deadline = %v, want 2", n)
				}
				resp, body := doBody(t, c, "GET", "http://svc/", nil)
				if resp.StatusCode != 200 || body != "ok" || b.hits.Load() != 3 {
					t.Fatalf("next caller: %d %q after %d attempts, want 200 ok after 3", resp.StatusCode, body, b.hits.Load())
				}
			})
			// Control: the same cut with plenty of time left (5s given,
			// cut at once), one attempt per call: a failure each, the
			// breaker open after two, the third caller refused.
			t.Run(engine+" "+how+" with time left", func(t *testing.T) {
				b := newBackend(t, cutsAt(reset, -4900*time.Millisecond))
				p := brkProxy(t, engine, b.addr(), "--upstreams", "svc=1")
				c := clientFor(p)
				for i := range 2 {
					resp, body := doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "5000"})
					if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retrycap-Exhausted") != "attempts" ||
						!strings.Contains(body, "1 attempt(s), last failed with reset (the upstream closed the connection before the whole response: ") {
						t.Fatalf("call %d: %d %q %q, want 503 attempts, failed with reset", i+1, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body)
					}
				}
				if s := breakerState(t, p); s != 1 {
					t.Fatalf("breaker state %v after two cuts with time left, want 1 (open)", s)
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
}

// A POST without a key is sent once whichever way its upstream cuts it: at
// the forwarded deadline (504 deadline) or with time left (502, not
// retryable), the breaker off so that only the retry rule decides.
func TestUpstreamCutAtForwardedDeadlineKeylessPOSTOnce(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range []struct {
			name     string
			deadline string
			extra    time.Duration
			status   int
			reason   string
		}{
			{"at the deadline", "50", 0, http.StatusGatewayTimeout, "deadline"},
			{"with time left", "5000", -4900 * time.Millisecond, http.StatusBadGateway, ""},
		} {
			t.Run(engine+" "+tc.name, func(t *testing.T) {
				b := newBackend(t, cutsAt(true, tc.extra))
				p := startProxyOn(t, engine, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
				resp, body := doBody(t, clientFor(p), "POST", "http://svc/", map[string]string{"Retrycap-Deadline": tc.deadline})
				if resp.StatusCode != tc.status || resp.Header.Get("Retrycap-Exhausted") != tc.reason || !strings.Contains(body, "1 attempt(s)") {
					t.Fatalf("%d %q %q, want %d %q after 1 attempt", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body, tc.status, tc.reason)
				}
				if n := waitHits(b, 1); n != 1 {
					t.Fatalf("upstream saw %d POSTs, want 1", n)
				}
			})
		}
	}
}
