package workload

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

func TestSortStrictest(t *testing.T) {
	p := func(ns, name string, cap int32) *v1alpha1.RetryPolicy {
		return &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap}}
	}
	ps := []*v1alpha1.RetryPolicy{p("shop", "loose", 9), p("shop", "b", 2), p("other", "z", 2), p("shop", "a", 2), p("shop", "mid", 4)}
	slices.SortStableFunc(ps, func(a, b *v1alpha1.RetryPolicy) int {
		return CompareRefs(ForRetryPolicy(a).Ref(), ForRetryPolicy(b).Ref())
	})
	var got []string
	for _, x := range ps {
		got = append(got, x.Namespace+"/"+x.Name)
	}
	// Lowest cap first; ties by namespace, then name, whatever order they came in.
	if want := []string{"other/z", "shop/a", "shop/b", "shop/mid", "shop/loose"}; !slices.Equal(got, want) {
		t.Fatalf("CompareRefs order = %v, want %v", got, want)
	}
}

func TestSortRefsAcrossKinds(t *testing.T) {
	rp := func(ns, name string, cap int32) PolicyRef {
		return ForRetryPolicy(&v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap}}).Ref()
	}
	crp := func(name string, cap int32) PolicyRef {
		return ForClusterRetryPolicy(&v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterRetryPolicySpec{RetryPolicySpec: v1alpha1.RetryPolicySpec{MaxAmplification: cap}}}, nil).Ref()
	}
	rs := []PolicyRef{crp("wide", 9), rp("shop", "b", 4), crp("chain", 4), crp("aaa", 4), rp("shop", "a", 6), crp("tight", 2), rp("other", "z", 4)}
	slices.SortStableFunc(rs, CompareRefs)
	var got []string
	for _, r := range rs {
		got = append(got, r.String())
	}
	// Lowest cap first; on a tie RetryPolicies (by namespace, then name) before
	// ClusterRetryPolicies (by name).
	want := []string{"ClusterRetryPolicy tight", "RetryPolicy other/z", "RetryPolicy shop/b", "ClusterRetryPolicy aaa",
		"ClusterRetryPolicy chain", "RetryPolicy shop/a", "ClusterRetryPolicy wide"}
	if !slices.Equal(got, want) {
		t.Fatalf("CompareRefs order = %v, want %v", got, want)
	}
	if got := crp("chain", 4).QualifiedName(); got != "chain" {
		t.Errorf("QualifiedName of a ClusterRetryPolicy = %q, want %q", got, "chain")
	}
	if got := rp("shop", "a", 6).QualifiedName(); got != "shop/a" {
		t.Errorf("QualifiedName of a RetryPolicy = %q, want %q", got, "shop/a")
	}
}
