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
	SortStrictest(ps)
	var got []string
	for _, x := range ps {
		got = append(got, x.Namespace+"/"+x.Name)
	}
	// Lowest cap first; ties by namespace, then name, whatever order they came in.
	if want := []string{"other/z", "shop/a", "shop/b", "shop/mid", "shop/loose"}; !slices.Equal(got, want) {
		t.Fatalf("SortStrictest = %v, want %v", got, want)
	}
}
