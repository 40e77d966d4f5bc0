package forward

import (
	"bytes"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Exchange is one forwarded call's policy state, from the request to the
// answer: everything about forwarding that does not depend on how the bytes
// move. Both engines drive the same exchange (one code path for the chain
// budget, the key, the breaker, the retry budget and the answer):
//
//	if x.Begin(...) {
//		for x.NextAttempt() {
//			err := <send the request, read the status and headers into resp>
//			retry, wait := x.AfterAttempt(err)
//			if !retry { break }
//			<after wait> x.Waited()
//		}
//	}
//	<write resp to the client>; x.End()
//
// The goroutine engine blocks on each step on the connection's goroutine;
// the event loop runs the steps from its callbacks and timers.
type Exchange struct {
	f    *Forwarder
	up   *Upstream
	req  *fasthttp.Request
	resp *fasthttp.Response
	sc   *Scratch
	// logRing: the access log's ring of the event loop serving the exchange (LogTo).
	logRing *accesslog.Ring

	key []byte
	// otherKeys are the request's other Idempotency-Key values (nil for one
	// field): the ledger charges each (policy.KeyLedger.AddAll).
	otherKeys    [][]byte
	split        policy.Split
	maxAttempts  int
	attempt      int // number of the attempt under way (1-based); 0 before the first
	start        int64
	deadline     int64
	attemptStart int64
	lastErr      error
	lastCond     policy.Condition
	hadBag       bool // the app sent baggage (joined into sc.bag)
	// dl is the caller's deadline (Retrycap-Deadline, its baggage member,
	// --max-time-to-answer: the smallest), arrived the time it left when
	// the call arrived; cut says the attempt under way is bounded by it,
	// not by the per-try timeout (TryTimeout).
	dl      policy.Deadline
	arrived time.Duration
	cut     bool
	// callerDl: dl is the caller's, lower than --max-time-to-answer
	// (policy.CallerSet): an attempt cut by it is not a breaker failure.
	callerDl  bool
	generated bool
	// clientGone: the client closed its end while the attempt ran
	// (ClientGone).
	clientGone bool
	// inAttempt: an attempt NextAttempt let out has not been judged yet
	// (AfterAttempt); Abandon judges it as the client's cancellation.
	inAttempt    bool
	retryable    bool
	replayable   bool
	chainOn      bool
	ledgerOn     bool
	chainLimited bool
	probe        bool
	counted      bool // InFlight was raised; End lowers it
	// upstreamAnswer: resp is an upstream's answer, to be written as it
	// came (no Date or Content-Type of the proxy's own), not one the proxy
	// made (which carries the proxy's Date).
	upstreamAnswer bool
	// respSeen is ScanResponseHeaders of the answer in resp, from the
	// AfterAttempt that judged it (finish strips by it: one scan per answer);
	// respScanned says it is there.
	respSeen    Seen
	respScanned bool
	// reqSeen is the request's names (Begin's seen), for the access log's lookups.
	reqSeen Seen
	// streams: the answer AfterAttempt judges next streams its body (Streams); end is the
	// StreamEnd of the one it passed on.
	streams bool
	end     *StreamEnd
	// target is the address the attempts go to (SetTarget), for the
	// answer that names it.
	target string
	// interimSent: an interim (1xx) answer of the attempt under way went
	// to the client (Interim): the attempt is not retried. interimBytes
	// counts the bytes of those passed on (MaxInterimRelayed).
	interimSent  bool
	interimBytes int
}

// Begin reads the request's headers (chain budget, hop-by-hop headers,
// Idempotency-Key; seen: the names present, ScanRequestHeaders) and sets up
// the call. It returns false when the call is
// already answered in resp without an attempt (the key's chain budget is
// spent). up is nil for a host no --upstreams entry names.
func (x *Exchange) Begin(f *Forwarder, up *Upstream, req *fasthttp.Request, resp *fasthttp.Response, seen Seen, sc *Scratch) bool {
	*x = Exchange{f: f, req: req, resp: resp, sc: sc, counted: true, reqSeen: seen}
	f.M.InFlight.Add(1)
	known := up != nil
	if !known {
		up = f.Unknown
	}
	x.up = up
	cfg := f.Cfg
	x.start = NowNanos()

	x.chainOn = cfg.ChainCap > 0
	// Nothing is added to a request: no default Content-Type for a body
	// that came without one.
	req.Header.SetNoDefaultContentType(true)
	if seen&SeenTransferEncoding != 0 && rawHasField(req.Header.RawHeaders(), fasthttp.HeaderTransferEncoding) {
		restoreRawOrder(&req.Header, sc)
	}
	n, hadBag, key := f.requestHeadersSeen(&req.Header, seen, sc)
	if seen&seenIdempotencyKey != 0 && keyFieldsDiffer(&req.Header, key) {
		// Several keys: the first non-empty one is the key, each is charged.
		key, x.otherKeys = policy.OtherKeys(req.Header.PeekAll(headerIdempotencyKey))
	}
	if !x.deadlineIn(hadBag) {
		return false
	}
	if req.Header.ContentLength() == -1 {
		// The body was de-chunked (buffered for replay): it goes framed by
		// its length, the Transfer-Encoding deleted in place (fasthttp's
		// writer would delete it by moving the last field into its place).
		SetContentLength(&req.Header, len(req.Body()), sc)
	}
	method := req.Header.Method()
	if len(key) == 0 && cfg.Entrypoint && (bytes.Equal(method, []byte("POST")) || bytes.Equal(method, []byte("PATCH"))) {
		// Not retried here (the app did not ask for it; unless the upstream
		// deduplicates by key, see replayable), but the key lets the client
		// retry safely, and counts those retries against the cap.
		key = newKey()
		req.Header.SetBytesV(headerIdempotencyKey, key)
		x.generated = true
	} else if len(key) > 0 {
		key = append([]byte(nil), key...)
	}
	x.key = key
	x.hadBag = hadBag
	// Whether the request may reach the upstream more than once: as a
	// retry (a known upstream only), or as the re-send of a pooled
	// connection's failure (MayResend).
	x.replayable = f.replayable(up, method, key, len(req.Body()))
	x.retryable = known && x.replayable

	// The attempts the split reserves budget for: none beyond the first
	// when this hop can never retry, except for a generated key, whose
	// reservation is what the client's own retries will spend.
	splitAttempts := up.Attempts
	if !x.retryable && !x.generated {
		splitAttempts = 1
	}
	x.ledgerOn = x.chainOn && cfg.Entrypoint && len(key) > 0
	if x.ledgerOn {
		n -= f.ledger.SpentMost(key, x.otherKeys, x.start)
		if n <= 0 {
			x.fail(policy.ReasonChain, "chain budget of this Idempotency-Key is spent")
			return false
		}
	}
	x.split = policy.SplitBudget(splitAttempts, n)
	x.maxAttempts = up.Attempts
	if x.chainOn && x.split.Attempts < x.maxAttempts {
		x.maxAttempts, x.chainLimited = x.split.Attempts, true
	}
	if !x.retryable {
		x.maxAttempts = 1
	}
	if up.Budget != nil {
		up.Budget.Deposit(x.start)
	}
	x.deadline = x.start + int64(x.maxAttempts)*int64(up.PerTry)
	if x.dl.Set() && x.start+int64(x.arrived) < x.deadline {
		x.deadline = x.start + int64(x.arrived)
	}
	// One clock read before each attempt and one after: the breaker, the
	// ledger and the latency metric share them.
	x.attemptStart = x.start
	return true
}

// NextAttempt prepares the next attempt: the chain budget it carries (header
// and baggage), the key's ledger, the breaker's leave. It returns false when
// the breaker refuses, with the answer in resp.
func (x *Exchange) NextAttempt() bool {
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
			x.f.ledger.AddAll(x.key, x.otherKeys, b, x.attemptStart)
		}
	}
	if x.dl.Set() {
		// The time left now, rounded down: each hop only lowers it.
		ms := x.dl.HeaderMs(NowNanos())
		if ms == 0 {
			if x.attempt == 1 {
				// Less than a millisecond was left by the time the first
				// attempt would go (Retrycap-Deadline: 1): no answer to
				// pass on, so the proxy's own 504, as for a deadline of 0
				// (giveUp had nothing but the empty response: a 200).
				up.M.Denied[policy.ReasonDeadline].Inc()
				x.failStatus(fasthttp.StatusGatewayTimeout, policy.ReasonDeadline, "no time left (Retrycap-Deadline: 0): nothing forwarded")
				return false
			}
			// A retry whose backoff ran into the deadline (Decide left it
			// room; a stalled machine did not).
			x.giveUp(policy.ReasonDeadline, x.attempt-1, x.lastErr, x.lastCond)
			return false
		}
		sc.num = policy.AppendInt(sc.num[:0], int(ms))
		x.req.Header.SetCanonical(keyDeadline, sc.num)
		if x.hadBag {
			bag := sc.bag
			if x.chainOn {
				bag = sc.out
			}
			sc.out2 = policy.AppendDeadlineBaggage(sc.out2[:0], bag, ms)
			x.req.Header.SetCanonical(keyBaggage, sc.out2)
		}
	}
	x.probe = false
	x.inAttempt = false
	if up.Breaker != nil {
		ok, probe := up.Breaker.Allow(x.attemptStart)
		if !ok {
			up.M.Denied[policy.ReasonBreaker].Inc()
			if x.attempt == 1 {
				x.fail(policy.ReasonBreaker, "circuit breaker open")
				return false
			}
			x.giveUp(policy.ReasonBreaker, x.attempt-1, x.lastErr, x.lastCond)
			return false
		}
		x.probe = probe
	}
	x.inAttempt = true
	return true
}

// AfterAttempt judges the attempt that just ended: err is its transport
// error, else resp holds its status and headers. It returns whether to
// retry and after how long; when not, resp holds the answer for the client.
func (x *Exchange) AfterAttempt(err error) (retry bool, wait time.Duration) {
	up, resp := x.up, x.resp
	now := NowNanos()
	up.M.Attempts.Inc()
	up.M.Latency.Observe(float64(now-x.attemptStart) / 1e9)
	o := policy.Outcome{
		Attempt: x.attempt, MaxAttempts: x.maxAttempts, ChainLimited: x.chainLimited,
		Retryable: x.retryable, Remaining: time.Duration(x.deadline - now),
		Deadline: x.dl, PerTry: up.PerTry, Arrived: x.arrived,
		CallerBound: x.cut && x.callerDl,
	}
	x.respScanned = false
	if err != nil && x.cut && x.dl.Gone(now) && classify(err) == policy.CondReset && !BadAnswer(err) {
		// The upstream closed or reset the connection, no answer begun,
		// once the deadline it was forwarded had passed (less than a
		// millisecond left): a server honouring Retrycap-Deadline ends
		// the call then, racing the proxy's own timer. The answer must not
		// depend on which comes first: the proxy's cut either way (504
		// deadline, not retried, and with CallerBound not a breaker
		// failure), as the h2 relay takes grpc-go's CANCEL then
		// (docs/decisions.md, h1left20).
		err = fasthttp.ErrTimeout
	}
	var stale *StaleError
	if err != nil && errors.As(err, &stale) {
		// A written replayable request that a stale pooled connection lost
		// (policy.Outcome.Stale): its repeat is an attempt. Retryable as
		// replayable: for a host no --upstreams entry names (one attempt)
		// it is then answered as out of attempts, not as not retryable.
		o.Stale, o.Retryable = true, x.replayable
	}
	if x.interimSent {
		// A 1xx of this attempt reached the client: its answer has begun,
		// and another attempt's would follow it (Envoy's router retries
		// no more after passing a 1xx on). Its failure is answered, not
		// retried (Interim).
		o.Retryable = false
	}
	if err != nil {
		o.Cond = classify(err)
		x.lastErr, x.lastCond = err, o.Cond
		o.DeadlineCut = x.cut && o.Cond == policy.CondTimeout
	} else {
		x.lastErr, x.lastCond = nil, policy.CondNone
		o.Status = resp.StatusCode()
		seen := ScanResponseHeaders(&resp.Header)
		x.respSeen, x.respScanned = seen, true
		o.ExhaustedResp = seen&seenExhausted != 0 && len(resp.Header.Peek(policy.HeaderExhausted)) > 0
		if (o.Status == 429 || o.Status == 503) && seen&seenRetryAfter != 0 {
			o.RetryAfter, o.HasRetryAfter = policy.ParseRetryAfter(string(resp.Header.Peek(headerRetryAfter)), time.Now())
		}
	}
	// The breaker told and the retry decided by the one rule of both
	// protocols (policy.Judge): a failure after the client went away is
	// its own cancellation, neither a breaker failure nor retried.
	o.ClientGone = x.clientGone
	d := x.f.pol.Judge(&o, up.Budget, up.Breaker, x.probe, now)
	x.probe = false // reported
	x.inAttempt = false
	if x.streams && err == nil && !d.Retry {
		// Passed on with its body to stream: its line waits for the body's end (StreamEnd).
		x.end = &StreamEnd{up: up}
	}
	x.streams = false
	x.logAttempt(now, &o, d)
	if d.Retry {
		up.M.Retries.Inc()
		if o.Stale {
			x.f.M.StaleResends.Inc()
		}
		x.attemptStart = now
		return true, d.Wait
	}
	if d.Reason != policy.ReasonNone {
		up.M.Denied[d.Reason].Inc()
	}
	if !x.f.pol.Failed(&o) && err == nil {
		// Success or a non-retryable answer: pass it on as is.
		x.finish()
		return false, 0
	}
	x.giveUp(d.Reason, x.attempt, err, o.Cond)
	return false, 0
}

// MayResend reports whether the attempt, having failed on a pooled
// connection before any byte of an answer came back, may be sent again
// (policy.MayResend): wroteAny says whether any byte of the request had
// left for the upstream. Only a re-send after no byte left is the engine's
// own, on a fresh connection within the same attempt (the upstream never
// saw it); after bytes left, the engine hands the exchange the failure as a
// StaleError, and the repeat is the next attempt (AfterAttempt).
func (x *Exchange) MayResend(wroteAny bool) bool { return policy.MayResend(wroteAny, x.replayable) }

// Replayable reports whether the request may reach the upstream more than
// once (an engine checks a pooled connection before it sends one that may
// not).
func (x *Exchange) Replayable() bool { return x.replayable }

// ClientGone tells the exchange, before AfterAttempt, that the client
// closed its end of the connection (or reset it) while the attempt ran: a
// failed attempt is then the client's cancellation, not the upstream's
// failure (AfterAttempt). A half-closed client that still reads gets the
// answer; it is not retried for it.
func (x *Exchange) ClientGone() { x.clientGone = true }

// Abandon ends the attempt under way, if there is one, that will have no
// outcome: its client went away and the engine dropped the attempt. It is
// judged as the h2 relay judges a stream its client reset (policy.Judge
// with ClientGone and a reset): counted in attempts, one access-log line
// with error "cancelled", the breaker not charged (a half-open probe's
// place given back), nothing retried, denied or answered.
func (x *Exchange) Abandon() {
	if !x.inAttempt || x.up == nil {
		return
	}
	up := x.up
	now := NowNanos()
	up.M.Attempts.Inc()
	o := policy.Outcome{
		Attempt: x.attempt, MaxAttempts: x.maxAttempts, ChainLimited: x.chainLimited,
		Cond: policy.CondReset, ClientGone: true,
	}
	x.clientGone = true
	d := x.f.pol.Judge(&o, up.Budget, up.Breaker, x.probe, now)
	x.probe, x.inAttempt = false, false
	x.respScanned = false
	x.logAttempt(now, &o, d)
}

// ClientLeft ends a call whose client closed its end (a FIN) during the
// backoff before a retry: the retry is not sent, as it is not after a
// failed attempt that finds its client gone (policy.Judge), and resp holds
// the last answer for a client that only half-closed. Without it a curl
// --max-time that ran out during an upstream's Retry-After had its retry
// sent after it exited.
func (x *Exchange) ClientLeft() {
	x.clientGone = true
	x.giveUp(policy.ReasonNone, x.attempt, x.lastErr, x.lastCond)
}

// TryTimeout is the timeout of the attempt NextAttempt just prepared:
// min(the upstream's per-try timeout, the caller's time left); the
// upstream's is its own "/TIMEOUT" of --upstreams, else --per-try-timeout. An attempt that times
// out bounded by the deadline is not retried and reports deadline.
func (x *Exchange) TryTimeout() time.Duration {
	t, cut := x.dl.TryTimeout(x.attemptStart, x.up.PerTry)
	x.cut = cut
	if t <= 0 {
		t = time.Nanosecond // gone: the attempt ends at once (NextAttempt refuses a retry then)
	}
	return t
}

// deadlineIn resolves the caller's deadline from every Retrycap-Deadline
// header, the baggage's retrycap-deadline members (read when the app sent
// baggage and chain budgeting joined it into sc.bag) and
// --max-time-to-answer: the smallest valid value wins, a malformed one
// counts as absent (policy.IncomingDeadline). Repeated headers are deleted
// so that the one value NextAttempt sets is all a hop below reads. With no
// time left it answers 504 Retrycap-Exhausted: deadline at once and
// returns false: nothing is forwarded.
func (x *Exchange) deadlineIn(hadBag bool) bool {
	h := &x.req.Header
	var vals [][]byte
	if x.reqSeen&seenDeadline != 0 {
		// Looked up only when the scan saw the name: PeekAll normalizes
		// and searches on every call, for a header most requests lack.
		vals = h.PeekAll(policy.HeaderDeadline)
	}
	d, ok := policy.IncomingDeadline(vals, x.sc.bag, hadBag && x.f.Cfg.ChainCap > 0, x.f.Cfg.MaxTimeToAnswer)
	if len(vals) > 1 {
		removeRequestFields(h, func(k []byte, _ *Scratch) bool { return bytes.EqualFold(k, keyDeadline) }, x.sc)
	}
	x.dl, x.arrived = policy.DeadlineAt(x.start, d, ok), d
	x.callerDl = policy.CallerSet(d, ok, x.f.Cfg.MaxTimeToAnswer)
	if ok && d < time.Millisecond {
		x.up.M.Denied[policy.ReasonDeadline].Inc()
		x.failStatus(fasthttp.StatusGatewayTimeout, policy.ReasonDeadline, "no time left (Retrycap-Deadline: 0): nothing forwarded")
		return false
	}
	return true
}

// SetTarget tells the exchange, after Begin, the address its attempts go
// to (the engine's, as it dials it), for the answer that names it.
func (x *Exchange) SetTarget(addr string) { x.target = addr }

// targetAddr is the address the attempts went to: the engine's
// (SetTarget), else the one the request's host maps to (TargetOf, as the
// goroutine engine's clients dial it), looked up only for an answer that
// names it.
func (x *Exchange) targetAddr() string {
	if x.target != "" {
		return x.target
	}
	return x.f.TargetOf(x.up, x.req.URI().Host())
}

// Waited restarts the attempt clock after a backoff.
func (x *Exchange) Waited() { x.attemptStart = NowNanos() }

// Upstream is the upstream the call goes to (the catch-all for a host no
// --upstreams entry names).
func (x *Exchange) Upstream() *Upstream { return x.up }

// UpstreamAnswer reports whether the answer in resp is an upstream's, to be
// written as it came: with no Date or Content-Type of the proxy's own (the
// answers the proxy makes carry its Date, as fasthttp's server writes them).
func (x *Exchange) UpstreamAnswer() bool { return x.upstreamAnswer }

// End closes the call's accounting; safe to call more than once and on an
// exchange that never began.
func (x *Exchange) End() {
	if x.counted {
		x.f.M.InFlight.Add(-1)
		x.counted = false
	}
}

// finish cleans the upstream response and counts it. The answer passes on
// the upstream's Date and Content-Type as they were (none stays none); only
// the proxy's own answers (giveUp without a response, fail) carry its Date.
// No default Content-Type is set here; the Date is the engine's business
// (UpstreamAnswer): fasthttp's parser and client clear the server's
// NoDefaultDate on a header they fill, and no setter is exported.
func (x *Exchange) finish() {
	resp := x.resp
	x.upstreamAnswer = true
	resp.Header.SetNoDefaultContentType(true)
	// The names seen when the answer was judged: what the exchange adds
	// since (Retrycap-Exhausted) is no hop-by-hop field.
	seen := x.respSeen
	if !x.respScanned {
		seen = ScanResponseHeaders(&resp.Header)
	}
	stripResponseHopByHopSeen(&resp.Header, seen, x.sc)
	resp.Header.ResetConnectionClose()
	if !resp.Header.IsHTTP11() {
		// The proxy's own version on its answer (RFC 9110 2.5), whatever
		// the upstream spoke: its framing toward the client is its own
		// (chunked for a body to the upstream's close), and an
		// "HTTP/1.0" status line over it read as faulty framing (RFC 9112
		// 6.1: Go's client read the chunks as the body, to a close that
		// never came) or, with a length, as a connection to close. A rare
		// branch: fasthttp's parser set the flag from the status line.
		resp.Header.SetProtocol(http11)
	}
	// "A failed response" is any the client may want to retry: a 5xx, a 429 (Too Many
	// Requests asks for exactly that) or a status --retry-on names.
	if st := resp.StatusCode(); x.generated && (st >= 500 || st == fasthttp.StatusTooManyRequests || x.f.pol.RetryOn.Status(st)) {
		resp.Header.SetBytesV(headerIdempotencyKey, x.key)
	}
	x.up.M.Code(resp.StatusCode())
}

// giveUp ends a call whose last attempt failed: the last upstream response
// marked Retrycap-Exhausted when the reason is one of the four, or a 5xx
// made by the proxy when there was no response.
func (x *Exchange) giveUp(reason policy.Reason, attempts int, err error, cond policy.Condition) {
	resp := x.resp
	if err == nil {
		if reason.Exhausts() {
			resp.Header.Set(policy.HeaderExhausted, reason.String())
		}
		x.finish()
		return
	}
	status := fasthttp.StatusServiceUnavailable
	if reason == policy.ReasonDeadline {
		status = fasthttp.StatusGatewayTimeout
	} else if !reason.Exhausts() {
		status = fasthttp.StatusBadGateway
		if cond == policy.CondTimeout {
			status = fasthttp.StatusGatewayTimeout
		}
	}
	x.upstreamAnswer = false
	resp.Reset()
	resp.SetStatusCode(status)
	resp.Header.SetContentType("text/plain; charset=utf-8")
	if reason.Exhausts() {
		resp.Header.Set(policy.HeaderExhausted, reason.String())
	}
	what := cond.String()
	if BadAnswer(err) {
		what = "bad-answer" // as the access log names it
	}
	resp.SetBodyString(GaveUpBody(x.up.Name, x.targetAddr(), attempts, what, AttemptWords(err, x.up.PerTry, x.cut), reason))
	if x.generated {
		resp.Header.SetBytesV(headerIdempotencyKey, x.key)
	}
	x.up.M.Code(status)
}

// fail answers with the proxy's own 503 before any attempt was made.
func (x *Exchange) fail(reason policy.Reason, why string) {
	x.failStatus(fasthttp.StatusServiceUnavailable, reason, why)
}

// failStatus is fail with another status (504 for a deadline gone).
func (x *Exchange) failStatus(status int, reason policy.Reason, why string) {
	resp := x.resp
	x.upstreamAnswer = false
	resp.Reset()
	resp.SetStatusCode(status)
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.Header.Set(policy.HeaderExhausted, reason.String())
	resp.SetBodyString("retrycap-proxy: upstream " + x.up.Name + ": " + why + "\n")
	x.up.M.Code(status)
}

var http11 = []byte("HTTP/1.1")
