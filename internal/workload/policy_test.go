package workload

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPolicyOfEitherKind: the two adapters give one view, a RetryPolicy being a policy over its
// own namespace; every answer a caller reads of a Policy, for both kinds side by side.
func TestPolicyOfEitherKind(t *testing.T) {
	rp := policy("shop", "checkout", 4)
	rp.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}
	crp := clusterPolicy("chain", 8, map[string]string{"chain": "checkout"})
	crp.Spec.Selector = rp.Spec.Selector
	both := []*Policy{ForRetryPolicy(rp), ForClusterRetryPolicy(crp, scope(t, crp, teams))}

	web := func(ns string) Workload { return deploy(ns, "web", "", map[string]string{"tier": "web"}) }
	type answers struct {
		ref, qualified, scope, object            string
		selects                                  string // shop/web, orders/web, bank/web, shop/db
		node, nodeOther, upstream, upstreamOther string
		entry, entryRef, entryQualified          string
	}
	want := []answers{{
		ref: "RetryPolicy shop/checkout", qualified: "shop/checkout", scope: "shop", object: "*v1alpha1.RetryPolicy",
		selects: "true false false false",
		node:    "web", nodeOther: "bank.billing", upstream: "payment", upstreamOther: "payment.payments",
		entry: "web", entryRef: "shop/web", entryQualified: "web.shop",
	}, {
		ref: "ClusterRetryPolicy chain", qualified: "chain", scope: "orders,payments,shop", object: "*v1alpha1.ClusterRetryPolicy",
		selects: "true true false false",
		node:    "web.shop", nodeOther: "bank.billing", upstream: "payment.shop", upstreamOther: "payment.payments",
		entry: "web", entryRef: "/web", entryQualified: "web.shop",
	}}
	for i, p := range both {
		var got answers
		got.ref, got.qualified = p.Ref().String(), p.Ref().QualifiedName()
		got.scope, got.object = strings.Join(p.Scope().Namespaces(), ","), fmt.Sprintf("%T", p.Object())
		var sel []string
		for _, w := range []Workload{web("shop"), web("orders"), web("bank"), deploy("shop", "db", "", nil)} {
			ok, err := p.Selects(w)
			if err != nil {
				t.Fatal(err)
			}
			sel = append(sel, fmt.Sprint(ok))
		}
		got.selects = strings.Join(sel, " ")
		got.node, got.nodeOther = p.Node("web", "shop"), p.Node("bank", "billing")
		got.upstream, got.upstreamOther = p.UpstreamNode("payment.shop.svc.cluster.local", "shop"), p.UpstreamNode("payment.payments.svc", "shop")
		n, ref := p.Entrypoint("web")
		got.entry, got.entryRef = n, ref.Namespace+"/"+ref.Name
		got.entryQualified, _ = p.Entrypoint("web.shop")
		if got != want[i] {
			t.Errorf("%s:\n got %+v\nwant %+v", p, got, want[i])
		}
		if p.Spec().MaxAmplification != p.Ref().Cap {
			t.Errorf("%s: spec cap %d, ref cap %d", p, p.Spec().MaxAmplification, p.Ref().Cap)
		}
	}
	// A RetryPolicy's "web.shop" is no entrypoint of its own namespace's form: the CRD refuses
	// it; the graph names it as written, a node nothing provides.
	if n, _ := both[0].Entrypoint("web.shop"); n != "web.shop" {
		t.Errorf("RetryPolicy entrypoint web.shop: node %q", n)
	}
}

// TestPolicySelectorErrors: an invalid selector is reported by Selects and the builder, naming
// the policy and the field as each kind's validator does, and selects nothing.
func TestPolicySelectorErrors(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
	rp := policy("shop", "checkout", 4)
	rp.Spec.Selector = bad
	crp := clusterPolicy("chain", 8, map[string]string{})
	crp.Spec.Selector = bad
	for _, tc := range []struct {
		p    *Policy
		want string
	}{
		{ForRetryPolicy(rp), `RetryPolicy shop/checkout: spec.selector: "Near" is not a valid label selector operator`},
		{ForClusterRetryPolicy(crp, NewClusterScopeOf("shop")), `ClusterRetryPolicy chain: spec.selector: "Near" is not a valid label selector operator`},
	} {
		ok, err := tc.p.Selects(deploy("shop", "web", "", nil))
		if ok || err == nil || err.Error() != tc.want {
			t.Errorf("%s: Selects = %v, %v; want false, %s", tc.p, ok, err, tc.want)
		}
		r := Build(tc.p, []Workload{deploy("shop", "web", "db=3", nil)}, nil)
		if len(r.Errors) != 1 || r.Errors[0].Error() != tc.want || len(r.Selected) != 0 {
			t.Errorf("%s: Build errors %v, selected %v; want [%s], none", tc.p, r.Errors, r.Selected, tc.want)
		}
	}
	// A cluster policy without a scope selects no namespace.
	if ok, _ := ForClusterRetryPolicy(clusterPolicy("c", 1, nil), nil).Selects(deploy("shop", "web", "", nil)); ok {
		t.Error("a ClusterRetryPolicy without a scope selected a workload")
	}
}
