package labyaml

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// Every document the builders write decodes strictly into its type (a misspelt field would be
// dropped by kubectl apply's client, not refused), with the values it was given.
func TestDocumentsDecodeStrictly(t *testing.T) {
	docs := strings.Split(Join(
		AdmissionChain("shop", "Audit", true),
		Order("shop", "3"),
		App{Namespace: "shop", Name: "front", PartOf: "roll", Replicas: 2, Env: `[{name: LAB_FAIL, value: "1"}]`, Probe: true}.String(),
		Service("shop", "front"),
	), "---\n")
	if len(docs) != 7 {
		t.Fatalf("%d documents, want 7", len(docs))
	}
	var ns corev1.Namespace
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &ns); err != nil || ns.Name != "shop" || ns.Labels["retrycap.dev/injection"] != "enabled" {
		t.Fatalf("Namespace %+v: %v", ns.ObjectMeta, err)
	}
	var p v1alpha1.RetryPolicy
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &p); err != nil || p.Name != "checkout" || p.Spec.MaxAmplification != 4 ||
		p.Spec.Enforcement != "Audit" || p.Spec.Selector.MatchLabels["app.kubernetes.io/part-of"] != "shop" || p.Spec.Entrypoints[0].Service != "gateway" {
		t.Fatalf("RetryPolicy %+v: %v", p, err)
	}
	for i, want := range map[int]string{2: "order=3", 3: "", 4: "payment=3"} {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(docs[i]), &d); err != nil || d.Spec.Template.Annotations["retrycap.dev/upstreams"] != want ||
			d.Spec.Template.Spec.Containers[0].Image != Image {
			t.Fatalf("document %d, Deployment %s: upstreams %q image %q (%v), want %q", i, d.Name, d.Spec.Template.Annotations["retrycap.dev/upstreams"],
				d.Spec.Template.Spec.Containers[0].Image, err, want)
		}
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(docs[5]), &d); err != nil || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Env[0].Value != "1" ||
		d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path != "/_labapp/stats" {
		t.Fatalf("Deployment front %+v: %v", d.Spec, err)
	}
	var s corev1.Service
	if err := yaml.UnmarshalStrict([]byte(docs[6]), &s); err != nil || s.Spec.Selector["app.kubernetes.io/name"] != "front" || s.Spec.Ports[0].Port != 8080 {
		t.Fatalf("Service %+v: %v", s.Spec, err)
	}
}
