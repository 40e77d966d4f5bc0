package gate

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// timedPolicy is testPolicy with a maxTimeToAnswer and clientAttempts k at the gateway.
func timedPolicy(name string, cap int32, mode v1alpha1.Enforcement, maxT time.Duration, k int32) *v1alpha1.RetryPolicy {
	p := workloadtest.Policy(name, cap, mode, nil)
	p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: maxT}
	p.Spec.Entrypoints[0].ClientAttempts = k
	return p
}

// The time scenario (the graph package's worked case): gateway -> order 3 tries of at most 1s,
// order -> payment 3 tries of at most 200ms, the policy's backoff (100ms, 2s). order takes
// 3 x 200ms + 300ms = 900ms, gateway 3 x 900ms + 300ms = 3s; with two client tries 6s.
// payment=2: order 500ms, gateway 1.8s, 3.6s.
func timedShop() []workload.Workload {
	return []workload.Workload{workloadtest.Deployment("gateway", "order=3/1s"), workloadtest.Deployment("payment", ""), workloadtest.Deployment("batch", "")}
}

func TestDecideTime(t *testing.T) {
	slowOrder := workloadtest.Deployment("order", "payment=3/200ms")
	const chain6s = "client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s"
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "reject: over maxTimeToAnswer, within the cap",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementReject, 5*time.Second, 2)},
				Source: workloads(timedShop()), Incoming: slowOrder},
			want: Decision{Message: "RetryPolicy shop/checkout: " + chain6s + "; order may keep payment=2"},
		},
		{
			// 9 > cap 4 (payment=1 fits it); 3s > 2s (payment=2 fits it): one message, the plan
			// that fits both.
			name: "reject: over the cap and the time, one message",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 4, v1alpha1.EnforcementReject, 2*time.Second, 1)},
				Source: workloads(timedShop()), Incoming: slowOrder},
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; " +
				"gateway 3s -> order 900ms -> payment ? = 3s > maxTimeToAnswer 2s; order may keep payment=1"},
		},
		{
			name: "reject: within both",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementReject, 6*time.Second, 2)},
				Source: workloads(timedShop()), Incoming: slowOrder},
			want: Decision{Allowed: true},
		},
		{
			// batch is reached by no entrypoint: it takes part in no chain, however slow.
			name: "reject: a workload on no chain passes",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementReject, time.Second, 2)},
				Source: workloads(timedShop()), Incoming: workloadtest.Deployment("batch", "payment=3/30s")},
			want: Decision{Allowed: true},
		},
		{
			name: "rewrite: lowered until the chain fits",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementRewrite, 5*time.Second, 2)},
				Source: workloads(timedShop()), Incoming: slowOrder},
			want: Decision{Allowed: true, Rewrite: &Rewrite{Upstreams: "payment=2/200ms", RewrittenFrom: "payment=3/200ms"},
				Warnings: []string{"RetryPolicy shop/checkout rewrote retrycap.dev/upstreams of Deployment shop/order: payment=3/200ms -> payment=2/200ms (" + chain6s + ")"}},
		},
		{
			// payment=1: order 200ms, gateway 900ms, 1.8s > 1s: the time is in the path into order.
			name: "rewrite: refused when no count of attempts fits",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementRewrite, time.Second, 2)},
				Source: workloads(timedShop()), Incoming: slowOrder},
			want: Decision{Message: "RetryPolicy shop/checkout: client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 1s; " +
				"no rewrite fits: even with order: payment=1, client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s" +
				// small20: the levers in their units (before: none named).
				": lower the per-try timeout of Deployment shop/order retrycap.dev/upstreams payment=3/200ms, RetryPolicy shop/checkout spec.entrypoints[0].clientAttempts: 2, Deployment shop/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy shop/checkout spec.maxTimeToAnswer: 1.8s" +
				` (refused although enforcement is Rewrite: lowered as far as it goes, Deployment shop/order annotation retrycap.dev/upstreams="payment=1/200ms" still makes client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s)`},
		},
		{
			name: "audit: admitted with the message",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementAudit, 5*time.Second, 2)},
				Source: workloads(timedShop()), Incoming: slowOrder},
			want: Decision{Allowed: true, Warnings: []string{"RetryPolicy shop/checkout: " + chain6s + "; order may keep payment=2 (admitted: enforcement is Audit)"}},
		},
		{
			// An update that only lengthens a try (100ms -> 900ms) is judged: order 900ms,
			// gateway 3 x 900ms + 300ms = 3s, 6s.
			name: "reject: an update that raises only a per-try timeout is judged",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementReject, 5*time.Second, 2)},
				Source: workloads(timedShop()), Incoming: workloadtest.Deployment("order", "payment=1/900ms"),
				Old: ptr(workloadtest.Deployment("order", "payment=1/100ms"))},
			want: Decision{Message: "RetryPolicy shop/checkout: " + chain6s + "; " +
				"no rewrite fits: even with order: payment=1, " + chain6s +
				": lower the per-try timeout of Deployment shop/order retrycap.dev/upstreams payment=1/900ms, RetryPolicy shop/checkout spec.entrypoints[0].clientAttempts: 2, Deployment shop/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy shop/checkout spec.maxTimeToAnswer: 6s"},
		},
		{
			// Lowering a chain already over (6s) is a repair: it passes.
			name: "reject: an update that raises nothing passes",
			in: Input{Policies: []*v1alpha1.RetryPolicy{timedPolicy("checkout", 30, v1alpha1.EnforcementReject, 5*time.Second, 2)},
				Source: workloads(append(timedShop(), slowOrder)), Incoming: workloadtest.Deployment("order", "payment=3/150ms"), Old: ptr(slowOrder)},
			want: Decision{Allowed: true},
		},
		{
			// a is over its cap (9 > 4), b over its time only: the strictest's message, the
			// other named by what it is over.
			name: "reject: several policies, each named by what it is over",
			in: Input{Policies: []*v1alpha1.RetryPolicy{
				timedPolicy("a", 4, v1alpha1.EnforcementReject, 10*time.Second, 1),
				timedPolicy("b", 30, v1alpha1.EnforcementReject, 2*time.Second, 1)},
				Source: workloads(timedShop()), Incoming: slowOrder},
			want: Decision{Message: "RetryPolicy shop/a: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1" +
				"; also over the maxTimeToAnswer of RetryPolicy shop/b (maxTimeToAnswer 2s)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
