package gate

import (
	"reflect"
	"testing"
	"time"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// TestRewriteStoresWhatRejectAdmits: the workload gate's Rewrite follows the mesh gate's rule
// (docs/decisions.md, wgate19). A create whose path into the workload is over the cap on its own
// (gateway -x5-> order, cap 4: even payment=1 makes 5) was admitted under Rewrite, lowered to 1
// attempt, with a warning, while Reject refused the same create; an update over maxTimeToAnswer
// that Rewrite lowers back to the stored value (raising nothing, which Reject admits) was refused.
// Each case runs under Reject and Rewrite, and what Rewrite admits is judged again under Reject.
func TestRewriteStoresWhatRejectAdmits(t *testing.T) {
	const (
		m15 = "RetryPolicy shop/checkout: gateway -x5-> order -x3-> payment = 15 > cap 4; no rewrite fits: even with order: payment=1, gateway -x5-> order -x1-> payment = 5 > cap 4: lower Deployment shop/gateway retrycap.dev/upstreams order=5, or raise RetryPolicy shop/checkout spec.maxAmplification: 4"
		m2s = "RetryPolicy shop/checkout: client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 1s; no rewrite fits: even with order: payment=1, client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s" +
			": lower the per-try timeout of Deployment shop/order retrycap.dev/upstreams payment=3/200ms, RetryPolicy shop/checkout spec.entrypoints[0].clientAttempts: 2, Deployment shop/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy shop/checkout spec.maxTimeToAnswer: 1.8s"
		mPer = "RetryPolicy shop/checkout: client -x2-> gateway 2.1s -> order 600ms -> payment ? = 4.2s > maxTimeToAnswer 1s; no rewrite fits: even with order: payment=1, client -x2-> gateway 2.1s -> order 600ms -> payment ? = 4.2s > maxTimeToAnswer 1s" +
			": lower the per-try timeout of Deployment shop/order retrycap.dev/upstreams payment=1/600ms, RetryPolicy shop/checkout spec.entrypoints[0].clientAttempts: 2, Deployment shop/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy shop/checkout spec.maxTimeToAnswer: 4.2s"
	)
	countShop := []workload.Workload{workloadtest.Deployment("gateway", "order=5"), workloadtest.Deployment("payment", "")}
	order := func(ups string) workload.Workload { return workloadtest.Deployment("order", ups) }
	countPolicy := func(e v1alpha1.Enforcement) *v1alpha1.RetryPolicy { return workloadtest.Policy("checkout", 4, e, nil) }
	timePolicy := func(e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
		return timedPolicy("checkout", 30, e, time.Second, 2)
	}
	tests := []struct {
		name     string
		policy   func(v1alpha1.Enforcement) *v1alpha1.RetryPolicy
		stored   []workload.Workload
		incoming workload.Workload
		old      *workload.Workload
		reject   Decision
		rewrite  Decision
	}{
		{
			name: "cap: a create over on the path into it", policy: countPolicy, stored: countShop, incoming: order("payment=3"),
			reject:  Decision{Message: m15},
			rewrite: Decision{Message: m15 + ` (refused although enforcement is Rewrite: lowered as far as it goes, Deployment shop/order annotation retrycap.dev/upstreams="payment=1" still makes gateway -x5-> order -x1-> payment = 5 > cap 4)`},
		},
		{
			name: "cap: an update raising 1 -> 3 is lowered back to the stored value", policy: countPolicy,
			stored: append(countShop, order("payment=1")), incoming: order("payment=3"), old: ptr(order("payment=1")),
			reject: Decision{Message: m15},
			rewrite: Decision{Allowed: true, Rewrite: &Rewrite{Upstreams: "payment=1", RewrittenFrom: "payment=3"}, Warnings: []string{
				"RetryPolicy shop/checkout rewrote retrycap.dev/upstreams of Deployment shop/order: payment=3 -> payment=1 (gateway -x5-> order -x3-> payment = 15 > cap 4)",
				m15 + " (admitted: enforcement is Rewrite; Deployment shop/order is lowered as far as it goes, which raises nothing over the stored object)"}},
		},
		{
			name: "cap: an update raising 2 -> 3 is lowered below the stored value", policy: countPolicy,
			stored: append(countShop, order("payment=2")), incoming: order("payment=3"), old: ptr(order("payment=2")),
			reject: Decision{Message: m15},
			rewrite: Decision{Allowed: true, Rewrite: &Rewrite{Upstreams: "payment=1", RewrittenFrom: "payment=3"}, Warnings: []string{
				"RetryPolicy shop/checkout rewrote retrycap.dev/upstreams of Deployment shop/order: payment=3 -> payment=1 (gateway -x5-> order -x3-> payment = 15 > cap 4)",
				m15 + " (admitted: enforcement is Rewrite; Deployment shop/order is lowered as far as it goes, which raises nothing over the stored object)"}},
		},
		{
			name: "cap: an update that keeps its attempts", policy: countPolicy,
			stored: append(countShop, order("payment=3")), incoming: order("payment=3"), old: ptr(order("payment=3")),
			reject: Decision{Allowed: true}, rewrite: Decision{Allowed: true},
		},
		{
			name: "cap: an update that lowers its attempts, still over", policy: countPolicy,
			stored: append(countShop, order("payment=3")), incoming: order("payment=2"), old: ptr(order("payment=3")),
			reject: Decision{Allowed: true}, rewrite: Decision{Allowed: true},
		},
		{
			name: "time: a create over on the path into it", policy: timePolicy, stored: timedShop(), incoming: order("payment=3/200ms"),
			reject:  Decision{Message: m2s},
			rewrite: Decision{Message: m2s + ` (refused although enforcement is Rewrite: lowered as far as it goes, Deployment shop/order annotation retrycap.dev/upstreams="payment=1/200ms" still makes client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s)`},
		},
		{
			// Refused before ("no count of attempts brings the chain within maxTimeToAnswer")
			// though lowered to the stored payment=1/200ms it raises nothing.
			name: "time: an update raising 1 -> 3 is lowered back to the stored value", policy: timePolicy,
			stored: append(timedShop(), order("payment=1/200ms")), incoming: order("payment=3/200ms"), old: ptr(order("payment=1/200ms")),
			reject: Decision{Message: m2s},
			rewrite: Decision{Allowed: true, Rewrite: &Rewrite{Upstreams: "payment=1/200ms", RewrittenFrom: "payment=3/200ms"}, Warnings: []string{
				"RetryPolicy shop/checkout rewrote retrycap.dev/upstreams of Deployment shop/order: payment=3/200ms -> payment=1/200ms (client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 1s)",
				m2s + " (admitted: enforcement is Rewrite; Deployment shop/order is lowered as far as it goes, which raises nothing over the stored object)"}},
		},
		{
			// A per-try timeout raised at 1 attempt: nothing to lower, still raised.
			name: "time: an update raising only a per-try timeout", policy: timePolicy,
			stored: append(timedShop(), order("payment=1/100ms")), incoming: order("payment=1/600ms"), old: ptr(order("payment=1/100ms")),
			reject:  Decision{Message: mPer},
			rewrite: Decision{Message: mPer + ` (refused although enforcement is Rewrite: lowered as far as it goes, Deployment shop/order annotation retrycap.dev/upstreams="payment=1/600ms" still makes client -x2-> gateway 2.1s -> order 600ms -> payment ? = 4.2s > maxTimeToAnswer 1s)`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := func(e v1alpha1.Enforcement, w workload.Workload) Input {
				return Input{Policies: []*v1alpha1.RetryPolicy{tc.policy(e)}, Source: workloads(tc.stored), Incoming: w, Old: tc.old}
			}
			if got := Decide(in(v1alpha1.EnforcementReject, tc.incoming)); !reflect.DeepEqual(got, tc.reject) {
				t.Errorf("Reject:\ngot  %#v\nwant %#v", got, tc.reject)
			}
			got := Decide(in(v1alpha1.EnforcementRewrite, tc.incoming))
			if !reflect.DeepEqual(got, tc.rewrite) {
				t.Errorf("Rewrite:\ngot  %#v\nwant %#v", got, tc.rewrite)
			}
			if got.Allowed && got.Rewrite != nil {
				stored := withUpstreams(tc.incoming, got.Rewrite.Upstreams)
				if again := Decide(in(v1alpha1.EnforcementReject, stored)); !again.Allowed {
					t.Errorf("Reject refuses what Rewrite stores (%s): %s", got.Rewrite.Upstreams, again.Message)
				}
			}
		})
	}
}

// TestLeversNameTheFields: a refusal no count of the workload's own attempts fixes names each
// other factor on the chain as the field that sets it: the entrypoint's client attempts, a
// caller's entry that takes the policy's default, a canary's entry of the same service, the
// cap. It said nothing after "no rewrite fits: ...".
func TestLeversNameTheFields(t *testing.T) {
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints[0].ClientAttempts = 2
	p.Spec.Retry.DefaultAttempts = 3
	canary := canaryOf("gateway-v2", "gateway", "order=2")
	stored := []workload.Workload{workloadtest.Deployment("gateway", "order"), canary, workloadtest.Deployment("payment", "")}
	got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(stored), Incoming: workloadtest.Deployment("order", "payment=1")})
	want := Decision{Message: "RetryPolicy shop/checkout: client -x2-> gateway -x3-> order -x1-> payment = 6 > cap 4; " +
		"no rewrite fits: even with order: payment=1, client -x2-> gateway -x3-> order -x1-> payment = 6 > cap 4: " +
		"lower RetryPolicy shop/checkout spec.entrypoints[0].clientAttempts: 2, Deployment shop/gateway retrycap.dev/upstreams order (the policy's defaultAttempts 3), " +
		"Deployment shop/gateway-v2 retrycap.dev/upstreams order=2, or raise RetryPolicy shop/checkout spec.maxAmplification: 4"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}
