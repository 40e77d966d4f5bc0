package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/internal/mesh"
)

// TestKumaRuleAgreesWithMesh (kuma19): the injector's rule (kumaWillInject: must it keep its
// proxy off 15001 of a pod Kuma will inject?) and the mesh layers' (mesh.Set.InKuma: does the
// caller run Kuma's sidecar?) agree on every pod of a table: kuma.io/sidecar-injection as a
// label and as an annotation, on the Namespace and on the pod, each absent or one of Kuma's six
// values or a garbage one, in an ordinary namespace, kube-system and kuma-system. On main they
// disagreed on 4,704 of the 12,288 pods: InKuma read the annotations (Kuma does not since 2.2.0),
// so a Namespace enabled with a pod annotated disabled had no Kuma layer where kumaWillInject
// (and Kuma) injects, an annotation "enabled" alone had one where nothing injects, and a pod
// labelled "enabled" in a Namespace without the label had one where no Kuma webhook sees it;
// kube-system and kuma-system, which Kuma's webhooks exclude, were counted by both.
func TestKumaRuleAgreesWithMesh(t *testing.T) {
	values := []string{"", "enabled", "disabled", "true", "false", "yes", "no", "on"}
	namespaces := []string{"shop", "kube-system", mesh.KumaSystemNamespace}
	kv := func(v string) map[string]string {
		if v == "" {
			return map[string]string{}
		}
		return map[string]string{mesh.KumaSidecarInjection: v}
	}
	n, differ, in := 0, 0, 0
	for _, name := range namespaces {
		for _, nsL := range values {
			for _, nsA := range values {
				set := mesh.NewSet(mesh.Options{})
				nsObj := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: kv(nsL), Annotations: kv(nsA)}}
				if _, err := set.AddObject(nsObj); err != nil {
					t.Fatal(err)
				}
				for _, podL := range values {
					for _, podA := range values {
						pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "p", Labels: kv(podL), Annotations: kv(podA)}}
						c := mesh.Caller{Name: "Pod " + name + "/p", Namespace: name, Labels: pod.Labels, Annotations: pod.Annotations}
						inj, inK := kumaWillInject(pod, nsObj.Labels) != "", set.InKuma(c)
						n++
						if inK {
							in++
						}
						if inj != inK {
							differ++
							t.Errorf("namespace %s label %q annotation %q, pod label %q annotation %q: kumaWillInject %v, InKuma %v",
								name, nsL, nsA, podL, podA, inj, inK)
						}
					}
				}
			}
		}
	}
	// 8 x 8 pods of each Namespace in Kuma: shop's labels make 13 of the 64 label pairs inject
	// (TestKumaWillInjectAsKuma's table), whatever the 8 x 8 annotations; the others none.
	if n != 3*8*8*8*8 || in != 13*64 || differ != 0 {
		t.Fatalf("%d pods, %d in Kuma, %d differ; want %d, %d, 0", n, in, differ, 3*8*8*8*8, 13*64)
	}
}
