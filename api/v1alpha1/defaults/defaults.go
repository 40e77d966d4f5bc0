package defaults

import "time"

// The defaults of RetryPolicy's spec, by field.
const (
	// Enforcement is spec.enforcement's default (v1alpha1.EnforcementReject).
	Enforcement = "Reject"
	// ClientAttempts is spec.entrypoints[].clientAttempts's default: the caller tries once.
	ClientAttempts = 1
	// Attempts is spec.retry.defaultAttempts's default: 1, no retry.
	Attempts = 1
	// PerTryTimeout is spec.retry.perTryTimeout's default.
	PerTryTimeout = 2 * time.Second
	// BackoffBase is spec.retry.backoff.base's default.
	BackoffBase = 100 * time.Millisecond
	// BackoffMax is spec.retry.backoff.max's default.
	BackoffMax = 2 * time.Second
	// BudgetPercent is spec.budget.retryPercent's default.
	BudgetPercent = 20
	// BudgetMinPerSecond is spec.budget.minRetriesPerSecond's default.
	BudgetMinPerSecond = 10
	// BudgetWindow is spec.budget.window's default.
	BudgetWindow = 10 * time.Second
	// BreakerFailures is spec.circuitBreaker.failures's default.
	BreakerFailures = 50
	// BreakerWindow is spec.circuitBreaker.window's default.
	BreakerWindow = 30 * time.Second
	// BreakerOpenFor is spec.circuitBreaker.openFor's default.
	BreakerOpenFor = 10 * time.Second
	// InjectionEnabled is spec.injection.enabled's default.
	InjectionEnabled = true
	// AccessLog is spec.observability.accessLog's default (v1alpha1.AccessLogOff).
	AccessLog = "Off"
)

// What the proxy enforces that a RetryPolicy does not (yet) set: not in the CRD.
const (
	// MaxReplayBytes is the largest request body the proxy retries (--max-replay-bytes).
	MaxReplayBytes = 64 << 10
	// KeyTTL is how long an entry proxy remembers an Idempotency-Key's spend (--key-ttl).
	KeyTTL = time.Minute
)

// RetryOn is spec.retry.retryOn's default, a new slice on each call.
func RetryOn() []string { return []string{"connect-failure", "reset", "502", "503", "504"} }

// Methods is spec.retry.methods's default, a new slice on each call.
func Methods() []string { return []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"} }
