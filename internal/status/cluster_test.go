package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

func clusterPol(sel *metav1.LabelSelector) *v1alpha1.ClusterRetryPolicy {
	p := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "checkout", Generation: 2}}
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"chain": "checkout"}}
	p.Spec.Selector = sel
	p.Spec.MaxAmplification = 4
	p.Spec.Retry.DefaultAttempts = 1
	return p
}

// A cluster policy's status goes through the same setters; its nodes are name.ns and its
// messages name its namespaces.
func TestSetCluster(t *testing.T) {
	chain := []workload.Workload{
		{Kind: workload.KindDeployment, Namespace: "shop", Name: "web", Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: "order.orders=3"})},
		{Kind: workload.KindDeployment, Namespace: "orders", Name: "order", Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: "payment.payments=3"})},
		{Kind: workload.KindDeployment, Namespace: "payments", Name: "payment"},
	}
	labels := map[string]map[string]string{"shop": {"chain": "checkout"}, "orders": {"chain": "checkout"}, "payments": {"chain": "checkout"}}
	tier := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "x"}}
	tests := []struct {
		name     string
		p        *v1alpha1.ClusterRetryPolicy
		labels   map[string]map[string]string
		ws       []workload.Workload
		worst    string
		within   cond
		ready    string
		nsSelErr bool
	}{{
		name: "over the cap", p: clusterPol(nil), labels: labels, ws: chain, worst: "web.shop>order.orders>payment.payments",
		within: cond{"False", v1alpha1.ReasonCapExceeded, "client -x1-> web.shop -x3-> order.orders -x3-> payment.payments = 9 > cap 4"},
		ready:  "analysed 3 selected workload(s): 3 service(s), 2 edge(s)",
	}, {
		name: "no namespace", p: clusterPol(nil), labels: map[string]map[string]string{"shop": {}}, ws: chain,
		within: cond{"Unknown", v1alpha1.ReasonNothingSelected, `spec.namespaceSelector {"matchLabels":{"chain":"checkout"}} selects no namespace: nothing to check`},
		ready:  "analysed 0 selected workload(s): 0 service(s), 0 edge(s)",
	}, {
		name: "namespaces without workloads", p: clusterPol(nil), labels: labels,
		within: cond{"Unknown", v1alpha1.ReasonNothingSelected, "namespaces orders, payments, shop have no workload: nothing to check"},
		ready:  "analysed 0 selected workload(s): 0 service(s), 0 edge(s)",
	}, {
		name: "one namespace without workloads", p: clusterPol(nil), labels: map[string]map[string]string{"shop": {"chain": "checkout"}},
		within: cond{"Unknown", v1alpha1.ReasonNothingSelected, "namespace shop has no workload: nothing to check"},
		ready:  "analysed 0 selected workload(s): 0 service(s), 0 edge(s)",
	}, {
		name: "a selector that selects nothing", p: clusterPol(tier), labels: labels, ws: chain,
		within: cond{"Unknown", v1alpha1.ReasonNothingSelected, `spec.selector {"matchLabels":{"tier":"x"}} selects no workload in namespaces orders, payments, shop: nothing to check`},
		ready:  "analysed 0 selected workload(s): 0 service(s), 0 edge(s)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := workload.NewClusterScope(tt.p, tt.labels)
			if err != nil {
				t.Fatal(err)
			}
			r, a := workload.Analyze(workload.ForClusterRetryPolicy(tt.p, s), tt.ws, nil)
			var st v1alpha1.RetryPolicyStatus
			Set(&st, Input{Generation: tt.p.Generation, Selector: tt.p.Spec.Selector, Result: r, Analysis: a, Now: t0})
			if st.WorstPath != tt.worst {
				t.Errorf("worstPath %q, want %q", st.WorstPath, tt.worst)
			}
			if got := condOf(&st, v1alpha1.ConditionWithinCap); got != tt.within {
				t.Errorf("WithinCap %+v, want %+v", got, tt.within)
			}
			if got := condOf(&st, v1alpha1.ConditionReady); got != (cond{"True", v1alpha1.ReasonReconciled, tt.ready}) {
				t.Errorf("Ready %+v, want %q", got, tt.ready)
			}
		})
	}
}

// An invalid namespaceSelector is named in both conditions.
func TestSetClusterInvalidNamespaceSelector(t *testing.T) {
	p := clusterPol(nil)
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "chain", Operator: "Near"}}}
	_, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	var st v1alpha1.RetryPolicyStatus
	Set(&st, Input{Generation: 2, Selector: p.Spec.NamespaceSelector, SelectorField: "spec.namespaceSelector", SelectorError: err, Now: t0})
	want := cond{"False", ReasonInvalidSelector, `spec.namespaceSelector {"matchExpressions":[{"key":"chain","operator":"Near"}]} is invalid: "Near" is not a valid label selector operator`}
	if got := condOf(&st, v1alpha1.ConditionReady); got != want {
		t.Errorf("Ready %+v, want %+v", got, want)
	}
	if got := condOf(&st, v1alpha1.ConditionWithinCap); got != (cond{"Unknown", ReasonInvalidSelector, "no graph: spec.namespaceSelector is invalid (see condition Ready)"}) {
		t.Errorf("WithinCap %+v", got)
	}
}
