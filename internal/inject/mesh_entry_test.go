package inject

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// With the gate's mesh Set, a Service a Gateway-parented route routes to is a default
// entrypoint although web calls it: the injector decides on the graph the gate judges.
func TestIsEntrypointThroughAGatewayRoute(t *testing.T) {
	dep := func(name, ups string) workload.Workload {
		return workload.Workload{Kind: workload.KindDeployment, Namespace: "shop", Name: name,
			Labels: workload.PairsOf(map[string]string{"app": name}), Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: ups})}
	}
	ws := []workload.Workload{dep("web", "api=1"), dep("api", "db=1"), dep("db", "")}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 9}}
	set := mesh.NewSet(mesh.Options{})
	if _, err := set.AddManifest([]byte("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: shop}\nspec:\n  parentRefs: [{name: eg}]\n  rules:\n  - backendRefs: [{name: api, port: 80}]\n    retry: {attempts: 2}")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		set  *mesh.Set
		w    workload.Workload
		want bool
	}{
		{nil, ws[1], false}, {set, ws[1], true}, {set, ws[0], true}, {set, ws[2], false},
	} {
		if got := isEntrypoint(workload.ForRetryPolicy(p), ws, tt.w, tt.set); got != tt.want {
			t.Errorf("%s, Set %v: entrypoint %v, want %v", tt.w, tt.set != nil, got, tt.want)
		}
	}
}
