package inject

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/sidecar"
	"github.com/retrycap/retrycap/internal/workload"
)

func TestSettingsFor(t *testing.T) {
	policy := func(mut func(*v1alpha1.RetryPolicySpec)) *v1alpha1.RetryPolicy {
		p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		mut(&p.Spec)
		return p
	}
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	zero := int32(0)

	got, err := settingsOf(policy(func(*v1alpha1.RetryPolicySpec) {}))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{ChainCap: 4, DefaultAttempts: 1, PerTryTimeout: 2 * time.Second, BackoffBase: 100 * time.Millisecond,
		BackoffMax: 2 * time.Second, RetryOn: []string{"connect-failure", "reset", "502", "503", "504", "unavailable"},
		Methods: []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}, BudgetPercent: 20, BudgetMinPerSecond: 10,
		BudgetWindow: 10 * time.Second, BreakerFailures: 50, BreakerWindow: 30 * time.Second, BreakerOpenFor: 10 * time.Second, AccessLog: "off"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}

	// Explicit zeros and empty lists are kept, not defaulted.
	got, err = settingsOf(policy(func(s *v1alpha1.RetryPolicySpec) {
		s.Budget.RetryPercent, s.Budget.MinRetriesPerSecond = &zero, &zero
		s.Retry.RetryOn, s.Retry.Methods = []string{}, []string{}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got.BudgetPercent != 0 || got.BudgetMinPerSecond != 0 || len(got.RetryOn) != 0 || got.RetryOn == nil || len(got.Methods) != 0 {
		t.Errorf("explicit zeros: got %+v", got)
	}

	// The access log: Off renders nothing (the flag's default), Stdout --access-log=stdout.
	for al, want := range map[v1alpha1.AccessLog][]string{v1alpha1.AccessLogOff: nil, v1alpha1.AccessLogStdout: {"--access-log=stdout"}} {
		s, err := settingsOf(policy(func(s *v1alpha1.RetryPolicySpec) { s.Observability.AccessLog = al }))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range ProxyArgs("order", nil, false, s) {
			if strings.HasPrefix(a, "--access-log") {
				got = append(got, a)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("accessLog %s: rendered %q, want %q", al, got, want)
		}
	}

	bad := []struct {
		name string
		mut  func(*v1alpha1.RetryPolicySpec)
		want string
	}{
		{"cap 0", func(s *v1alpha1.RetryPolicySpec) { s.MaxAmplification = 0 }, "RetryPolicy shop/checkout: spec.maxAmplification 0: must be 1..1000"},
		{"cap 1001", func(s *v1alpha1.RetryPolicySpec) { s.MaxAmplification = 1001 }, "RetryPolicy shop/checkout: spec.maxAmplification 1001: must be 1..1000"},
		{"attempts", func(s *v1alpha1.RetryPolicySpec) { s.Retry.DefaultAttempts = 101 }, "RetryPolicy shop/checkout: spec.retry.defaultAttempts 101: must be 1..100"},
		{"base over default max", func(s *v1alpha1.RetryPolicySpec) { s.Retry.Backoff.Base = d(5 * time.Second) },
			"RetryPolicy shop/checkout: spec.retry.backoff.max 2s: must not be below spec.retry.backoff.base (5s)"},
		{"negative timeout", func(s *v1alpha1.RetryPolicySpec) { s.Retry.PerTryTimeout = d(-time.Second) }, "RetryPolicy shop/checkout: spec.retry.perTryTimeout -1s: must be positive"},
		{"budget percent", func(s *v1alpha1.RetryPolicySpec) { p := int32(101); s.Budget.RetryPercent = &p }, "RetryPolicy shop/checkout: spec.budget.retryPercent 101: must be 0..100"},
		{"breaker window", func(s *v1alpha1.RetryPolicySpec) { s.CircuitBreaker.Window = d(0) }, "RetryPolicy shop/checkout: spec.circuitBreaker.window 0s: must be positive"},
		{"retry-on with a comma", func(s *v1alpha1.RetryPolicySpec) { s.Retry.RetryOn = []string{"502,503"} }, `RetryPolicy shop/checkout: spec.retry.retryOn "502,503": is not a failure name or status code`},
		{"empty method", func(s *v1alpha1.RetryPolicySpec) { s.Retry.Methods = []string{""} }, `RetryPolicy shop/checkout: spec.retry.methods "": is not an HTTP method`},
		{"access log", func(s *v1alpha1.RetryPolicySpec) { s.Observability.AccessLog = "/var/log/a" }, `RetryPolicy shop/checkout: spec.observability.accessLog "/var/log/a": must be Off or Stdout`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := settingsOf(policy(tt.mut))
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// The duration format of the rendered flags (sidecar.Duration).
func TestDurationFlag(t *testing.T) {
	for d, want := range map[time.Duration]string{
		100 * time.Millisecond: "100ms", 2 * time.Second: "2s", time.Minute: "1m", 90 * time.Second: "1m30s",
		time.Hour: "1h", 150 * time.Minute: "2h30m", 1500 * time.Millisecond: "1.5s",
	} {
		if got := sidecar.Duration(d); got != want {
			t.Errorf("sidecar.Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestMergeList(t *testing.T) {
	got := mergeList([]string{"a, b,,c", "c,d"}, []string{"b", "e"})
	if got != "a,b,c,d,e" {
		t.Errorf("mergeList = %q, want a,b,c,d,e", got)
	}
}

// settingsOf is SettingsFor of a RetryPolicy.
func settingsOf(p *v1alpha1.RetryPolicy) (Settings, error) {
	return SettingsFor(workload.ForRetryPolicy(p))
}
