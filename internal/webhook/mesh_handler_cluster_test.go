package webhook

import (
	"slices"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// crossChain is web (shop) -> pay.payments -> bank (payments), one attempt each in the
// application: a chain only a ClusterRetryPolicy sees whole.
func crossChain() (shop, payments []*workload.Parsed) {
	for _, d := range []struct{ ns, name, upstreams string }{{"payments", "bank", ""}, {"payments", "pay", "bank=1"}, {"shop", "web", "pay.payments=1"}} {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: d.name}}
		dep.Spec.Template.Annotations = map[string]string{}
		if d.upstreams != "" {
			dep.Spec.Template.Annotations[annotations.Upstreams] = d.upstreams
		}
		w, _ := workload.FromObject(dep)
		if d.ns == "shop" {
			shop = append(shop, workload.Parse(w))
		} else {
			payments = append(payments, workload.Parse(w))
		}
	}
	return shop, payments
}

func crossPolicy(name string, cap int32, e v1alpha1.Enforcement) *v1alpha1.ClusterRetryPolicy {
	return &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterRetryPolicySpec{NamespaceSelector: &metav1.LabelSelector{},
			RetryPolicySpec: v1alpha1.RetryPolicySpec{MaxAmplification: cap, Enforcement: e}}}
}

// bankVS binds payments' bank with attempts retries, exported to exportTo (empty: everywhere).
func bankVS(attempts, exportTo string) string {
	y := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: bank, namespace: payments}\nspec:\n  hosts: [bank]\n"
	if exportTo != "" {
		y += "  exportTo: " + exportTo + "\n"
	}
	return y + "  http:\n  - route: [{destination: {host: bank}}]\n    retries: {attempts: " + attempts + "}\n"
}

// DecideMesh judges a ClusterRetryPolicy whose chain crosses the object's namespace on its
// graph across namespaces, ordered with the RetryPolicies as the workload gate orders them.
// Both namespaces are meshed: every hop has Istio's default 3 tries unless bankVS binds bank
// (web is the cluster graph's default entrypoint, one client attempt: 3 x tries into bank).
func TestDecideMeshClusterPolicies(t *testing.T) {
	shop, payments := crossChain()
	both := workload.NewClusterScopeOf("payments", "shop")
	all := append(append([]*workload.Parsed{}, payments...), shop...)
	slices.SortFunc(all, func(a, b *workload.Parsed) int { return workload.Compare(a.Workload, b.Workload) })
	cluster := func(p *v1alpha1.ClusterRetryPolicy, s *workload.ClusterScope) MeshClusterPolicy {
		return MeshClusterPolicy{Policy: p, Scope: s, Workloads: all}
	}
	pay := func(cap int32) *v1alpha1.RetryPolicy {
		return &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "pay"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap, Enforcement: v1alpha1.EnforcementReject}}
	}
	const crossed = "VirtualService payments/bank spec.http[0].retries.attempts: 3 makes web.shop -x3-> pay.payments -x4-> bank.payments = 12 > cap 10"
	for _, tc := range []struct {
		name     string
		policies []*v1alpha1.RetryPolicy
		clusters []MeshClusterPolicy
		object   string
		want     MeshDecision
	}{
		{
			name:     "over the cluster cap only: 3 x 4 = 12 > 10, the namespace's own chain 4 within 20",
			policies: []*v1alpha1.RetryPolicy{pay(20)}, clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 10, ""), both)},
			object: bankVS("3", ""),
			want:   MeshDecision{Message: "ClusterRetryPolicy crp-chain: " + crossed + "; VirtualService payments/bank may keep attempts: 2"},
		},
		{
			name: "what fits the cluster cap passes", clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 10, ""), both)},
			object: bankVS("2", ""), want: MeshDecision{Allowed: true},
		},
		{
			name:     "over both: the stricter RetryPolicy first, the cluster policy named after it",
			policies: []*v1alpha1.RetryPolicy{pay(3)}, clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 10, ""), both)},
			object: bankVS("3", ""),
			want: MeshDecision{Message: "RetryPolicy payments/pay: VirtualService payments/bank spec.http[0].retries.attempts: 3 makes pay -x4-> bank = 4 > cap 3; " +
				"VirtualService payments/bank may keep attempts: 2; also over the cap of ClusterRetryPolicy crp-chain (cap 10)"},
		},
		{
			name:     "over both: the stricter ClusterRetryPolicy first",
			policies: []*v1alpha1.RetryPolicy{pay(3)}, clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 2, ""), both)},
			object: bankVS("3", ""),
			want: MeshDecision{Message: "ClusterRetryPolicy crp-chain: VirtualService payments/bank spec.http[0].retries.attempts: 3 makes web.shop -x3-> pay.payments -x4-> bank.payments = 12 > cap 2; " +
				"even VirtualService payments/bank attempts: 0 does not fit: lower the 3 tries of web.shop -> pay.payments (Istio default, no VirtualService binds payments/pay), or raise ClusterRetryPolicy crp-chain spec.maxAmplification: 2; also over the cap of RetryPolicy payments/pay (cap 3)"},
		},
		{
			name:     "a tie on the cap: the RetryPolicy, then the cluster policies by name (CompareRefs)",
			policies: []*v1alpha1.RetryPolicy{pay(9)},
			clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 9, ""), both), cluster(crossPolicy("a-chain", 9, ""), both)},
			object:   bankVS("9", ""),
			want: MeshDecision{Message: "RetryPolicy payments/pay: VirtualService payments/bank spec.http[0].retries.attempts: 9 makes pay -x10-> bank = 10 > cap 9; " +
				"VirtualService payments/bank may keep attempts: 8; also over the cap of ClusterRetryPolicy a-chain (cap 9), crp-chain (cap 9)"},
		},
		{
			name: "a scope without the namespaces the layers reach is not consulted",
			clusters: []MeshClusterPolicy{cluster(crossPolicy("shop-only", 1, ""), workload.NewClusterScopeOf("shop")),
				cluster(crossPolicy("elsewhere", 1, ""), workload.NewClusterScopeOf("other"))},
			object: bankVS("3", `["."]`), want: MeshDecision{Allowed: true},
		},
		{
			name: "exported to shop only: bank's caller pay does not see it", clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 10, ""), both)},
			object: bankVS("3", `[shop]`), want: MeshDecision{Allowed: true},
		},
		{
			name: "Rewrite: lowered to what the cluster cap allows", clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 10, v1alpha1.EnforcementRewrite), both)},
			object: bankVS("3", ""),
			want: MeshDecision{Allowed: true,
				Warnings: []string{"ClusterRetryPolicy crp-chain rewrote VirtualService payments/bank: spec.http[0].retries.attempts: 3 -> 2 (web.shop -x3-> pay.payments -x4-> bank.payments = 12 > cap 10)"},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: "spec.http[0].retries.attempts: 3"}},
					{Operation: "replace", Path: "/spec/http/0/retries/attempts", Value: float64(2)},
				}},
		},
		{
			// The RetryPolicy's 4 (first, by name) leaves the cluster chain at 3 x 5 = 15 > 9: lowered
			// again, to 3 x 3 = 9.
			name: "Rewrite by both kinds: lowered until both fit, both named", policies: []*v1alpha1.RetryPolicy{{ObjectMeta: pay(0).ObjectMeta,
				Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 5, Enforcement: v1alpha1.EnforcementRewrite}}},
			clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 9, v1alpha1.EnforcementRewrite), both)},
			object:   bankVS("6", ""),
			want: MeshDecision{Allowed: true,
				Warnings: []string{"RetryPolicy payments/pay and ClusterRetryPolicy crp-chain rewrote VirtualService payments/bank: spec.http[0].retries.attempts: 6 -> 2 " +
					"(pay -x7-> bank = 7 > cap 5; web.shop -x3-> pay.payments -x5-> bank.payments = 15 > cap 9)"},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: "spec.http[0].retries.attempts: 6"}},
					{Operation: "replace", Path: "/spec/http/0/retries/attempts", Value: float64(2)},
				}},
		},
		{
			name: "Audit: a warning", clusters: []MeshClusterPolicy{cluster(crossPolicy("crp-chain", 10, v1alpha1.EnforcementAudit), both)},
			object: bankVS("3", ""),
			want: MeshDecision{Allowed: true, Warnings: []string{"ClusterRetryPolicy crp-chain: " + crossed +
				"; VirtualService payments/bank may keep attempts: 2 (admitted: enforcement is Audit)"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			for _, ns := range []string{"shop", "payments"} {
				if _, err := set.AddJSON(jsonOf(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+", labels: {istio-injection: enabled}}")); err != nil {
					t.Fatal(err)
				}
			}
			expectMeshDecision(t, DecideMesh(MeshInput{Policies: tc.policies, ClusterPolicies: tc.clusters, Workloads: payments, Set: set, Object: jsonOf(t, tc.object)}), tc.want)
		})
	}
}
