package inject

import (
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/proxy"
)

// TestRenderedArgsAreTheProxys is the differential test of the bounds (issue 25): for every
// duration of a policy at, inside and past its bounds (and at int64's edges), SettingsFor either
// refuses the policy, naming the field, or renders a command line the proxy's own flag parsing
// accepts, in process. Before, a policy stored with budget.window 2m or perTryTimeout 99999h
// rendered flags the proxy now refuses (exit 2: a sidecar that never starts).
func TestRenderedArgsAreTheProxys(t *testing.T) {
	fields := []struct {
		name string
		set  func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration)
	}{
		{"spec.retry.perTryTimeout", func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration) { s.Retry.PerTryTimeout = d }},
		{"spec.retry.backoff.base", func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration) { s.Retry.Backoff.Base = d }},
		{"spec.retry.backoff.max", func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration) { s.Retry.Backoff.Max = d }},
		{"spec.budget.window", func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration) { s.Budget.Window = d }},
		{"spec.circuitBreaker.window", func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration) { s.CircuitBreaker.Window = d }},
		{"spec.circuitBreaker.openFor", func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration) { s.CircuitBreaker.OpenFor = d }},
		{"spec.maxTimeToAnswer", func(s *v1alpha1.RetryPolicySpec, d *metav1.Duration) { s.MaxTimeToAnswer = d }},
	}
	values := []time.Duration{-1 << 63, -1, 0, 1, time.Microsecond, time.Millisecond - 1, time.Millisecond,
		100 * time.Millisecond, time.Second - 1, time.Second, 2 * time.Second, time.Minute, time.Minute + 1,
		time.Hour, time.Hour + 1, 24 * time.Hour, 24*time.Hour + 1, 99999 * time.Hour, 1 << 62, 1<<63 - 1}
	// The per-upstream timeouts of retrycap.dev/upstreams, at the grammar's bounds.
	ups := []annotations.Upstream{{Name: "order", Attempts: 3, PerTryTimeout: annotations.MaxPerTryTimeout},
		{Name: "payment", Attempts: 2, PerTryTimeout: annotations.MinPerTryTimeout}, {Name: "ledger.billing"}}
	rendered, refused := 0, 0
	for _, f := range fields {
		for _, v := range values {
			p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
			f.set(&p.Spec, &metav1.Duration{Duration: v})
			if f.name == "spec.retry.backoff.base" && v > 0 && v <= time.Minute {
				p.Spec.Retry.Backoff.Max = &metav1.Duration{Duration: time.Minute} // base <= max
			}
			s, err := settingsOf(p)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "RetryPolicy shop/checkout: "+f.name+" ") {
					t.Errorf("%s %d: refused without naming the field: %v", f.name, v, err)
				}
				refused++
				continue
			}
			rendered++
			for _, entry := range []bool{false, true} {
				args := ProxyArgs("gateway", ups, entry, s)
				if _, err := proxy.ParseFlags(args, io.Discard); err != nil {
					t.Errorf("%s %d: rendered %q, the proxy refuses it: %v", f.name, v, args, err)
				}
			}
		}
	}
	// Both sides of every bound were tried.
	if rendered < len(fields)*2 || refused < len(fields)*2 {
		t.Fatalf("rendered %d, refused %d: the table does not reach both sides of the bounds", rendered, refused)
	}
}
