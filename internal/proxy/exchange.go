package proxy

import (
	"bytes"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// exchange is one forwarded call's policy state, from the request to the
// answer: everything about forwarding that does not depend on how the bytes
// move. Both engines drive the same exchange (one code path for the chain
// budget, the key, the breaker, the retry budget and the answer):
//
//	if x.begin(...) {
//		for x.nextAttempt() {
//			err := <send x.req, read the status and headers into x.resp>
//			retry, wait := x.afterAttempt(err)
//			if !retry { break }
//			<after wait> x.waited()
//		}
//	}
//	<write x.resp to the client>; x.end()
//
// forward (proxy.go) blocks on each step on the connection's goroutine; the
// event loop (loop_linux.go) runs the steps from its callbacks and timers.
type exchange struct {
	p    *Proxy
	up   *upstream
	req  *fasthttp.Request
	resp *fasthttp.Response
	sc   *scratch

	key          []byte
	split        policy.Split
	maxAttempts  int
	attempt      int // number of the attempt under way (1-based); 0 before the first
	start        int64
	deadline     int64
	attemptStart int64
	lastErr      error
	lastCond     policy.Condition
	hadBag       bool // the app sent baggage (joined into sc.bag)
	generated    bool
	retryable    bool
	chainOn      bool
	ledgerOn     bool
	chainLimited bool
	probe        bool
	counted      bool // inFlight was raised; end lowers it
}

// begin reads the request's headers (chain budget, hop-by-hop headers,
// Idempotency-Key; seen: the names present, scanRequestHeaders) and sets up
// the call. It returns false when the call is
// already answered in resp without an attempt (the key's chain budget is
// spent). up is nil for a host no --upstreams entry names.
func (x *exchange) begin(p *Proxy, up *upstream, req *fasthttp.Request, resp *fasthttp.Response, seen seen, sc *scratch) bool {
	*x = exchange{p: p, req: req, resp: resp, sc: sc, counted: true}
	p.m.inFlight.Add(1)
	known := up != nil
	if !known {
		up = p.unknown
	}
	x.up = up
	cfg := p.cfg
	x.start = nowNanos()

	x.chainOn = cfg.ChainCap > 0
	n, hadBag, key := p.requestHeadersSeen(&req.Header, seen, sc)
	method := req.Header.Method()
	x.retryable = known && (p.methodRetryable(method) || len(key) > 0) && len(req.Body()) <= cfg.MaxReplayBytes
	if len(key) == 0 && cfg.Entrypoint && (bytes.Equal(method, []byte("POST")) || bytes.Equal(method, []byte("PATCH"))) {
		// Not retried here (the app did not ask for it), but the key lets
		// the client retry safely, and counts those retries against the cap.
		key = newKey()
		req.Header.SetBytesV(headerIdempotencyKey, key)
		x.generated = true
	} else if len(key) > 0 {
		key = append([]byte(nil), key...)
	}
	x.key = key
	x.hadBag = hadBag

	// The attempts the split reserves budget for: none beyond the first
	// when this hop can never retry, except for a generated key, whose
	// reservation is what the client's own retries will spend.
	splitAttempts := up.attempts
	if !x.retryable && !x.generated {
		splitAttempts = 1
	}
	x.ledgerOn = x.chainOn && cfg.Entrypoint && len(key) > 0
	if x.ledgerOn {
		n -= p.ledger.Spent(key, x.start)
		if n <= 0 {
			x.fail(policy.ReasonChain, "chain budget of this Idempotency-Key is spent")
			return false
		}
	}
	x.split = policy.SplitBudget(splitAttempts, n)
	x.maxAttempts = up.attempts
	if x.chainOn && x.split.Attempts < x.maxAttempts {
		x.maxAttempts, x.chainLimited = x.split.Attempts, true
	}
	if !x.retryable {
		x.maxAttempts = 1
	}
	if up.budget != nil {
		up.budget.Deposit(x.start)
	}
	x.deadline = x.start + int64(x.maxAttempts)*int64(cfg.PerTryTimeout)
	// One clock read before each attempt and one after: the breaker, the
	// ledger and the latency metric share them.
	x.attemptStart = x.start
	return true
}

// nextAttempt prepares the next attempt: the chain budget it carries (header
// and baggage), the key's ledger, the breaker's leave. It returns false when
// the breaker refuses, with the answer in resp.
func (x *exchange) nextAttempt() bool {
	x.attempt++
	up, sc := x.up, x.sc
	if x.chainOn {
		b := x.split.BudgetFor(x.attempt)
		sc.num = policy.AppendInt(sc.num[:0], b)
		x.req.Header.SetCanonical(keyBudget, sc.num)
		if x.hadBag {
			sc.out = policy.AppendBaggage(sc.out[:0], sc.bag, b)
			x.req.Header.SetCanonical(keyBaggage, sc.out)
		}
		if x.ledgerOn {
			x.p.ledger.Add(x.key, b, x.attemptStart)
		}
	}
	x.probe = false
	if up.breaker != nil {
		ok, probe := up.breaker.Allow(x.attemptStart)
		if !ok {
			up.m.denied[policy.ReasonBreaker].Inc()
			if x.attempt == 1 {
				x.fail(policy.ReasonBreaker, "circuit breaker open")
				return false
			}
			x.giveUp(policy.ReasonBreaker, x.attempt-1, x.lastErr, x.lastCond)
			return false
		}
		x.probe = probe
	}
	return true
}

// afterAttempt judges the attempt that just ended: err is its transport
// error, else resp holds its status and headers. It returns whether to
// retry and after how long; when not, resp holds the answer for the client.
func (x *exchange) afterAttempt(err error) (retry bool, wait time.Duration) {
	up, resp := x.up, x.resp
	now := nowNanos()
	up.m.attempts.Inc()
	up.m.latency.Observe(float64(now-x.attemptStart) / 1e9)
	o := policy.Outcome{
		Attempt: x.attempt, MaxAttempts: x.maxAttempts, ChainLimited: x.chainLimited,
		Retryable: x.retryable, Remaining: time.Duration(x.deadline - now),
	}
	if err != nil {
		o.Cond = classify(err)
		x.lastErr, x.lastCond = err, o.Cond
	} else {
		x.lastErr, x.lastCond = nil, policy.CondNone
		o.Status = resp.StatusCode()
		seen := scanResponseHeaders(&resp.Header)
		o.ExhaustedResp = seen&seenExhausted != 0 && len(resp.Header.Peek(policy.HeaderExhausted)) > 0
		if (o.Status == 429 || o.Status == 503) && seen&seenRetryAfter != 0 {
			o.RetryAfter, o.HasRetryAfter = parseRetryAfter(resp.Header.Peek(headerRetryAfter), time.Now())
		}
	}
	if up.breaker != nil {
		if err != nil || o.Status >= 500 {
			up.breaker.Failure(now, x.probe)
		} else {
			up.breaker.Success(now, x.probe)
		}
	}
	d := x.p.pol.Decide(&o, up.budget, up.breaker, now)
	if d.Retry {
		up.m.retries.Inc()
		x.attemptStart = now
		return true, d.Wait
	}
	if d.Reason != policy.ReasonNone {
		up.m.denied[d.Reason].Inc()
	}
	if !x.p.pol.Failed(&o) && err == nil {
		// Success or a non-retryable answer: pass it on as is.
		x.finish()
		return false, 0
	}
	x.giveUp(d.Reason, x.attempt, err, o.Cond)
	return false, 0
}

// waited restarts the attempt clock after a backoff.
func (x *exchange) waited() { x.attemptStart = nowNanos() }

// end closes the call's accounting; safe to call more than once and on an
// exchange that never began.
func (x *exchange) end() {
	if x.counted {
		x.p.m.inFlight.Add(-1)
		x.counted = false
	}
}

// finish cleans the upstream response and counts it. The answer passes on
// the upstream's Date and Content-Type as they were (none stays none); only
// the proxy's own answers (giveUp without a response, fail) carry its Date.
func (x *exchange) finish() {
	resp := x.resp
	setServerDefaults(&resp.Header)
	stripResponseHopByHop(&resp.Header, x.sc)
	resp.Header.ResetConnectionClose()
	// "A failed response" is any the client may want to retry: a 5xx, a 429 (Too Many
	// Requests asks for exactly that) or a status --retry-on names.
	if st := resp.StatusCode(); x.generated && (st >= 500 || st == fasthttp.StatusTooManyRequests || x.p.pol.RetryOn.Status(st)) {
		resp.Header.SetBytesV(headerIdempotencyKey, x.key)
	}
	x.up.m.code(resp.StatusCode())
}

// giveUp ends a call whose last attempt failed: the last upstream response
// marked Retrycap-Exhausted when the reason is one of the four, or a 5xx
// made by the proxy when there was no response.
func (x *exchange) giveUp(reason policy.Reason, attempts int, err error, cond policy.Condition) {
	resp := x.resp
	if err == nil {
		if reason.Exhausts() {
			resp.Header.Set(policy.HeaderExhausted, reason.String())
		}
		x.finish()
		return
	}
	status := fasthttp.StatusServiceUnavailable
	if !reason.Exhausts() {
		status = fasthttp.StatusBadGateway
		if cond == policy.CondTimeout {
			status = fasthttp.StatusGatewayTimeout
		}
	}
	resp.Reset()
	resp.SetStatusCode(status)
	resp.Header.SetContentType("text/plain; charset=utf-8")
	if reason.Exhausts() {
		resp.Header.Set(policy.HeaderExhausted, reason.String())
	}
	msg := fmt.Sprintf("retrycap-proxy: upstream %s: %d attempt(s), last failed with %s (%v)", x.up.name, attempts, cond, err)
	if reason != policy.ReasonNone {
		msg += "; not retried: " + reason.String()
	}
	resp.SetBodyString(msg + "\n")
	if x.generated {
		resp.Header.SetBytesV(headerIdempotencyKey, x.key)
	}
	x.up.m.code(status)
}

// fail answers with the proxy's own 503 before any attempt was made.
func (x *exchange) fail(reason policy.Reason, why string) {
	resp := x.resp
	resp.Reset()
	resp.SetStatusCode(fasthttp.StatusServiceUnavailable)
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.Header.Set(policy.HeaderExhausted, reason.String())
	resp.SetBodyString("retrycap-proxy: upstream " + x.up.name + ": " + why + "\n")
	x.up.m.code(fasthttp.StatusServiceUnavailable)
}
