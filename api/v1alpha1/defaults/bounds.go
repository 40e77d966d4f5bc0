package defaults

import "time"

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
