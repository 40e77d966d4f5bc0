package policy

// The access log's policy fields of one attempt, derived once for both
// engines (forward.Exchange.logAttempt, the h2 relay's
// callState.logAttempt); the rest of the line (method, path, headers) is
// read from each engine's own request representation.

// LoggedBudget is the access log's budget_in and budget_out of attempt n
// (1-based) under split: the chain budget the call arrived with (its
// first attempt's share plus one per further attempt the split reserved)
// and the budget attempt n carried. -1, -1 when the chain budget is off
// (--chain-cap=0, or no split made: on false).
func LoggedBudget(on bool, s Split, n int) (in, out int) {
	if !on {
		return -1, -1
	}
	return s.First + s.Attempts - 1, s.BudgetFor(n)
}

// Exhausted is the access log's exhausted field for a decision: the
// reason a retryable failure was not retried, "" when it was retried or
// needed no retry.
func (d Decision) Exhausted() string {
	if d.Retry || d.Reason == ReasonNone {
		return ""
	}
	return d.Reason.String()
}

// LoggedError is the access log's error field of an attempt: "cancelled"
// for the client's own cancellation (Cancelled), "stale" for a stale pooled
// connection's reset after the request was written (Outcome.Stale), else the transport
// failure's condition ("timeout", "reset", "connect-failure"), "" when an
// answer came.
func (o *Outcome) LoggedError() string {
	if o.Cancelled() {
		return "cancelled"
	}
	if o.Stale {
		return "stale"
	}
	if o.Cond != CondNone {
		return o.Cond.String()
	}
	return ""
}
