package workload

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestOverridden: the workloads of a policy whose proxies run a stricter selecting policy's
// settings, as the injector picks it (the lowest cap; a RetryPolicy before a ClusterRetryPolicy
// on a tie), each named with that policy. Before, nothing said so: two policies selecting one
// workload left the looser one's spec.retry, budget and breaker unused, its status silent.
func TestOverridden(t *testing.T) {
	off := false
	rp := func(name string, cap int32, team string, disabled bool) *Policy {
		p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap}}
		if team != "" {
			p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": team}}
		}
		if disabled {
			p.Spec.Injection.Enabled = &off
		}
		return ForRetryPolicy(p)
	}
	crp := func(name string, cap int32, nss ...string) *Policy {
		return ForClusterRetryPolicy(&v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterRetryPolicySpec{RetryPolicySpec: v1alpha1.RetryPolicySpec{MaxAmplification: cap}}}, NewClusterScopeOf(nss...))
	}
	dep := func(ns, name, team string) Workload {
		return Workload{Kind: "Deployment", Namespace: ns, Name: name, Labels: PairsFrom("team", team)}
	}
	gw, pay, web := dep("shop", "gateway", "web"), dep("shop", "payment", "pay"), dep("front", "web", "web")
	const head = "selected workload(s) are also selected by a stricter policy, whose spec.retry, spec.budget, spec.circuitBreaker and spec.observability their injected proxies run instead of this policy's (every selecting policy's cap is still enforced): "

	loose, strict, strictWeb := rp("loose", 9, "", false), rp("strict", 3, "", false), rp("strict-web", 2, "web", false)
	cluster3, cluster9 := crp("ceiling", 3, "shop", "front"), crp("wide", 9, "shop", "front")
	for _, tc := range []struct {
		name     string
		self     *Policy
		selected []Workload
		others   []*Policy
		want     string
	}{
		{"alone", loose, []Workload{gw, pay}, []*Policy{loose}, ""},
		{"the strictest itself", strict, []Workload{gw, pay}, []*Policy{loose, strict, cluster9}, ""},
		{"each workload with the strictest that selects it", loose, []Workload{gw, pay}, []*Policy{loose, strict, strictWeb},
			"2 " + head + "Deployment shop/gateway (RetryPolicy shop/strict-web), Deployment shop/payment (RetryPolicy shop/strict)"},
		{"a RetryPolicy wins a tie with a ClusterRetryPolicy", cluster3, []Workload{gw, web}, []*Policy{strict, cluster3},
			"1 " + head + "Deployment shop/gateway (RetryPolicy shop/strict)"},
		{"a ClusterRetryPolicy over a looser RetryPolicy", loose, []Workload{gw}, []*Policy{cluster3},
			"1 " + head + "Deployment shop/gateway (ClusterRetryPolicy ceiling)"},
		{"a stricter policy with injection disabled renders nothing", loose, []Workload{gw}, []*Policy{rp("off", 1, "", true)}, ""},
		{"self with injection disabled renders nothing", rp("self-off", 9, "", true), []Workload{gw}, []*Policy{strict}, ""},
		{"an invalid selector selects nothing", loose, []Workload{gw}, []*Policy{ForRetryPolicy(&v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bad"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 1, Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "In"}}}}})}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overridden(tc.self, tc.selected, tc.others); got != tc.want {
				t.Errorf("Overridden\n got %q\nwant %q", got, tc.want)
			}
		})
	}

	// Past MaxOverriddenListed: the first ten named, the rest counted.
	var many []Workload
	for i := range 12 {
		many = append(many, dep("shop", fmt.Sprintf("w%02d", i), "x"))
	}
	got := Overridden(loose, many, []*Policy{strict})
	want := "12 " + head + "Deployment shop/w00 (RetryPolicy shop/strict), Deployment shop/w01 (RetryPolicy shop/strict), Deployment shop/w02 (RetryPolicy shop/strict), Deployment shop/w03 (RetryPolicy shop/strict), Deployment shop/w04 (RetryPolicy shop/strict), Deployment shop/w05 (RetryPolicy shop/strict), Deployment shop/w06 (RetryPolicy shop/strict), Deployment shop/w07 (RetryPolicy shop/strict), Deployment shop/w08 (RetryPolicy shop/strict), Deployment shop/w09 (RetryPolicy shop/strict) and 2 more"
	if got != want {
		t.Errorf("12 workloads\n got %q\nwant %q", got, want)
	}
}
