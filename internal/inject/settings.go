package inject

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/sidecar"
	"github.com/retrycap/retrycap/internal/workload"
)

// Settings is what a proxy enforces for one policy, with every default applied.
type Settings struct {
	ChainCap           int32
	DefaultAttempts    int32
	PerTryTimeout      time.Duration
	BackoffBase        time.Duration
	BackoffMax         time.Duration
	RetryOn            []string
	Methods            []string
	BudgetPercent      int32
	BudgetMinPerSecond int32
	BudgetWindow       time.Duration
	BreakerFailures    int32
	BreakerWindow      time.Duration
	BreakerOpenFor     time.Duration
	// AccessLog is the proxy's --access-log (sidecar.AccessLogOff or sidecar.AccessLogStdout).
	AccessLog string
	// MaxTimeToAnswer is spec.maxTimeToAnswer (0: none), the proxy's --max-time-to-answer.
	MaxTimeToAnswer time.Duration
	// DedupUpstreams is spec.retry.dedupUpstreams: upstream names whose app deduplicates by
	// Idempotency-Key. The proxy's --dedup-upstreams is the listed names among a pod's
	// upstreams (SidecarArgs).
	DedupUpstreams []string
}

// SettingsFor applies the CRD defaults (api/v1alpha1/defaults; the API server applies them to
// stored objects, SettingsFor again so that a policy built in code without them, a test or the
// CLI reading manifests, renders the same flags) to p's spec (nil pointers, zero numbers and nil lists; an
// explicitly empty list, e.g. retryOn: [], stays empty and means "nothing") and checks what the
// proxy would refuse, so that a bad policy is reported here, naming the policy, the field and the
// value, instead of as a sidecar that never starts. The errors name the policy by its kind
// ("RetryPolicy shop/checkout", "ClusterRetryPolicy chain").
func SettingsFor(p *workload.Policy) (Settings, error) {
	ref, spec := p.Ref(), p.Spec()
	s := Settings{
		ChainCap:           spec.MaxAmplification,
		DefaultAttempts:    orInt(spec.Retry.DefaultAttempts, defaults.Attempts),
		PerTryTimeout:      durOr(spec.Retry.PerTryTimeout, defaults.PerTryTimeout),
		BackoffBase:        durOr(spec.Retry.Backoff.Base, defaults.BackoffBase),
		BackoffMax:         durOr(spec.Retry.Backoff.Max, defaults.BackoffMax),
		RetryOn:            orList(spec.Retry.RetryOn, defaults.RetryOn()),
		Methods:            orList(spec.Retry.Methods, defaults.Methods()),
		BudgetPercent:      orPtr(spec.Budget.RetryPercent, defaults.BudgetPercent),
		BudgetMinPerSecond: orPtr(spec.Budget.MinRetriesPerSecond, defaults.BudgetMinPerSecond),
		BudgetWindow:       durOr(spec.Budget.Window, defaults.BudgetWindow),
		BreakerFailures:    orInt(spec.CircuitBreaker.Failures, defaults.BreakerFailures),
		BreakerWindow:      durOr(spec.CircuitBreaker.Window, defaults.BreakerWindow),
		BreakerOpenFor:     durOr(spec.CircuitBreaker.OpenFor, defaults.BreakerOpenFor),
		AccessLog:          sidecar.AccessLogOff,
		MaxTimeToAnswer:    durOr(spec.MaxTimeToAnswer, 0),
		DedupUpstreams:     slices.Clone(spec.Retry.DedupUpstreams),
	}
	bad := func(field string, value any, why string) error {
		return fmt.Errorf("%s: %s %v: %s", ref, field, value, why)
	}
	switch {
	case s.ChainCap < defaults.MaxAmplificationMin || s.ChainCap > defaults.MaxAmplificationMax:
		return s, bad("spec.maxAmplification", s.ChainCap, fmt.Sprintf("must be %d..%d", defaults.MaxAmplificationMin, defaults.MaxAmplificationMax))
	case s.DefaultAttempts < defaults.AttemptsMin || s.DefaultAttempts > defaults.AttemptsMax:
		return s, bad("spec.retry.defaultAttempts", s.DefaultAttempts, fmt.Sprintf("must be %d..%d", defaults.AttemptsMin, defaults.AttemptsMax))
	case s.BudgetPercent < defaults.BudgetPercentMin || s.BudgetPercent > defaults.BudgetPercentMax:
		return s, bad("spec.budget.retryPercent", s.BudgetPercent, fmt.Sprintf("must be %d..%d", defaults.BudgetPercentMin, defaults.BudgetPercentMax))
	case s.BudgetMinPerSecond < 0:
		return s, bad("spec.budget.minRetriesPerSecond", s.BudgetMinPerSecond, "must not be negative")
	case s.BreakerFailures < 1:
		return s, bad("spec.circuitBreaker.failures", s.BreakerFailures, "must be at least 1")
	}
	// The CRD's bounds (api/v1alpha1/defaults), which are the proxy's: a policy stored before
	// them, or built in code, is refused here naming the field and the value, never rendered
	// into args the proxy refuses and never clamped.
	if probs := workload.DurationProblems(spec); len(probs) > 0 {
		return s, fmt.Errorf("%s: %s", ref, probs[0])
	}
	if s.BackoffMax < s.BackoffBase {
		return s, bad("spec.retry.backoff.max", sidecar.Duration(s.BackoffMax), fmt.Sprintf("must not be below spec.retry.backoff.base (%s)", sidecar.Duration(s.BackoffBase)))
	}
	switch al := cmp.Or(spec.Observability.AccessLog, v1alpha1.AccessLog(defaults.AccessLog)); al {
	case v1alpha1.AccessLogOff:
	case v1alpha1.AccessLogStdout:
		s.AccessLog = sidecar.AccessLogStdout
	default:
		return s, bad("spec.observability.accessLog", strconv.Quote(string(al)), "must be Off or Stdout")
	}
	for _, r := range s.RetryOn {
		if strings.ContainsAny(r, ", ") || r == "" {
			return s, bad("spec.retry.retryOn", strconv.Quote(r), "is not a failure name or status code")
		}
	}
	for _, m := range s.Methods {
		if strings.ContainsAny(m, ", ") || m == "" {
			return s, bad("spec.retry.methods", strconv.Quote(m), "is not an HTTP method")
		}
	}
	if probs := workload.DedupProblems(spec); len(probs) > 0 {
		return s, fmt.Errorf("%s: %s", ref, probs[0])
	}
	return s, nil
}

func durOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

func orInt(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

func orPtr(v *int32, def int32) int32 {
	if v == nil {
		return def
	}
	return *v
}

func orList(v, def []string) []string {
	if v == nil {
		return slices.Clone(def)
	}
	return slices.Clone(v) // keeps an explicit empty list non-nil
}
