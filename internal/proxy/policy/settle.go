package policy

// The end of an attempt, one rule for every engine (forward.Exchange's
// AfterAttempt and Abandon for both HTTP/1.1 engines, the h2 relay's
// callState.judge and judgeGone): Settle tells the breaker, Judge also
// decides the retry. Keeping it here, not in each engine's glue, is what
// makes "a client's own cancellation is not an upstream failure" (issue
// 25) hold the same way on HTTP/1.1 and HTTP/2.

// gRPC codes a server in trouble answers with (google.golang.org/grpc/codes).
const (
	grpcUnknown          = 2
	grpcDeadlineExceeded = 4
	grpcInternal         = 13
	grpcUnavailable      = 14
	grpcDataLoss         = 15
)

// GRPCServerFault reports whether a gRPC code counts as the upstream
// failing, for the circuit breaker: UNKNOWN, DEADLINE_EXCEEDED, INTERNAL,
// UNAVAILABLE, DATA_LOSS (what a server in trouble, or the transport in
// front of it, answers with). The others (NOT_FOUND, RESOURCE_EXHAUSTED,
// ...) are the application's answers and say the server is up.
func GRPCServerFault(code int) bool {
	switch code {
	case grpcUnknown, grpcDeadlineExceeded, grpcInternal, grpcUnavailable, grpcDataLoss:
		return true
	}
	return false
}

// Fault reports whether the attempt failed in a way that, had the client
// stayed, would count against the upstream's breaker: no answer (a
// transport failure), a 5xx, or for gRPC a server-fault code
// (GRPCServerFault; a committed gRPC answer is judged with GRPCCode 0, OK).
// It is independent of --retry-on, which says what is retried, not what
// is a failure.
func (o *Outcome) Fault() bool {
	if o.Cond != CondNone {
		return true
	}
	if o.GRPC {
		return GRPCServerFault(o.GRPCCode)
	}
	return o.Status >= 500
}

// TimeFault reports whether the attempt failed for lack of time: it timed
// out (the proxy's cut), or the upstream answered 504 (HTTP) or
// DEADLINE_EXCEEDED (gRPC). With CallerBound it is not a breaker failure.
func (o *Outcome) TimeFault() bool {
	switch {
	case o.Cond != CondNone:
		return o.Cond == CondTimeout
	case o.GRPC:
		return o.GRPCCode == grpcDeadlineExceeded
	}
	return o.Status == 504
}

// Cancelled reports whether the attempt is the client's own cancellation:
// its client went away (ClientGone) and the attempt failed. A failure then
// (a timeout nobody waited for, the reset of the upstream stream or
// connection the proxy dropped for the client, a 5xx) says nothing about
// the upstream. An answer that did arrive (not a Fault) is the upstream's
// success whether or not anybody reads it.
func (o *Outcome) Cancelled() bool { return o.ClientGone && o.Fault() }

// Settle tells the breaker how the attempt that began with the breaker's
// probe flag (Breaker.Allow) ended, and reports whether the attempt is the
// upstream's to judge:
//
//   - the client's own cancellation (Cancelled): nothing is counted, and a
//     half-open probe's place is given back (Breaker.Cancel), so that the
//     next attempt probes rather than the breaker staying half-open with
//     nobody probing or reopening on a failure nobody saw; false: no
//     retry decision (nobody waits for one; nothing is taken from the
//     retry budget, no denial counted);
//   - an attempt whose bound was the caller's time left (CallerBound)
//     that timed out or was answered 504 / DEADLINE_EXCEEDED (TimeFault):
//     not counted, a probe's place given back, and judged;
//   - a stale connection's failure (Outcome.Stale): not counted, a probe's
//     place given back, and judged (its retry is decided);
//   - a Fault: Breaker.Failure;
//   - anything else: Breaker.Success.
//
// br may be nil (no breaker for the upstream).
func Settle(o *Outcome, br *Breaker, probe bool, now int64) (judged bool) {
	switch {
	case o.Cancelled():
		if br != nil {
			br.Cancel(probe)
		}
		return false
	case o.CallerBound && o.TimeFault():
		// The caller's deadline ran out before the policy's own bound:
		// its budget, not evidence about the upstream (docs/decisions.md,
		// brk19). Judged (a cut reports deadline), not counted, a probe's
		// place given back.
		if br != nil {
			br.Cancel(probe)
		}
	case o.Stale:
		// An upstream closing idle connections is common and says nothing
		// of its health: neither a failure nor a success (a probe's place
		// is given back). An upstream that crashes on every request still
		// opens the breaker: the retry goes on a connection of its own,
		// whose reset is a plain failure.
		if br != nil {
			br.Cancel(probe)
		}
	case o.Fault():
		if br != nil {
			br.Failure(now, probe)
		}
	default:
		if br != nil {
			br.Success(now, probe)
		}
	}
	return true
}

// Judge is the end of an attempt: Settle, then, for an attempt that is
// the upstream's to judge, Decide. The client's own cancellation is
// neither retried nor denied: its decision is the zero Decision (no
// retry, ReasonNone: no Retrycap-Exhausted, no denial to count), and
// Outcome.LoggedError says "cancelled". It does not allocate.
func (p *Policy) Judge(o *Outcome, budget *RetryBudget, br *Breaker, probe bool, now int64) Decision {
	if !Settle(o, br, probe, now) {
		return Decision{}
	}
	return p.Decide(o, budget, br, now)
}
