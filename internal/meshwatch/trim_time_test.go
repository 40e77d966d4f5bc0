package meshwatch

import (
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/mesh"
)

// TestTrimKeepsTime: the Set the manager builds from cached (trimmed) objects times every layer
// as the Set analyze builds from the manifests: the same LayerTime, delays included. Before,
// Trim dropped a VirtualService route's fault and a BackendTrafficPolicy's faultInjection (the
// trees kept neither, though docs/meshes.md said they were kept): the status and the gate
// counted ratings' 7s delay (Istio's bookinfo virtual-service-ratings-test-delay.yaml shape, with
// a 3s timeout) and the gateway's 4s delay as none, 3s where analyze said 10s, and 0 where it
// said 4s. A MeshRetry keeps its perTryTimeout and backOff (read since timered17).
func TestTrimKeepsTime(t *testing.T) {
	docs := []string{
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, labels: {istio-injection: enabled}}",
		`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    fault: {delay: {percentage: {value: 100.0}, fixedDelay: 7s}}
    timeout: 3s
    route: [{destination: {host: ratings, subset: v1}}]
  - route: [{destination: {host: ratings, subset: v1}}]`,
		"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: shop}\nspec:\n  parentRefs: [{name: eg}]\n  rules:\n  - backendRefs: [{name: frontend}]",
		`apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: web, namespace: shop}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
  retry: {numRetries: 2}
  faultInjection: {delay: {fixedDelay: 4s, percentage: 50}}`,
	}
	docs = append(docs, "apiVersion: v1\nkind: Namespace\nmetadata: {name: kuma-demo, labels: {kuma.io/sidecar-injection: enabled}}",
		`apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: r, namespace: kuma-system}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: Mesh}
    default: {http: {numRetries: 3, perTryTimeout: 2s, backOff: {baseInterval: 1s, maxInterval: 5s}}}`)
	full, trimmed := mesh.NewSet(mesh.Options{}), mesh.NewSet(mesh.Options{})
	for _, d := range docs {
		u := obj(t, d)
		if _, err := full.AddUnstructured(u); err != nil {
			t.Fatal(err)
		}
		if _, err := trimmed.AddUnstructured(Trim(u)); err != nil {
			t.Fatal(err)
		}
	}
	c := mesh.Caller{Name: "Deployment bookinfo/reviews", Namespace: "bookinfo"}
	for _, tc := range []struct {
		name  string
		layer func(s *mesh.Set) mesh.Layer
		delay time.Duration
	}{
		{"VirtualService route's fault.delay", func(s *mesh.Set) mesh.Layer { return s.Edge(c, "ratings").Layers[0] }, 7 * time.Second},
		{"BackendTrafficPolicy's faultInjection.delay", func(s *mesh.Set) mesh.Layer {
			return s.Entry(mesh.ServiceRef{Namespace: "shop", Name: "frontend"}).Layers[0]
		}, 4 * time.Second},
		{"MeshRetry's perTryTimeout and backOff", func(s *mesh.Set) mesh.Layer {
			return s.Edge(mesh.Caller{Name: "Deployment kuma-demo/app", Namespace: "kuma-demo"}, "redis").Layers[0]
		}, 0},
	} {
		want := full.LayerTime(tc.layer(full))
		if want.Delay != tc.delay {
			t.Fatalf("%s: from the manifest, delay %v, want %v", tc.name, want.Delay, tc.delay)
		}
		if got := trimmed.LayerTime(tc.layer(trimmed)); got != want {
			t.Errorf("%s: from the trimmed object\n got %+v\nwant %+v", tc.name, got, want)
		}
	}
}
