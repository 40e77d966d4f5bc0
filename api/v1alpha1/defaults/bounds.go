package defaults

import (
	"strconv"
	"time"
)

// The bounds of a RetryPolicy's (and a ClusterRetryPolicy's) spec, by field, inclusive. The CRD
// declares them as +kubebuilder:validation:Minimum/Maximum markers and CEL rules, which cannot
// name Go constants: TestCRDBoundsAreTheGoConstants checks that the generated CRDs agree, bound by
// bound, and that none of theirs is left unlisted here. The injector (a policy built in code),
// analyze (manifests read offline), the annotation grammar and the proxy's flags check values
// against these.
const (
	// MaxAmplificationMin and MaxAmplificationMax bound spec.maxAmplification (the proxy's
	// --chain-cap, where 0 also means off).
	MaxAmplificationMin = 1
	MaxAmplificationMax = 1000
	// AttemptsMin and AttemptsMax bound the tries per call: spec.retry.defaultAttempts,
	// spec.entrypoints[].clientAttempts, an upstream's "=N" in retrycap.dev/upstreams and the
	// proxy's --default-attempts.
	AttemptsMin = 1
	AttemptsMax = 100
	// BudgetPercentMin and BudgetPercentMax bound spec.budget.retryPercent.
	BudgetPercentMin = 0
	BudgetPercentMax = 100
	// BudgetMinPerSecondMin and BudgetMinPerSecondMax bound spec.budget.minRetriesPerSecond.
	BudgetMinPerSecondMin = 0
	BudgetMinPerSecondMax = 100000
	// BreakerFailuresMin and BreakerFailuresMax bound spec.circuitBreaker.failures.
	BreakerFailuresMin = 1
	BreakerFailuresMax = 1000000
	// BudgetWindowMin and BudgetWindowMax bound spec.budget.window (a CEL rule).
	BudgetWindowMin = time.Second
	BudgetWindowMax = 60 * time.Second
)

// The bounds of the other durations (CEL rules in the CRD, the same checks in the injector,
// analyze and the proxy's flags; docs/decisions.md, "Every duration is bounded"). The lower
// bound is the millisecond, the unit of Retrycap-Deadline: a shorter timeout times every call
// out, a shorter backoff is none. The upper bounds are where a value stops being a policy and
// is a mistake (a unit typed wrong: 99999h), and they keep every sum the proxy and the time
// model make (100 tries x the per-try timeout, plus the backoffs, plus the clock) far inside
// int64 nanoseconds.
const (
	// PerTryTimeoutMin and PerTryTimeoutMax bound spec.retry.perTryTimeout, an upstream's
	// "/TIMEOUT" in retrycap.dev/upstreams and the proxy's --per-try-timeout.
	PerTryTimeoutMin = time.Millisecond
	PerTryTimeoutMax = time.Hour
	// BackoffBoundMin and BackoffBoundMax bound spec.retry.backoff.base and .max and the
	// proxy's --backoff-base and --backoff-max (which also take 0: no wait).
	BackoffBoundMin = time.Millisecond
	BackoffBoundMax = time.Minute
	// MaxTimeToAnswerMin and MaxTimeToAnswerMax bound spec.maxTimeToAnswer and the proxy's
	// --max-time-to-answer (also 0: none); the maximum is the proxy's largest deadline
	// (policy.MaxDeadline, a day).
	MaxTimeToAnswerMin = time.Millisecond
	MaxTimeToAnswerMax = 24 * time.Hour
	// BreakerWindowMin and BreakerWindowMax bound spec.circuitBreaker.window and the proxy's
	// --breaker-window.
	BreakerWindowMin = time.Millisecond
	BreakerWindowMax = time.Hour
	// BreakerOpenForMin and BreakerOpenForMax bound spec.circuitBreaker.openFor and the proxy's
	// --breaker-open-for.
	BreakerOpenForMin = time.Millisecond
	BreakerOpenForMax = time.Hour
	// ProxyTimeoutMax bounds the proxy's own durations that no RetryPolicy sets (--key-ttl,
	// --drain-timeout and the connection timeouts): each is > 0 and at most a day.
	ProxyTimeoutMax = 24 * time.Hour
)

// CheckDuration is "" when min <= d <= max, else why not ("must be between 1ms and 1h"),
// the words the CRD's CEL rules use.
func CheckDuration(d, lo, hi time.Duration) string {
	if d < lo || d > hi {
		return "must be between " + FormatDuration(lo) + " and " + FormatDuration(hi)
	}
	return ""
}

// FormatDuration writes a bound the way the CRD's rules and the docs do ("1ms", "1m", "24h").
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}
