package inject

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// The RetryPolicy defaults, as the CRD declares them (+kubebuilder:default). The API server
// applies them to stored objects; Settings applies them again so that a policy built in code
// without defaults (a test, the CLI reading manifests) renders the same flags.
var (
	defaultRetryOn = []string{"connect-failure", "reset", "502", "503", "504"}
	defaultMethods = []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}
)

const (
	defaultAttempts        = 1
	defaultPerTryTimeout   = 2 * time.Second
	defaultBackoffBase     = 100 * time.Millisecond
	defaultBackoffMax      = 2 * time.Second
	defaultBudgetPercent   = 20
	defaultBudgetMinPerSec = 10
	defaultBudgetWindow    = 10 * time.Second
	defaultBreakerFailures = 50
	defaultBreakerWindow   = 30 * time.Second
	defaultBreakerOpenFor  = 10 * time.Second
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
}

// SettingsFor applies the CRD defaults to p's spec (nil pointers, zero numbers and nil lists; an
// explicitly empty list, e.g. retryOn: [], stays empty and means "nothing") and checks what the
// proxy would refuse, so that a bad policy is reported here, naming the policy, the field and the
// value, instead of as a sidecar that never starts.
func SettingsFor(p *v1alpha1.RetryPolicy) (Settings, error) {
	spec := p.Spec
	s := Settings{
		ChainCap:           spec.MaxAmplification,
		DefaultAttempts:    orInt(spec.Retry.DefaultAttempts, defaultAttempts),
		PerTryTimeout:      durOr(spec.Retry.PerTryTimeout, defaultPerTryTimeout),
		BackoffBase:        durOr(spec.Retry.Backoff.Base, defaultBackoffBase),
		BackoffMax:         durOr(spec.Retry.Backoff.Max, defaultBackoffMax),
		RetryOn:            orList(spec.Retry.RetryOn, defaultRetryOn),
		Methods:            orList(spec.Retry.Methods, defaultMethods),
		BudgetPercent:      orPtr(spec.Budget.RetryPercent, defaultBudgetPercent),
		BudgetMinPerSecond: orPtr(spec.Budget.MinRetriesPerSecond, defaultBudgetMinPerSec),
		BudgetWindow:       durOr(spec.Budget.Window, defaultBudgetWindow),
		BreakerFailures:    orInt(spec.CircuitBreaker.Failures, defaultBreakerFailures),
		BreakerWindow:      durOr(spec.CircuitBreaker.Window, defaultBreakerWindow),
		BreakerOpenFor:     durOr(spec.CircuitBreaker.OpenFor, defaultBreakerOpenFor),
	}
	bad := func(field string, value any, why string) error {
		return fmt.Errorf("RetryPolicy %s/%s: %s %v: %s", p.Namespace, p.Name, field, value, why)
	}
	switch {
	case s.ChainCap < 1 || s.ChainCap > 1000:
		return s, bad("spec.maxAmplification", s.ChainCap, "must be 1..1000")
	case s.DefaultAttempts < 1 || s.DefaultAttempts > 100:
		return s, bad("spec.retry.defaultAttempts", s.DefaultAttempts, "must be 1..100")
	case s.PerTryTimeout <= 0:
		return s, bad("spec.retry.perTryTimeout", s.PerTryTimeout, "must be positive")
	case s.BackoffBase <= 0:
		return s, bad("spec.retry.backoff.base", s.BackoffBase, "must be positive")
	case s.BackoffMax < s.BackoffBase:
		return s, bad("spec.retry.backoff.max", s.BackoffMax, fmt.Sprintf("must not be below spec.retry.backoff.base (%s)", s.BackoffBase))
	case s.BudgetPercent < 0 || s.BudgetPercent > 100:
		return s, bad("spec.budget.retryPercent", s.BudgetPercent, "must be 0..100")
	case s.BudgetMinPerSecond < 0:
		return s, bad("spec.budget.minRetriesPerSecond", s.BudgetMinPerSecond, "must not be negative")
	case s.BudgetWindow <= 0:
		return s, bad("spec.budget.window", s.BudgetWindow, "must be positive")
	case s.BreakerFailures < 1:
		return s, bad("spec.circuitBreaker.failures", s.BreakerFailures, "must be at least 1")
	case s.BreakerWindow <= 0:
		return s, bad("spec.circuitBreaker.window", s.BreakerWindow, "must be positive")
	case s.BreakerOpenFor <= 0:
		return s, bad("spec.circuitBreaker.openFor", s.BreakerOpenFor, "must be positive")
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
