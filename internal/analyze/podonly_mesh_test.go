package analyze

import (
	"strings"
	"testing"
)

// TestMeshFromPodTemplateAlone (kuma19): a pod template alone can put its workload in a mesh
// layer, with no Namespace, Service or mesh object in the input: Dapr's dapr.io/enabled (the
// callee named by its app-id, which needs no Service of the app's: Dapr's injector makes
// <app-id>-dapr), Kuma's pod label (its Namespace not in the input: the label decides),
// Istio's pod label sidecar.istio.io/inject "true". Before, such an input had no mesh Set and
// Dapr's and Kuma's layers were lost: 1 try, within cap 1, exit 0 (false greens); Istio's was
// already counted (kept here as the control).
func TestMeshFromPodTemplateAlone(t *testing.T) {
	dep := func(name, labels, annotations string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: shop}\nspec:\n  selector: {matchLabels: {app: " + name + "}}\n" +
			"  template:\n    metadata: {labels: {app: " + name + labels + "}, annotations: {" + annotations + "}}\n    spec: {containers: [{name: a, image: x}]}\n---\n"
	}
	const policy = "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec: {maxAmplification: 1}\n"
	for _, c := range []struct {
		name, caller string
		want         int64
	}{
		// Dapr's built-in 3 retries on service invocation (internal/mesh/dapr.go).
		{"dapr", dep("front", "", `dapr.io/enabled: "true", dapr.io/app-id: front, retrycap.dev/upstreams: back`), 4},
		// Kuma: no Mesh in the input, but analyze assumes the default mesh and its MeshRetry.
		{"kuma", dep("front", ", kuma.io/sidecar-injection: enabled", `retrycap.dev/upstreams: back`), 6},
		// Istio's object-selector webhook: Istio's default 2 retries.
		{"istio", dep("front", ", sidecar.istio.io/inject: \"true\"", `retrycap.dev/upstreams: back`), 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewManifests()
			m.MeshOptions.KumaDefaultMesh = true // as retrycap analyze sets it
			in := c.caller + dep("back", "", `dapr.io/enabled: "true", dapr.io/app-id: back`) + policy
			if errs := (Reader{}).Read(m, "in.yaml", strings.NewReader(in)); len(errs) != 0 {
				t.Fatal(errs)
			}
			rep := m.Analyze()
			if len(rep.Policies) != 1 || rep.Policies[0].Amplification != c.want || rep.Policies[0].WithinCap {
				t.Fatalf("%d policies, amplification %d, within cap %v; want 1, %d, false", len(rep.Policies), rep.Policies[0].Amplification, rep.Policies[0].WithinCap, c.want)
			}
		})
	}
}
