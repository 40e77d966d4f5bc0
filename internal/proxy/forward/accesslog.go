package forward

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Headers the access log reads (canonical, as fasthttp stores them).
var (
	keyTraceparent = []byte("Traceparent")
	keyRequestID   = []byte("X-Request-Id")
	keyGRPCStatus  = []byte("Grpc-Status")
)

// EnableAccessLog makes the forwarder log every finished attempt into w (--access-log), and
// exports w's dropped lines as retrycap_proxy_access_log_dropped_total. Call it before
// serving.
func (f *Forwarder) EnableAccessLog(w *accesslog.Writer) {
	f.accessLog = w
	f.M.Reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "retrycap_proxy_access_log_dropped_total",
		Help: "Access-log lines dropped because the log's writer fell behind (its ring was full); the requests were served.",
	}, func() float64 { return float64(w.Dropped()) }))
}

// AccessLogRing is a new ring of the access log for one event loop (its single producer), or
// nil when the log is off: the loop's exchanges log into it (Exchange.LogTo) rather than into
// the ring every producer shares. Call it before serving.
func (f *Forwarder) AccessLogRing() *accesslog.Ring {
	if f.accessLog == nil {
		return nil
	}
	return f.accessLog.NewRing(0)
}

// LogTo makes the exchange's attempts go to r (an event loop's ring; nil: the shared one).
// After Begin, which clears it.
func (x *Exchange) LogTo(r *accesslog.Ring) { x.logRing = r }

// logAttempt writes the attempt that just ended (AfterAttempt: now, its transport error's
// condition or its response in resp, the decision on it) to the access log, if there is one:
// a ring slot filled in place, no allocation, no I/O. The line of an answer whose body streams
// (x.end) is filled into its StreamEnd instead, and written when the body ends.
func (x *Exchange) logAttempt(now int64, o *policy.Outcome, d policy.Decision) {
	w := x.f.accessLog
	if w == nil {
		return
	}
	if x.end != nil {
		x.end.w = w
		x.fillRecord(&x.end.rec, now, o, d)
		return
	}
	e := w.BeginOn(x.logRing)
	if e == nil {
		return // dropped, counted
	}
	x.fillRecord(&e.Record, now, o, d)
	w.Commit(e)
}

// fillRecord sets the fields of an attempt's line (logAttempt's).
func (x *Exchange) fillRecord(e *accesslog.Record, now int64, o *policy.Outcome, d policy.Decision) {
	req := x.req
	e.TimeNanos, e.DurationNanos = x.attemptStart, now-x.attemptStart
	e.Upstream, e.Attempt, e.Status, e.GRPCStatus = x.up.Name, x.attempt, o.Status, -1
	e.BudgetIn, e.BudgetOut = policy.LoggedBudget(x.chainOn, x.split, x.attempt)
	// "cancelled" for the client's own cancellation, else the condition
	// (policy.Outcome.LoggedError, as on the h2 relay).
	e.Error = o.LoggedError()
	if o.Cond == policy.CondReset && !o.Cancelled() && x.lastErr != nil && BadAnswer(x.lastErr) {
		// An answer that is no HTTP answer the proxy passes on (BadAnswer)
		// counts as a reset (retried, a breaker failure), as Envoy counts
		// an upstream protocol error; the line tells it from a connection
		// reset, as Envoy's UPE flag does from UR/UC.
		e.Error = "bad-answer"
	}
	if o.Cond == policy.CondNone && x.respSeen&seenGRPCStatus != 0 {
		// Looked up only when the answer has the field (its scan in AfterAttempt): each
		// lookup of an absent name costs a pass over the header.
		if g := x.resp.Header.PeekBytes(keyGRPCStatus); len(g) > 0 {
			e.GRPCStatus = parseSmallInt(g)
		}
	}
	e.Exhausted = d.Exhausted()
	e.SetMethod(req.Header.Method())
	e.SetAuthority(req.Header.Host())
	e.SetPath(req.Header.RequestURI())
	if x.reqSeen&seenTraceparent != 0 {
		e.SetTraceparent(req.Header.PeekBytes(keyTraceparent))
	}
	e.SetKey(x.key)
	if x.reqSeen&seenRequestID != 0 {
		e.SetRequestID(req.Header.PeekBytes(keyRequestID))
	}
	if x.hadBag {
		e.SetStormOp(x.sc.bag)
	} else if x.reqSeen&seenBaggage != 0 {
		e.SetStormOp(req.Header.PeekBytes(keyBaggage))
	}
}

// parseSmallInt reads a non-negative decimal of up to 4 digits; -1 if it is not one.
func parseSmallInt(b []byte) int {
	if len(b) == 0 || len(b) > 4 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
