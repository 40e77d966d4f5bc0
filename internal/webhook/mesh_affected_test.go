package webhook

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// A VirtualService in namespace ratings exported to shop raises shop's chains: shop's policy
// judges it on shop's workloads (MeshInput.Namespaces), and the object's own namespace, which
// has none, does not hide it.
func TestDecideMeshOtherNamespacesPolicies(t *testing.T) {
	set := mesh.NewSet(mesh.Options{})
	if _, err := set.AddJSON(jsonOf(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}")); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	dep.Spec.Template.Annotations = map[string]string{annotations.Upstreams: "ratings.ratings=1"}
	w, _ := workload.FromObject(dep)
	shop := MeshNamespace{Workloads: []*workload.Parsed{workload.Parse(w)}}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, Enforcement: v1alpha1.EnforcementReject, Entrypoints: []v1alpha1.Entrypoint{{Service: "web"}}}}
	vs := func(exportTo string) []byte {
		return jsonOf(t, "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings, namespace: ratings}\nspec:\n  hosts: [ratings.ratings.svc.cluster.local]\n  exportTo: "+exportTo+
			"\n  http:\n  - route: [{destination: {host: ratings.ratings.svc.cluster.local}}]\n    retries: {attempts: 4}")
	}
	tests := []struct {
		name string
		in   MeshInput
		want MeshDecision
	}{
		{name: "exported to shop: shop's policy refuses it",
			in:   MeshInput{Policies: []*v1alpha1.RetryPolicy{p}, Namespaces: map[string]MeshNamespace{"shop": shop}, Set: set, Object: vs(`[".", shop]`)},
			want: MeshDecision{Message: "RetryPolicy shop/shop: VirtualService ratings/ratings spec.http[0].retries.attempts: 4 makes web -x5-> ratings.ratings = 5 > cap 4; VirtualService ratings/ratings may keep attempts: 3"}},
		{name: "exported to ratings only: shop's callers do not see it",
			in:   MeshInput{Policies: []*v1alpha1.RetryPolicy{p}, Namespaces: map[string]MeshNamespace{"shop": shop}, Set: set, Object: vs(`["."]`)},
			want: MeshDecision{Allowed: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideMesh(tt.in)
			if got.Allowed != tt.want.Allowed || got.Message != tt.want.Message || len(got.Warnings) != 0 || got.Patch != nil {
				t.Errorf("DecideMesh =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}
