package policy

import (
	"time"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
)

// HeaderDeadline is the request header that carries the time the caller
// still waits for an answer, in whole milliseconds: "Retrycap-Deadline: 0"
// means no time is left (the proxy answers 504 at once and forwards
// nothing). Apps copy it from their inbound request to their outbound calls
// as they copy traceparent.
const HeaderDeadline = "Retrycap-Deadline"

// DeadlineBaggageKey is the W3C baggage member that carries the same value.
const DeadlineBaggageKey = "retrycap-deadline"

// MaxDeadline bounds a parsed deadline: a value above it (a day) is "huge"
// and counts as absent, like a malformed one, so that arithmetic on it can
// never overflow and a junk value never stands in for a real bound (the
// entry's own --max-time-to-answer, when set, still applies). It is
// spec.maxTimeToAnswer's bound (api/v1alpha1/defaults).
const MaxDeadline = defaults.MaxTimeToAnswerMax

const maxDeadlineMs = int64(MaxDeadline / time.Millisecond)

// MinRetryShareNum/MinRetryShareDen is the least share of a try's timeout
// that must be left, after a retry's backoff, for the retry to start: a
// retry that could only run for a sliver of what a try is given would be
// cut by the deadline and answer nobody (it is denied with reason deadline
// instead). With no per-try timeout, the share is of the time the call
// arrived with.
const (
	MinRetryShareNum = 1
	MinRetryShareDen = 2
)

// ParseDeadlineHeader parses one Retrycap-Deadline value: optional
// surrounding spaces/tabs around a decimal integer of milliseconds, 0
// included. Anything else (empty, a sign, junk, a fraction, more than
// MaxDeadline) is malformed and reported as absent (ok=false).
func ParseDeadlineHeader(v []byte) (ms int64, ok bool) {
	v = trimLeadingZeros(trimOWS(v))
	if len(v) == 0 || len(v) > 10 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
	}
	if ms > maxDeadlineMs {
		return 0, false
	}
	return ms, true
}

// ParseDeadlineList parses a Retrycap-Deadline field value that may hold
// several values joined by commas (repeated fields combined, RFC 9110
// 5.3): the smallest well-formed one wins, malformed ones count as absent.
func ParseDeadlineList(v []byte) (ms int64, ok bool) {
	return smallestListItem(v, ParseDeadlineHeader)
}

// ParseDeadlineBaggage finds the retrycap-deadline members of a W3C
// baggage value and parses each like ParseDeadlineHeader: the smallest
// well-formed member wins, malformed ones count as absent.
func ParseDeadlineBaggage(v []byte) (ms int64, ok bool) {
	return smallestBaggageMember(v, DeadlineBaggageKey, ParseDeadlineHeader)
}

// IncomingDeadline resolves the time a call may take from what the app
// propagated and this proxy's own bound: the smallest of every
// well-formed header value, every well-formed baggage member and max (the
// entrypoint's maxTimeToAnswer; 0 = none). A caller can lower the bound,
// never raise it. ok=false: no deadline at all.
func IncomingDeadline(headers [][]byte, baggage []byte, haveBaggage bool, max time.Duration) (d time.Duration, ok bool) {
	var ms int64
	if max > 0 {
		ms, ok = int64(max/time.Millisecond), true
	}
	for _, h := range headers {
		if m, good := ParseDeadlineList(h); good && (!ok || m < ms) {
			ms, ok = m, true
		}
	}
	if haveBaggage {
		if m, good := ParseDeadlineBaggage(baggage); good && (!ok || m < ms) {
			ms, ok = m, true
		}
	}
	return time.Duration(ms) * time.Millisecond, ok
}

// CallerSet reports whether a deadline d that IncomingDeadline (or the h2
// relay's equivalent) resolved is the caller's, lower than the proxy's own
// --max-time-to-answer max (0: none), rather than that bound itself: an
// attempt it cuts before the per-try timeout is the caller's budget, not
// the upstream's failure (Outcome.CallerBound).
func CallerSet(d time.Duration, ok bool, max time.Duration) bool {
	return ok && (max <= 0 || d < max/time.Millisecond*time.Millisecond)
}

// Deadline is the instant a call's answer is due, in the clock's
// nanoseconds (Config.Now); the zero Deadline is none.
type Deadline struct {
	at  int64
	set bool
}

// DeadlineAt is the deadline d after now (ok=false: none).
func DeadlineAt(now int64, d time.Duration, ok bool) Deadline {
	if !ok {
		return Deadline{}
	}
	return Deadline{at: now + int64(d), set: true}
}

// Set reports whether there is a deadline.
func (d Deadline) Set() bool { return d.set }

// Left is the time left at now (<= 0: gone); with no deadline, a day.
func (d Deadline) Left(now int64) time.Duration {
	if !d.set {
		return MaxDeadline
	}
	return time.Duration(d.at - now)
}

// HeaderMs is the value forwarded at now: the whole milliseconds left,
// rounded down so that a hop can only lower it, and 0 once gone.
func (d Deadline) HeaderMs(now int64) int64 {
	left := d.Left(now)
	if left <= 0 {
		return 0
	}
	return int64(left / time.Millisecond)
}

// Gone reports whether no whole millisecond is left at now: the proxy
// answers 504 at once and forwards nothing.
func (d Deadline) Gone(now int64) bool { return d.set && d.HeaderMs(now) == 0 }

// TryTimeout bounds an attempt starting at now: min(perTry, time left);
// cut reports that the deadline, not perTry, is the bound (an attempt cut
// by it is not retried and reports deadline). perTry 0 is no per-try
// timeout.
func (d Deadline) TryTimeout(now int64, perTry time.Duration) (timeout time.Duration, cut bool) {
	if !d.set {
		return perTry, false
	}
	left := d.Left(now)
	if perTry > 0 && perTry <= left {
		return perTry, false
	}
	return left, true
}

// RetryFits reports whether a retry that would start after backoff, at
// now+backoff, has at least MinRetryShare of a try's timeout left (of
// perTry, or with none of arrived, the time the call arrived with).
func (d Deadline) RetryFits(now int64, backoff, perTry, arrived time.Duration) bool {
	if !d.set {
		return true
	}
	base := perTry
	if base <= 0 {
		base = arrived
	}
	need := base * MinRetryShareNum / MinRetryShareDen
	// Compared before subtracting: Left(now) - backoff wraps to a large positive time
	// when the deadline is past and backoff is near the largest duration.
	left := d.Left(now)
	if left <= 0 || backoff < 0 || backoff >= left {
		return false
	}
	return left-backoff >= need
}

// AppendDeadlineBaggage appends to dst the baggage value src with the
// retrycap-deadline member set to ms (replaced in place, duplicates
// dropped, appended when absent), as AppendBaggage does for the budget.
func AppendDeadlineBaggage(dst, src []byte, ms int64) []byte {
	return appendBaggageMember(dst, src, DeadlineBaggageKey, int(ms))
}
