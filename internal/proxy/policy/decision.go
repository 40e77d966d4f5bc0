package policy

import "time"

// Reason says why a call stopped retrying. The first four and deadline are
// the values of the Retrycap-Exhausted header; the rest are only metric labels.
type Reason uint8

// Reasons, in the order Decide checks them.
const (
	ReasonNone           Reason = iota
	ReasonAttempts              // the upstream's attempts are used up
	ReasonChain                 // the chain budget allowed fewer attempts
	ReasonBudget                // the retry budget had no room
	ReasonBreaker               // the circuit breaker is open
	ReasonNotRetryable          // method, missing key or body size
	ReasonExhaustedBelow        // the response already carries Retrycap-Exhausted
	ReasonRetryAfter            // Retry-After (gRPC: grpc-retry-pushback-ms) is past the call's deadline or asks for no retry
	ReasonDeadline              // the caller's deadline (Retrycap-Deadline) cut the attempt or leaves no room for a retry
)

// NumReasons is the number of Reason values (for metric arrays).
const NumReasons = 9

func (r Reason) String() string {
	switch r {
	case ReasonAttempts:
		return "attempts"
	case ReasonChain:
		return "chain"
	case ReasonBudget:
		return "budget"
	case ReasonBreaker:
		return "breaker"
	case ReasonNotRetryable:
		return "not-retryable"
	case ReasonExhaustedBelow:
		return "exhausted-below"
	case ReasonRetryAfter:
		return "retry-after"
	case ReasonDeadline:
		return "deadline"
	}
	return "none"
}

// Exhausts reports whether giving up for this reason marks the response
// with Retrycap-Exhausted.
func (r Reason) Exhausts() bool {
	return (r >= ReasonAttempts && r <= ReasonBreaker) || r == ReasonDeadline
}

// Policy is the per-proxy retry configuration that Decide reads.
type Policy struct {
	RetryOn     RetryOn
	BackoffBase time.Duration
	BackoffMax  time.Duration
	Jitter      bool
}

// Outcome describes the attempt that just finished.
type Outcome struct {
	Attempt       int           // 1-based number of this attempt
	MaxAttempts   int           // attempts this call may make (after the chain split)
	ChainLimited  bool          // MaxAttempts is below the upstream's attempts because of the chain budget
	Cond          Condition     // transport failure, CondNone if a response arrived
	Status        int           // response status when Cond == CondNone
	GRPC          bool          // a gRPC call: judged by GRPCCode, never by Status
	GRPCCode      int           // grpc-status when GRPC and Cond == CondNone
	PushbackStop  bool          // gRPC: grpc-retry-pushback-ms asked for no retry (negative or malformed)
	Retryable     bool          // method, Idempotency-Key and body size allow a retry
	ExhaustedResp bool          // the response carries Retrycap-Exhausted
	RetryAfter    time.Duration // from the response (gRPC: grpc-retry-pushback-ms); valid if HasRetryAfter
	HasRetryAfter bool
	Remaining     time.Duration // time left before the call's deadline
	// Deadline is the caller's (Retrycap-Deadline, grpc-timeout); DeadlineCut says the
	// attempt's timeout was the time left, not the per-try timeout, and it timed out; PerTry
	// and Arrived (the time the call arrived with) size the least room a retry needs.
	Deadline    Deadline
	DeadlineCut bool
	PerTry      time.Duration
	Arrived     time.Duration
	// CallerBound: the attempt's time bound, and so the deadline it carried
	// upstream, was the caller's time left, shorter than the policy's own
	// bound (the per-try timeout; with none, --max-time-to-answer): a cut
	// by it, or an upstream's 504 / DEADLINE_EXCEEDED, is the caller's
	// budget running out, not a breaker failure (Settle).
	CallerBound bool
	// ClientGone: the client went away while the attempt ran (closed or
	// reset its connection, RST_STREAM): a failed attempt is then its own
	// cancellation, not the upstream's failure (Cancelled, Settle).
	ClientGone bool
	// Stale: the attempt failed on a reused pooled connection before any
	// byte of an answer, after bytes of a replayable request were written
	// (the upstream's idle close racing the reuse, or a crash after it read
	// the request: the two look the same). It may have run, so repeating it
	// is an attempt (counted against the attempts, the chain budget, the
	// retry budget and the deadline), retried whatever --retry-on says, as
	// Go's transport re-sends it, at once (the connection was stale, not the
	// upstream slow), and not a breaker failure (Settle).
	Stale bool
}

// Failed reports whether the outcome is a failure that retryOn covers.
func (p *Policy) Failed(o *Outcome) bool {
	if o.Cond != CondNone {
		return p.RetryOn.Cond(o.Cond)
	}
	if o.GRPC {
		return p.RetryOn.GRPC(o.GRPCCode)
	}
	return p.RetryOn.Status(o.Status)
}

// Decision is what to do after an attempt.
type Decision struct {
	Retry  bool
	Wait   time.Duration // before the retry
	Reason Reason        // why not, when a retryable failure is not retried
}

// Decide is the retry decision: given the outcome of an attempt, whether
// to retry and after how long. It consults the breaker and withdraws from
// the budget only when everything else allows a retry, so denied retries
// cost the budget nothing. It does not allocate.
func (p *Policy) Decide(o *Outcome, budget *RetryBudget, br *Breaker, now int64) Decision {
	if o.DeadlineCut {
		// Cut by the caller's deadline (whether or not --retry-on names
		// timeouts): nobody waits for a retry.
		return Decision{Reason: ReasonDeadline}
	}
	if !o.Stale && !p.Failed(o) {
		return Decision{}
	}
	if o.ExhaustedResp {
		return Decision{Reason: ReasonExhaustedBelow}
	}
	if !o.Retryable {
		return Decision{Reason: ReasonNotRetryable}
	}
	if o.Attempt >= o.MaxAttempts {
		if o.ChainLimited {
			return Decision{Reason: ReasonChain}
		}
		return Decision{Reason: ReasonAttempts}
	}
	var wait time.Duration
	if !o.Stale {
		wait = Backoff(p.BackoffBase, p.BackoffMax, o.Attempt, p.Jitter)
	}
	if o.PushbackStop {
		return Decision{Reason: ReasonRetryAfter}
	}
	// gRPC's pushback applies to any retryable code (gRPC A6); Retry-After
	// only to 429 and 503.
	if o.HasRetryAfter && (o.GRPC || o.Status == 429 || o.Status == 503) {
		if o.RetryAfter >= o.Remaining {
			return Decision{Reason: ReasonRetryAfter}
		}
		wait = o.RetryAfter
	}
	if !o.Deadline.RetryFits(now, wait, o.PerTry, o.Arrived) {
		return Decision{Reason: ReasonDeadline}
	}
	if br != nil && !br.Closed(now) {
		return Decision{Reason: ReasonBreaker}
	}
	if budget != nil && !budget.TryWithdraw(now) {
		return Decision{Reason: ReasonBudget}
	}
	return Decision{Retry: true, Wait: wait}
}
