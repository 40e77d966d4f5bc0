package gate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// The workload gate's time verdict that no count of the workload's attempts fits named no lever
// (the mesh gate's did since adv20): it names the timeouts the chain at 1 attempt waits on, in
// the unit of what sets them (an annotation's per-try timeout, the policy's perTryTimeout), the
// other attempts on it, and the maximum to raise to that chain's time.
func TestSmall20TimeLevers(t *testing.T) {
	// The policy's perTryTimeout (200ms) bounds order -> payment; gateway's 1s does not bound
	// gateway -> order (order answers within 900ms), and is not named.
	p := timedPolicy("checkout", 30, v1alpha1.EnforcementReject, time.Second, 2)
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 200 * time.Millisecond}
	got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(timedShop()), Incoming: workloadtest.Deployment("order", "payment=3")})
	want := "RetryPolicy shop/checkout: client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 1s; " +
		"no rewrite fits: even with order: payment=1, client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s: " +
		"lower RetryPolicy shop/checkout spec.retry.perTryTimeout: 200ms, RetryPolicy shop/checkout spec.entrypoints[0].clientAttempts: 2, Deployment shop/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy shop/checkout spec.maxTimeToAnswer: 1.8s"
	if got.Allowed || got.Message != want {
		t.Errorf("Decide:\n got %+v\nwant %s", got, want)
	}

	// Two timeouts bound the chain (gateway's 1s under order's 2s, order's 2s over payment's
	// unknown time): both named; no other attempt above 1.
	p = timedPolicy("checkout", 30, v1alpha1.EnforcementReject, 500*time.Millisecond, 1)
	shop := []workload.Workload{workloadtest.Deployment("gateway", "order=1/1s"), workloadtest.Deployment("payment", "")}
	got = Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(shop), Incoming: workloadtest.Deployment("order", "payment=3/2s")})
	want = "RetryPolicy shop/checkout: gateway 1s -> order 6.3s -> payment ? = 1s > maxTimeToAnswer 500ms; " +
		"no rewrite fits: even with order: payment=1, gateway 1s -> order 2s -> payment ? = 1s > maxTimeToAnswer 500ms: " +
		"lower the per-try timeout of Deployment shop/gateway retrycap.dev/upstreams order=1/1s, the per-try timeout of Deployment shop/order retrycap.dev/upstreams payment=3/2s, or raise RetryPolicy shop/checkout spec.maxTimeToAnswer: 1s"
	if got.Allowed || got.Message != want {
		t.Errorf("Decide:\n got %+v\nwant %s", got, want)
	}
}
