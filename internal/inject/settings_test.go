package inject

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
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
		{"negative timeout", func(s *v1alpha1.RetryPolicySpec) { s.Retry.PerTryTimeout = d(-time.Second) }, "RetryPolicy shop/checkout: spec.retry.perTryTimeout -1s: must be between 1ms and 1h"},
		{"budget percent", func(s *v1alpha1.RetryPolicySpec) { p := int32(101); s.Budget.RetryPercent = &p }, "RetryPolicy shop/checkout: spec.budget.retryPercent 101: must be 0..100"},
		{"breaker window", func(s *v1alpha1.RetryPolicySpec) { s.CircuitBreaker.Window = d(0) }, "RetryPolicy shop/checkout: spec.circuitBreaker.window 0s: must be between 1ms and 1h"},
		{"retry-on with a comma", func(s *v1alpha1.RetryPolicySpec) { s.Retry.RetryOn = []string{"502,503"} }, `RetryPolicy shop/checkout: spec.retry.retryOn "502,503": is not a failure name or status code`},
		{"empty method", func(s *v1alpha1.RetryPolicySpec) { s.Retry.Methods = []string{""} }, `RetryPolicy shop/checkout: spec.retry.methods "": is not an HTTP method`},
		{"access log", func(s *v1alpha1.RetryPolicySpec) { s.Observability.AccessLog = "/var/log/a" }, `RetryPolicy shop/checkout: spec.observability.accessLog "/var/log/a": must be Off or Stdout`},
		{"time to answer below 1ms", func(s *v1alpha1.RetryPolicySpec) { s.MaxTimeToAnswer = d(500 * time.Microsecond) }, "RetryPolicy shop/checkout: spec.maxTimeToAnswer 500µs: must be between 1ms and 24h"},
		// The upper bounds (issue 25), for a policy stored before the CRD had them: refused
		// naming the field and the value; before, rendered (a per-try timeout of 11 years) or,
		// for maxTimeToAnswer, silently dropped.
		{"per-try days", func(s *v1alpha1.RetryPolicySpec) { s.Retry.PerTryTimeout = d(99999 * time.Hour) }, "RetryPolicy shop/checkout: spec.retry.perTryTimeout 99999h: must be between 1ms and 1h"},
		{"per-try bound+1ns", func(s *v1alpha1.RetryPolicySpec) { s.Retry.PerTryTimeout = d(time.Hour + 1) }, "RetryPolicy shop/checkout: spec.retry.perTryTimeout 1h0m0.000000001s: must be between 1ms and 1h"},
		{"backoff hours", func(s *v1alpha1.RetryPolicySpec) {
			s.Retry.Backoff.Base, s.Retry.Backoff.Max = d(99999*time.Hour), d(99999*time.Hour)
		},
			"RetryPolicy shop/checkout: spec.retry.backoff.base 99999h: must be between 1ms and 1m"},
		{"backoff max max-int64", func(s *v1alpha1.RetryPolicySpec) { s.Retry.Backoff.Max = d(1<<63 - 1) },
			"RetryPolicy shop/checkout: spec.retry.backoff.max 2562047h47m16.854775807s: must be between 1ms and 1m"},
		{"budget window", func(s *v1alpha1.RetryPolicySpec) { s.Budget.Window = d(2 * time.Minute) }, "RetryPolicy shop/checkout: spec.budget.window 2m: must be between 1s and 1m"},
		{"open for", func(s *v1alpha1.RetryPolicySpec) { s.CircuitBreaker.OpenFor = d(1 << 62) }, "RetryPolicy shop/checkout: spec.circuitBreaker.openFor 1281023h53m38.427387904s: must be between 1ms and 1h"},
		{"time to answer over a day", func(s *v1alpha1.RetryPolicySpec) { s.MaxTimeToAnswer = d(48 * time.Hour) }, "RetryPolicy shop/checkout: spec.maxTimeToAnswer 48h: must be between 1ms and 24h"},
		{"dedup name", func(s *v1alpha1.RetryPolicySpec) { s.Retry.DedupUpstreams = []string{"payment", "Ledger"} },
			`RetryPolicy shop/checkout: spec.retry.dedupUpstreams "Ledger": is not an upstream name: "Ledger" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`},
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

// spec.maxTimeToAnswer renders --max-time-to-answer (nothing when unset), and
// spec.retry.dedupUpstreams --dedup-upstreams with the listed names among the pod's upstreams, in
// the pod's order (nothing when none of them is listed: the proxy refuses a name it does not call).
func TestRenderTimeAndDedup(t *testing.T) {
	ups := []annotations.Upstream{{Name: "order", Attempts: 3, PerTryTimeout: 1500 * time.Millisecond}, {Name: "payment", Attempts: 2}, {Name: "ledger.billing"}}
	for _, tc := range []struct {
		name  string
		mtta  *metav1.Duration
		dedup []string
		want  []string
	}{
		{"unset", nil, nil, nil},
		{"time", &metav1.Duration{Duration: 4 * time.Second}, nil, []string{"--max-time-to-answer=4s"}},
		{"dedup in the pod's order", nil, []string{"ledger.billing", "payment", "inventory"}, []string{"--dedup-upstreams=payment,ledger.billing"}},
		{"dedup of none the pod calls", nil, []string{"inventory"}, nil},
		{"both", &metav1.Duration{Duration: 1500 * time.Millisecond}, []string{"order"}, []string{"--dedup-upstreams=order", "--max-time-to-answer=1.5s"}},
		{"a day: the proxy's bound", &metav1.Duration{Duration: 24 * time.Hour}, nil, []string{"--max-time-to-answer=24h"}},
	} {
		p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, MaxTimeToAnswer: tc.mtta}}
		p.Spec.Retry.DedupUpstreams = tc.dedup
		s, err := settingsOf(p)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range ProxyArgs("gateway", ups, false, s) {
			if strings.HasPrefix(a, "--max-time-to-answer") || strings.HasPrefix(a, "--dedup-upstreams") {
				got = append(got, a)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: rendered %q, want %q", tc.name, got, tc.want)
		}
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
