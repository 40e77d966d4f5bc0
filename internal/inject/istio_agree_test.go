package inject

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/internal/mesh"
)

// TestIstioRuleAgreesWithMesh: the injector's rule (istioWillInject: must it keep its proxy
// off a pod Istio will inject?) and the mesh layers' (mesh.Set.InIstio: does the caller run
// Istio's sidecar?) agree on every pod of a table of namespaces and pod labels and annotations.
// On main they disagreed on 11 of its 108 pods (InIstio true, istioWillInject false): the
// annotation sidecar.istio.io/inject "true" alone in a plain namespace (no webhook selects the
// pod), and the 10 pods of kube-system (labelled istio-injection=enabled) the rule injects
// elsewhere (Istio ignores the namespace).
func TestIstioRuleAgreesWithMesh(t *testing.T) {
	namespaces := []struct {
		name   string
		labels map[string]string
	}{
		{"plain", nil},
		{"inj", map[string]string{"istio-injection": "enabled"}},
		{"disabled", map[string]string{"istio-injection": "disabled"}},
		{"rev", map[string]string{"istio.io/rev": "canary"}},
		{"both", map[string]string{"istio-injection": "disabled", "istio.io/rev": "canary"}},
		{"kube-system", map[string]string{"istio-injection": "enabled"}},
	}
	// Values of sidecar.istio.io/inject ("" is absent) and of the pod label istio.io/rev.
	injects := []string{"", "true", "false"}
	revs := []string{"", "canary"}
	set := mesh.NewSet(mesh.Options{})
	for _, ns := range namespaces {
		if _, err := set.AddObject(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: ns.labels}}); err != nil {
			t.Fatal(err)
		}
	}
	n, in := 0, 0
	for _, ns := range namespaces {
		for _, label := range injects {
			for _, ann := range injects {
				for _, rev := range revs {
					for _, injected := range []bool{false, true} {
						labels, anns := map[string]string{}, map[string]string{}
						if label != "" {
							labels[mesh.IstioInjectAnnotation] = label
						}
						if ann != "" {
							anns[mesh.IstioInjectAnnotation] = ann
						}
						if rev != "" {
							labels[mesh.IstioRevLabel] = rev
						}
						pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Labels: labels, Annotations: anns}}
						c := mesh.Caller{Name: "Pod " + ns.name + "/p", Namespace: ns.name, Labels: labels, Annotations: anns}
						if injected {
							// Already injected by Istio: meshed whatever the rule says, and Istio
							// will not inject it again; only the other 243 are compared.
							c.Annotations = map[string]string{mesh.IstioSidecarStatus: "{}"}
							if !set.InIstio(c) {
								t.Errorf("%s with %s: not in Istio", c.Name, mesh.IstioSidecarStatus)
							}
							continue
						}
						n++
						will := istioWillInject(nil, pod, ns.labels) != ""
						if will {
							in++
						}
						if got := set.InIstio(c); got != will {
							t.Errorf("namespace %s %v, pod labels %v annotations %v: InIstio %v, istioWillInject %v",
								ns.name, ns.labels, labels, anns, got, will)
						}
					}
				}
			}
		}
	}
	// By hand, of each namespace's 18: inj and rev 10 (label "true": 6; no label: 4, less the
	// annotation "false"), plain 8 (label "true": 3 without istio.io/rev, 3 with; rev and no
	// label: 2), disabled, both and kube-system none.
	if got := fmt.Sprintf("%d pods, %d injected", n, in); got != "108 pods, 28 injected" {
		t.Errorf("table: %s, want 108 pods, 28 injected", got)
	}
}
