package inject

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

// Under Istio's sidecarInjectorWebhook.enableNamespacesByDefault (its auto webhook, in the
// MutatingWebhookConfiguration the mesh Set holds: internal/mesh/testdata/istio-injector, whose
// files name their sources), Istio injects every unlabelled pod of an unlabelled namespace:
// retrycap's injector skips such a pod, which would otherwise get both sidecars on the same
// ports. Before, the injector followed the chart's default selectors only and injected it.
func TestIstioAutoInjectWebhook(t *testing.T) {
	const want = "PortConflict: webhook auto.sidecar-injector.istio.io of MutatingWebhookConfiguration istio-sidecar-injector selects it " +
		"(namespaceSelector !istio-injection,!istio.io/rev,kubernetes.io/metadata.name notin (kube-node-lease,kube-public,kube-system,local-path-storage); " +
		"objectSelector !istio.io/rev,!sidecar.istio.io/inject): Istio's injector will add its sidecar istio-proxy, whose Envoy listens on 15001 and whose agent on 15020: " +
		"the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	for _, c := range []struct {
		name, config string
		podLabels    map[string]string
		want         string
	}{
		{"no configuration: the chart's defaults", "", nil, ""},
		{"Istio's defaults", "default", nil, ""},
		{"enableNamespacesByDefault", "auto", nil, want},
		{"enableNamespacesByDefault, pod label false", "auto", map[string]string{"sidecar.istio.io/inject": "false"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			if c.config != "" {
				data, err := os.ReadFile("../mesh/testdata/istio-injector/" + c.config + ".yaml")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := set.AddManifest(data); err != nil {
					t.Fatal(err)
				}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Labels: c.podLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"}, Mesh: set,
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			got := ""
			if !d.Injected {
				got = d.Skip.String()
			}
			if got != c.want {
				t.Fatalf("skip %q\nwant %q", got, c.want)
			}
		})
	}
}
