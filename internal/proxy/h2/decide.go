package h2

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// The policy of one call, shared by both engines (the stdlib path in
// handler.go and the frame relay in relay*.go): what a request's headers
// mean for its retries (setup), the headers each attempt carries
// (attemptHeaders), what to do with an attempt's result (judge), and the
// answers the proxy writes itself (ownAnswer, giveUp, deadlineAnswer) or
// adds to an upstream's (headerExtras, trailerExtras, brokenTrailers).
// Either engine only moves bytes; nothing here is written twice.

// reqHeaders is a request's header fields as an engine holds them:
// http.Header (canonical keys) or fieldHeaders (HPACK fields, lower case).
type reqHeaders interface {
	Values(key string) []string
}

// fieldHeaders is a decoded HPACK header list as reqHeaders.
type fieldHeaders []hpack.HeaderField

// Values returns the values of the regular fields named key (any case).
func (f fieldHeaders) Values(key string) []string {
	var out []string
	for i := range f {
		if len(f[i].Name) == len(key) && f[i].Name[0] != ':' && strings.EqualFold(f[i].Name, key) {
			out = append(out, f[i].Value)
		}
	}
	return out
}

// eachValue calls fn with every value of the regular fields named key
// (lower case) without collecting them: no allocation on the relay's
// header list.
func eachValue(h reqHeaders, key string, fn func(v string)) {
	if f, ok := h.(*fieldHeaders); ok {
		for i := range *f {
			if hf := &(*f)[i]; len(hf.Name) == len(key) && strings.EqualFold(hf.Name, key) {
				fn(hf.Value)
			}
		}
		return
	}
	for _, v := range h.Values(key) {
		fn(v)
	}
}

func first(h reqHeaders, key string) string {
	if vs := h.Values(key); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// callState is one call's policy state.
type callState struct {
	h         *Handler
	up        *Upstream
	m         *upMetrics
	known     bool
	grpc      bool
	addr      string
	method    string
	authority string
	path      string
	hdr       reqHeaders
	// contentLength is the request's declared body length, -1 unknown.
	contentLength int64
	start         int64
	end           int64 // the deadline the policy reads (pushback, Retry-After)
	// dl is the caller's deadline (Config.Now's clock): the smallest of
	// grpc-timeout (gRPC calls), Retrycap-Deadline, its baggage member and
	// --max-time-to-answer (deadlineIn); arrived is the time it left when
	// the call arrived; dlField: the request carried Retrycap-Deadline or
	// a well-formed baggage member (a gRPC call, whose deadline travels in
	// grpc-timeout, forwards them too only then).
	dl      policy.Deadline
	arrived time.Duration
	dlField bool
	// callerDl: dl is the caller's, lower than --max-time-to-answer
	// (policy.CallerSet): an attempt bounded by it is not a breaker
	// failure when it runs out of time (policy.Outcome.CallerBound).
	callerDl bool
	// perTry is the upstream's per-try timeout (its own, else
	// --per-try-timeout).
	perTry  time.Duration
	chainOn bool
	split   policy.Split
	hadBag  bool
	bag     string
	// retryable: the call may be re-sent (a gRPC call always, until its
	// messages overflow the replay buffer; other requests by method or key).
	retryable    bool
	maxAttempts  int
	chainLimited bool
	key          string   // Idempotency-Key, "" for none
	generated    bool     // key was generated here (entrypoint, keyless POST/PATCH)
	ledgerOn     bool     // the key is charged in the entry proxy's ledger
	otherKeys    [][]byte // the call's other idempotency-key values, charged too (nil: one)
	attemptStart int64
	// relaying: an attempt's answer is passed on (judge), whose end the
	// stream tells (endRelayed); its access-log line waits in endRec
	// (endLog), the stream's (set after initCall), for it.
	relaying bool
	endLog   bool
	endRec   *accesslog.Record
}

// ownAnswer is an answer the proxy writes itself: the status, the header
// fields (lower-case names, no pseudo-headers), and a body ("" for none).
type ownAnswer struct {
	status int
	fields []hpack.HeaderField
	body   string
}

// initCall routes a request into c (hostPort: the CONNECT target, or the
// request's authority) and reads its policy inputs; c is the relay's,
// inside its stream (one allocation per call fewer). A non-nil answer
// means the call is answered without an attempt.
func (h *Handler) initCall(c *callState, hostPort, method, authority, path string, hdr reqHeaders, contentLength int64, grpc bool) *ownAnswer {
	*c = callState{h: h, grpc: grpc, method: method, authority: authority, path: path, hdr: hdr, contentLength: contentLength, start: h.cfg.Now()}
	up := h.cfg.Lookup(hostOf(hostPort))
	c.known = up != nil
	if up == nil {
		up = h.unknown
	}
	c.up = up
	c.m = h.metricsFor(up, c.grpc)
	if hostPort == "" {
		return c.ownText(policy.ReasonNone, "retrycap-proxy: request has no :authority", http.StatusBadRequest)
	}
	if !c.known && h.cfg.IsSelf != nil && h.cfg.IsSelf(hostPort) {
		// The HTTP/1.1 listener's words (no upstream was tried: the
		// catch-all's name read as if one had been).
		return c.ownText(policy.ReasonNone, strings.TrimSuffix(forward.SelfAddressedBody(hostPort), "\n"), http.StatusLoopDetected)
	}
	c.addr = up.Addr
	if c.addr == "" {
		hp := hostPort
		if _, _, err := net.SplitHostPort(hp); err != nil {
			hp = net.JoinHostPort(hp, "80")
		}
		c.addr = hp
		if h.cfg.Resolve != nil {
			c.addr = h.cfg.Resolve(hp)
		}
	}
	if a := c.setup(); a != nil {
		return a
	}
	if c.known && c.up.Budget != nil {
		c.up.Budget.Deposit(c.start)
	}
	return nil
}

// setup reads the request's policy inputs: deadline, chain budget, whether
// it may be retried, and the split of the chain budget over its attempts.
// A non-nil answer means the call is answered without an attempt (its
// key's chain budget is spent).
func (c *callState) setup() *ownAnswer {
	h := c.h
	fits := c.contentLength < 0 || c.contentLength <= int64(h.cfg.MaxReplayBytes)
	c.perTry = h.cfg.PerTryTimeout
	if c.up.PerTryTimeout > 0 {
		c.perTry = c.up.PerTryTimeout
	}
	if keys := c.hdr.Values(hdrIdempotencyKey); len(keys) > 1 {
		// Several keys: the first non-empty one is the key, each is charged
		// (policy.KeyLedger.AddAll).
		bs := make([][]byte, len(keys))
		for i, k := range keys {
			bs[i] = []byte(k)
		}
		var k []byte
		k, c.otherKeys = policy.OtherKeys(bs)
		c.key = string(k)
	} else {
		c.key = first(c.hdr, hdrIdempotencyKey)
	}
	if c.grpc {
		c.retryable = c.known && fits
	} else {
		c.retryable = c.known && (h.methods[c.method] || policy.KeyRetryable([]byte(c.key), c.up.Dedup)) && fits
	}
	n := 0
	c.chainOn = h.cfg.ChainCap > 0
	if c.chainOn {
		n = h.cfg.ChainCap
		for _, v := range c.hdr.Values(policy.HeaderBudget) {
			n = policy.IncomingBudget([]byte(v), true, nil, false, n)
		}
		// Baggage past W3C Baggage's 8,192 bytes is neither read nor
		// rewritten (passed on as it came): joined and re-encoded as one
		// field, an HPACK-indexed list of a few hundred bytes on the wire
		// cost 1 MB per attempt in memory and upstream (TestBaggageBombBounded).
		// The chain budget is safe without it: the retrycap-budget field
		// set here is read too, and the smaller wins downstream.
		size := 0
		eachValue(c.hdr, "baggage", func(v string) { size += len(v) + 1 })
		if bags := c.hdr.Values(hdrBaggage); len(bags) > 0 && size-1 <= maxBaggageBytes {
			c.hadBag = true
			c.bag = strings.Join(bags, ",")
			n = policy.IncomingBudget(nil, false, []byte(c.bag), true, n)
		}
	}
	if c.deadlineIn() {
		c.m.denied[policy.ReasonDeadline].Inc()
		return c.noTimeLeft()
	}
	if c.key == "" && h.ledger != nil && !c.grpc && (c.method == http.MethodPost || c.method == http.MethodPatch) {
		// As on the HTTP/1.1 path (forward.Exchange.Begin): not retried
		// here (the app did not ask for it), but the key lets the client
		// retry safely and counts those retries against the cap.
		c.key, c.generated = string(policy.NewKey()), true
		c.retryable = c.known && policy.KeyRetryable([]byte(c.key), c.up.Dedup) && fits // only toward an upstream that deduplicates
	}
	// Unknown hosts too, as on the HTTP/1.1 path: the key's budget is the
	// chain's, wherever the call went.
	c.ledgerOn = c.chainOn && h.ledger != nil && c.key != ""
	if c.ledgerOn {
		n -= h.ledger.SpentMost([]byte(c.key), c.otherKeys, c.start)
		if n <= 0 {
			c.m.denied[policy.ReasonChain].Inc()
			return c.ownAnswer(policy.ReasonChain, "chain budget of this Idempotency-Key is spent", 0)
		}
	}
	// The attempts the split reserves budget for: none beyond the first
	// when this hop can never retry, except for a generated key, whose
	// reservation is what the client's own retries will spend.
	splitAttempts := c.up.Attempts
	if !c.retryable && !c.generated {
		splitAttempts = 1
	}
	c.split = policy.SplitBudget(splitAttempts, n)
	c.maxAttempts = max(c.up.Attempts, 1)
	if c.chainOn && c.split.Attempts < c.maxAttempts {
		c.maxAttempts, c.chainLimited = c.split.Attempts, true
	}
	if !c.retryable {
		c.maxAttempts = 1
	}
	c.end = c.start + int64(c.maxAttempts)*int64(c.perTry)
	if c.dl.Set() && c.start+int64(c.arrived) < c.end {
		c.end = c.start + int64(c.arrived)
	}
	return nil
}

// maxBaggageBytes is the most baggage (its fields joined) the relay reads
// and rewrites: W3C Baggage's limit on a baggage string.
const maxBaggageBytes = 8192

// deadlineIn resolves the caller's deadline, by the HTTP/1.1 path's rules
// (policy.IncomingDeadline): the smallest well-formed value of every
// Retrycap-Deadline field, every retrycap-deadline baggage member (read,
// as there, when chain budgeting joined the baggage), every grpc-timeout
// of a gRPC call (policy.ParseGRPCTimeout) and --max-time-to-answer wins;
// a malformed one counts as absent, so a caller can lower the bound, never
// raise it. It reports whether the time is gone already (less than a
// millisecond left, Retrycap-Deadline's unit): the call is then answered
// at once, nothing forwarded.
func (c *callState) deadlineIn() (gone bool) {
	var d time.Duration
	ok := false
	if m := c.h.cfg.MaxTimeToAnswer; m > 0 {
		d, ok = m, true
	}
	lower := func(v time.Duration) {
		if !ok || v < d {
			d, ok = v, true
		}
	}
	eachValue(c.hdr, fieldDeadline, func(v string) {
		c.dlField = true
		if ms, good := policy.ParseDeadlineList([]byte(v)); good {
			lower(time.Duration(ms) * time.Millisecond)
		}
	})
	if c.hadBag {
		if ms, good := policy.ParseDeadlineBaggage([]byte(c.bag)); good {
			c.dlField = true
			lower(time.Duration(ms) * time.Millisecond)
		}
	}
	if c.grpc {
		eachValue(c.hdr, fieldTimeout, func(v string) {
			if g, good := policy.ParseGRPCTimeout([]byte(v)); good {
				lower(g)
			}
		})
	}
	c.dl, c.arrived = policy.DeadlineAt(c.start, d, ok), d
	c.callerDl = policy.CallerSet(d, ok, c.h.cfg.MaxTimeToAnswer)
	return ok && d < time.Millisecond
}

// tryTimeout is the timeout of an attempt starting at now: min(the
// upstream's per-try timeout, the caller's time left); cut says the
// deadline is the bound (an attempt it ends is not retried, reason
// deadline).
func (c *callState) tryTimeout(now int64) (time.Duration, bool) {
	t, cut := c.dl.TryTimeout(now, c.perTry)
	if t <= 0 {
		t = time.Nanosecond
	}
	return t, cut
}

// Lower-case names of the fields attemptHeaders sets.
const (
	fieldBudget   = "retrycap-budget"
	fieldBaggage  = "baggage"
	fieldKey      = "idempotency-key"
	fieldPrevious = "grpc-previous-rpc-attempts"
	fieldTimeout  = policy.HeaderGRPCTimeout
	fieldDeadline = "retrycap-deadline"
)

// attemptHeaders are the fields attempt n, starting at now, sets on the
// request, each replacing the request's own of that name: the chain budget
// (header and baggage), a generated key, for gRPC
// grpc-previous-rpc-attempts, and the caller's time left, reduced by the
// time spent here: grpc-timeout on a gRPC call (in gRPC's unit grammar),
// Retrycap-Deadline and the baggage member (when there is baggage) on any
// other, and on a gRPC call that carried either; each rounded down, so a
// hop only lowers it. It charges the key ledger for the attempt.
func (c *callState) attemptHeaders(n int, now int64, out []hpack.HeaderField) []hpack.HeaderField {
	var bag []byte
	if c.chainOn {
		b := c.split.BudgetFor(n)
		out = append(out, hpack.HeaderField{Name: fieldBudget, Value: strconv.Itoa(b)})
		if c.ledgerOn {
			c.h.ledger.AddAll([]byte(c.key), c.otherKeys, b, c.attemptStart)
		}
		if c.hadBag {
			bag = policy.AppendBaggage(nil, []byte(c.bag), b)
		}
	}
	if c.generated {
		out = append(out, hpack.HeaderField{Name: fieldKey, Value: c.key})
	}
	if c.grpc && n > 1 {
		out = append(out, hpack.HeaderField{Name: fieldPrevious, Value: strconv.Itoa(n - 1)})
	}
	if c.dl.Set() {
		if c.grpc {
			var buf [16]byte
			out = append(out, hpack.HeaderField{Name: fieldTimeout, Value: string(policy.AppendGRPCTimeout(buf[:0], c.dl.Left(now)))})
		}
		if ms := c.dl.HeaderMs(now); !c.grpc || c.dlField {
			out = append(out, hpack.HeaderField{Name: fieldDeadline, Value: strconv.FormatInt(ms, 10)})
			if c.hadBag {
				if bag == nil {
					bag = []byte(c.bag)
				}
				bag = policy.AppendDeadlineBaggage(nil, bag, ms)
			}
		}
	}
	if bag != nil {
		out = append(out, hpack.HeaderField{Name: fieldBaggage, Value: string(bag)})
	}
	return out
}

// allow asks the breaker for attempt n's go-ahead; ok false counts the
// denial.
func (c *callState) allow(now int64) (ok, probe bool) {
	br := c.up.Breaker
	if br == nil || !c.known {
		return true, false
	}
	ok, probe = br.Allow(now)
	if !ok {
		c.m.denied[policy.ReasonBreaker].Inc()
	}
	return ok, probe
}

// outcome is what one attempt ended in, as the decision reads it.
type outcome struct {
	err       error // transport failure; nil if an answer came
	cond      policy.Condition
	status    int  // HTTP status of the answer
	exhausted bool // the answer carries Retrycap-Exhausted (headers or trailers)
	// gRPC:
	committed  bool     // a message came (is reaching the client): never retried
	eof        bool     // the answer ended without a message
	code       int      // grpc-status (or mapped from the HTTP status)
	inTrails   bool     // the status came in trailers after headers (not trailers-only)
	pushback   []string // grpc-retry-pushback-ms, from the headers or else the trailers
	retryAfter string   // plain HTTP/2: Retry-After
	gone       bool     // the client cancelled (judgeGone), or had left when the attempt ended (rstream.decide)
	cut        bool     // the caller's deadline ended the attempt (not retried: deadline)
	// answered: the transport failure came after the upstream sent a
	// header block (or DATA, or broke the protocol on the stream): a
	// gRPC call is then not retried, and given up INTERNAL (giveUp).
	answered bool
	// cancelled: judged the client's own cancellation (gone, and a
	// failure: policy.Outcome.Cancelled), set by judge.
	cancelled bool
	// interim: a 1xx of this attempt went to the client
	// (--pass-interim-answers): not retried, whatever follows.
	interim bool
}

// judge is the end of attempt n (started with the breaker's probe flag):
// the breaker told, the retry decision, the metrics and the access-log
// line. replayable is whether the request body can still be re-sent.
func (c *callState) judge(n int, probe, replayable bool, res *outcome) policy.Decision {
	h := c.h
	now := h.cfg.Now()
	c.m.attempts.Inc()
	o := policy.Outcome{
		Attempt: n, MaxAttempts: c.maxAttempts, ChainLimited: c.chainLimited,
		Retryable: c.retryable && replayable,
		Remaining: time.Duration(c.end - now), GRPC: c.grpc, Cond: res.cond,
		Deadline: c.dl, PerTry: c.perTry, Arrived: c.arrived,
		DeadlineCut: res.err != nil && res.cut,
	}
	if c.callerDl {
		// Bounded by the caller's time left, not the per-try timeout:
		// cut by it, or with it as the deadline forwarded at the
		// attempt's start (an upstream's DEADLINE_EXCEEDED or 504).
		_, startCut := c.dl.TryTimeout(c.attemptStart, c.perTry)
		o.CallerBound = res.cut || startCut
	}
	if c.grpc && res.err != nil && res.answered {
		// The upstream answered, then the attempt failed (its head
		// malformed, a reset or a lost connection after it): the call
		// ran there. gRPC A6 commits a call at its response headers;
		// re-sent, a call grpc-go would have read once ran again (a
		// trailers-only grpc-status 0 without :status: three executions).
		// As a keyless POST after a 1xx on either path: not-retryable.
		o.Retryable = false
	}
	if res.interim {
		// Its 1xx went to the client: its answer began (as a keyless
		// POST after a 1xx on the HTTP/1.1 path, and Envoy's router).
		o.Retryable = false
	}
	if res.err == nil {
		o.Status = res.status
		o.ExhaustedResp = res.exhausted
		if c.grpc {
			o.GRPCCode = res.code
			if !res.committed {
				o.RetryAfter, o.HasRetryAfter, o.PushbackStop = parsePushback(res.pushback)
			} else {
				// Committed: a message reached (is reaching) the client;
				// judged OK (no breaker fault), never retried.
				o.Retryable = false
				o.GRPCCode = codeOK
			}
		} else if res.retryAfter != "" && (o.Status == 429 || o.Status == 503) {
			o.RetryAfter, o.HasRetryAfter = policy.ParseRetryAfter(res.retryAfter, time.Now())
		}
	}
	// The breaker told and the retry decided by the one rule of both
	// protocols (policy.Judge): the client's own cancellation (judgeGone)
	// is neither a breaker failure nor retried. An unknown upstream has no
	// breaker and no retries: nothing to judge.
	o.ClientGone = res.gone
	var d policy.Decision
	if c.known {
		d = h.cfg.Policy.Judge(&o, c.up.Budget, c.up.Breaker, probe, now)
	}
	// An answer neither retried nor failed is passed on (rstream.finish):
	// its line waits for the stream's end, which may cut it. A failed
	// answer that came after its client left is nobody's: its line is
	// written now ("cancelled"), nothing is passed on.
	res.cancelled = o.Cancelled()
	c.relaying = res.err == nil && !d.Retry && !res.cancelled
	c.logAttempt(n, now, &o, res, d)
	if d.Retry {
		c.m.retries.Inc()
	} else if d.Reason != policy.ReasonNone {
		c.m.denied[d.Reason].Inc()
	}
	return d
}

// judgeGone is the end of attempt n because the client went away (it
// reset the stream, or its connection ended) while the attempt was under
// way: judged by the rule of both protocols (policy.Judge with
// ClientGone), its own cancellation, not an upstream failure. It is
// counted as an attempt and logged (error "cancelled"), but the breaker
// is not charged and nothing is decided (there is nobody to answer: no
// retry, no denial, no answer counted, nothing taken from the retry
// budget). A half-open probe the client abandoned told nothing either:
// its place is given back (policy.Breaker.Cancel), so that the next
// attempt probes, rather than the breaker staying half-open with nobody
// probing or being reopened on an upstream nobody saw fail. res holds the
// transport failure the attempt ended in (a reset).
func (c *callState) judgeGone(n int, probe bool, res *outcome) {
	res.gone = true
	c.judge(n, probe, false, res)
}

// ownAnswer is the proxy's own answer: for gRPC a trailers-only
// UNAVAILABLE whose grpc-message says why, else an HTTP status (503 by
// default) with the reason in the body. Both carry Retrycap-Exhausted when
// reason is one of the four. It counts the answer.
func (c *callState) ownAnswer(reason policy.Reason, why string, status int) *ownAnswer {
	return c.ownText(reason, "retrycap-proxy: upstream "+c.up.Name+": "+why, status)
}

// ownText is ownAnswer with the whole message msg (no newline).
func (c *callState) ownText(reason policy.Reason, msg string, status int) *ownAnswer {
	if c.grpc {
		return c.grpcText(reason, msg, codeUnavailable)
	}
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	a := &ownAnswer{status: status}
	if reason.Exhausts() {
		a.fields = append(a.fields, hpack.HeaderField{Name: "retrycap-exhausted", Value: reason.String()})
	}
	if c.generated {
		// The proxy's own answers are all failures the client may retry
		// (502, 503, 504), as forward.Exchange.giveUp returns the key.
		a.fields = append(a.fields, hpack.HeaderField{Name: fieldKey, Value: c.key})
	}
	a.fields = append(a.fields, hpack.HeaderField{Name: "content-type", Value: "text/plain; charset=utf-8"})
	a.body = msg + "\n"
	c.m.code(strconv.Itoa(status))
	return a
}

// grpcText is the proxy's own trailers-only gRPC answer of code with
// grpc-message msg (Retrycap-Exhausted when reason is one of the four),
// counted.
func (c *callState) grpcText(reason policy.Reason, msg string, code int) *ownAnswer {
	a := &ownAnswer{status: http.StatusOK}
	if reason.Exhausts() {
		a.fields = append(a.fields, hpack.HeaderField{Name: "retrycap-exhausted", Value: reason.String()})
	}
	a.fields = append(a.fields,
		hpack.HeaderField{Name: "content-type", Value: "application/grpc"},
		hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(code)},
		hpack.HeaderField{Name: "grpc-message", Value: encodeMessage(msg)})
	c.m.code(codeLabel(code))
	return a
}

// noTimeLeft answers a call whose deadline left no time for its first
// attempt: nothing forwarded. Its words are the HTTP/1.1 path's
// (forward.Exchange.deadlineIn), a gRPC call's grpc-message too: the time
// left in Retrycap-Deadline's unit is 0, whichever field (grpc-timeout,
// Retrycap-Deadline, its baggage member, --max-time-to-answer) set it.
// Before, a gRPC call's read "deadline exceeded: no time left: nothing
// forwarded" (its grpc-status says DEADLINE_EXCEEDED already).
func (c *callState) noTimeLeft() *ownAnswer {
	return c.deadlineText("retrycap-proxy: upstream " + c.up.Name + ": no time left (Retrycap-Deadline: 0): nothing forwarded")
}

// deadlineText answers a call whose deadline passed with message msg (no
// newline): for gRPC a trailers-only DEADLINE_EXCEEDED, else 504; both
// with Retrycap-Exhausted: deadline, as the HTTP/1.1 path answers.
func (c *callState) deadlineText(msg string) *ownAnswer {
	if !c.grpc {
		return c.ownText(policy.ReasonDeadline, msg, http.StatusGatewayTimeout)
	}
	c.m.code(codeLabel(codeDeadline))
	return &ownAnswer{status: http.StatusOK, fields: []hpack.HeaderField{
		{Name: "retrycap-exhausted", Value: policy.ReasonDeadline.String()},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "grpc-status", Value: strconv.Itoa(codeDeadline)},
		{Name: "grpc-message", Value: encodeMessage(msg)},
	}}
}

// giveUp is the answer to a call whose last attempt (of attempts) failed
// in transport (err, cond; cut: its timeout was the call's time left) and
// is not retried for reason.
//
// Its words are the HTTP/1.1 path's (forward.GaveUpBody,
// forward.Exchange.giveUp): the upstream by name and address, the
// condition as the access log names it (bad-answer for an answer the
// relay refused, forward.BadAnswer; was reset), a timeout as the limit
// that ended it (before, the library's "context deadline exceeded", and a
// "deadline exceeded: " the HTTP/1.1 answer lacks). Its status is the
// reason's, as there: 504 (gRPC: DEADLINE_EXCEEDED) for reason deadline
// only. Before, any failure given up after the deadline had passed was
// the deadline's answer: a keyless POST reset after its time ran out was
// a 504 "not retried: deadline" where HTTP/1.1 says 502 "not retried:
// not-retryable" (it never could be retried). A gRPC call whose
// upstream answered before the failure (answered) is INTERNAL.
func (c *callState) giveUp(err error, cond policy.Condition, reason policy.Reason, attempts int, cut, answered bool) *ownAnswer {
	what := cond.String()
	if forward.BadAnswer(err) {
		what = "bad-answer"
	}
	msg := strings.TrimSuffix(forward.GaveUpBody(c.up.Name, c.addr, attempts, what, forward.AttemptWords(err, c.perTry, cut), reason), "\n")
	if reason == policy.ReasonDeadline {
		return c.deadlineText(msg)
	}
	if c.grpc && answered {
		// The call may have run upstream: INTERNAL, as grpc-go reads a
		// stream its server broke (an RST_STREAM INTERNAL_ERROR, a
		// malformed header), not UNAVAILABLE, which a client's own retry
		// policy (gRPC A6) would send again.
		return c.grpcText(reason, msg, codeInternal)
	}
	status := http.StatusServiceUnavailable
	if !reason.Exhausts() {
		status = http.StatusBadGateway
		if cond == policy.CondTimeout {
			status = http.StatusGatewayTimeout
		}
	}
	return c.ownText(reason, msg, status)
}

// headerExtras are the fields added to the headers of an upstream's
// answer passed on after reason: Retrycap-Exhausted (gRPC: here unless the
// status comes in trailers), a generated key on a failed plain answer. It
// counts the answer when its code is known now.
func (c *callState) headerExtras(res *outcome, reason policy.Reason, out []hpack.HeaderField) []hpack.HeaderField {
	exhausted := reason.Exhausts()
	if c.grpc {
		if exhausted && !res.inTrails {
			out = append(out, hpack.HeaderField{Name: "retrycap-exhausted", Value: reason.String()})
		}
		if res.eof {
			c.m.code(codeLabel(res.code))
		}
		return out
	}
	if exhausted {
		out = append(out, hpack.HeaderField{Name: "retrycap-exhausted", Value: reason.String()})
	}
	if c.generated && c.h.failedStatus(res.status) {
		out = append(out, hpack.HeaderField{Name: fieldKey, Value: c.key})
	}
	c.m.code(strconv.Itoa(res.status))
	return out
}

// trailerExtras are the fields added to an upstream's trailers passed on
// (trailers: the upstream's, hasTrails: it sent some); it counts a
// committed gRPC answer by its final code as grpc-go's client reads it:
// the trailers' (grpcRead: none in them is UNKNOWN), or INTERNAL for a
// stream that ended on DATA without trailers ("server closed the stream
// without sending trailers").
func (c *callState) trailerExtras(res *outcome, reason policy.Reason, trailers []hpack.HeaderField, hasTrails bool, out []hpack.HeaderField) []hpack.HeaderField {
	if !c.grpc {
		return out
	}
	if res.inTrails && reason.Exhausts() {
		out = append(out, hpack.HeaderField{Name: "retrycap-exhausted", Value: reason.String()})
	}
	if res.committed {
		code := codeInternal
		if hasTrails {
			code, _ = grpcRead(trailers, 0, false, true)
		}
		c.m.code(codeLabel(code))
	}
	return out
}

// brokenTrailers end a gRPC answer the upstream broke after it began
// (a proper status rather than a reset), counted; one the call's deadline
// ended (onDeadline) is DEADLINE_EXCEEDED marked retrycap-exhausted:
// deadline, as the proxy's other deadline answers (the messages before it
// went through: the client can tell a cut stream from an upstream's own
// DEADLINE_EXCEEDED).
func (c *callState) brokenTrailers(err error) []hpack.HeaderField {
	if errors.Is(err, context.DeadlineExceeded) {
		c.m.code(codeLabel(codeDeadline))
		return []hpack.HeaderField{
			{Name: "retrycap-exhausted", Value: policy.ReasonDeadline.String()},
			{Name: "grpc-status", Value: strconv.Itoa(codeDeadline)},
			{Name: "grpc-message", Value: encodeMessage("retrycap-proxy: " + forward.UpstreamNamed(c.up.Name, c.addr) + ": deadline exceeded while the answer streamed")},
		}
	}
	c.m.code(codeLabel(codeUnavailable))
	return []hpack.HeaderField{
		{Name: "grpc-status", Value: strconv.Itoa(codeUnavailable)},
		{Name: "grpc-message", Value: encodeMessage("retrycap-proxy: " + forward.UpstreamNamed(c.up.Name, c.addr) + " broke the stream after the answer began: " + err.Error())},
	}
}

// logAttempt writes the attempt that just ended (at now) to the access log,
// if there is one, in the HTTP/1.1 path's format: the HTTP status it rode
// on, for gRPC the grpc-status (0 once a message committed the answer: the
// real status comes later, in trailers the decision never waits for). The
// line of an answer passed on (relaying) is filled into endRec and written
// when the stream ends (endRelayed), as the HTTP/1.1 path's streamed
// answers' (forward.StreamEnd).
func (c *callState) logAttempt(n int, now int64, o *policy.Outcome, res *outcome, d policy.Decision) {
	w := c.h.cfg.AccessLog
	if w == nil {
		return
	}
	if c.relaying && c.endRec != nil {
		*c.endRec = accesslog.Record{}
		c.fillRecord(c.endRec, n, now, o, res, d)
		c.endLog = true
		return
	}
	e := w.Begin()
	if e == nil {
		return // dropped, counted by the writer
	}
	c.fillRecord(&e.Record, n, now, o, res, d)
	w.Commit(e)
}

// logOwn writes the line of an answer of the proxy's own that no attempt's
// outcome judged (logAttempt's are): attempt n (0: nothing went upstream),
// the status and grpc-status answered (-1: none), errName its "error".
func (c *callState) logOwn(n, status, grpcStatus int, errName string) {
	w := c.h.cfg.AccessLog
	if w == nil {
		return
	}
	e := w.Begin()
	if e == nil {
		return // dropped, counted by the writer
	}
	var o policy.Outcome
	c.fillRecord(&e.Record, n, c.h.cfg.Now(), &o, &outcome{}, policy.Decision{})
	e.Status, e.GRPCStatus, e.Error = status, grpcStatus, errName
	w.Commit(e)
}

// fillRecord sets the fields of attempt n's line (logAttempt's).
func (c *callState) fillRecord(e *accesslog.Record, n int, now int64, o *policy.Outcome, res *outcome, d policy.Decision) {
	e.TimeNanos, e.DurationNanos = c.attemptStart, now-c.attemptStart
	e.Upstream, e.Attempt, e.Status, e.GRPCStatus = c.up.Name, n, 0, -1
	e.BudgetIn, e.BudgetOut = policy.LoggedBudget(c.chainOn, c.split, n)
	// "cancelled" for the client's own cancellation, else the condition
	// (policy.Outcome.LoggedError, as on the HTTP/1.1 path).
	e.Error = o.LoggedError()
	if o.Cond == policy.CondReset && !o.Cancelled() && forward.BadAnswer(res.err) {
		// An answer the relay refused (forward.BadAnswerError): a reset
		// for retries and the breaker, "bad-answer" on its line, as on
		// the HTTP/1.1 path (forward.Exchange.fillRecord).
		e.Error = "bad-answer"
	}
	if res.err == nil {
		e.Status = res.status
		if c.grpc {
			e.GRPCStatus = res.code
			if res.committed {
				e.GRPCStatus = codeOK
			}
		}
	}
	e.Exhausted = d.Exhausted()
	e.SetMethod([]byte(c.method))
	e.SetAuthority([]byte(c.authority))
	e.SetPath([]byte(c.path))
	e.SetTraceparent([]byte(first(c.hdr, "Traceparent")))
	e.SetKey([]byte(c.key))
	e.SetRequestID([]byte(first(c.hdr, "X-Request-Id")))
	if c.hadBag {
		e.SetStormOp([]byte(c.bag))
	} else {
		e.SetStormOp([]byte(first(c.hdr, hdrBaggage)))
	}
}

// endRelayed is the end of the stream whose answer was passed on: cut ""
// when the answer went out whole (its END_STREAM: the body's end or the
// trailers, whatever their grpc-status), else who cut it
// (accesslog.CutUpstream, ...) after its headers; body is the answer's
// body bytes read from the upstream by then. It counts the cut
// (retrycap_proxy_responses_cut_total) and writes the line logAttempt
// held, with the cut. Once per call; nothing when no answer was passed on.
func (c *callState) endRelayed(cut string, body int64) {
	if !c.relaying {
		return
	}
	c.relaying = false
	if cut != "" {
		c.m.countCut(cut)
	}
	if !c.endLog {
		return
	}
	c.endLog = false
	if cut != "" {
		c.endRec.Cut, c.endRec.BodyBytes = cut, body
	}
	c.h.cfg.AccessLog.CommitRecord(c.endRec)
}
