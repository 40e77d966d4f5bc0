package workload

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestEmptyServiceAnnotation: retrycap.dev/service: "" (a chart's template that rendered no
// value) is an error naming the workload and the annotation, for the gate and analyze
// (AnnotationErrors) and for the controller's graph (Build: the workload is left out and its
// error reported). Before, it was read as absent: the service was named "gw-7f9c" after the
// workload, and the callers' edges to "gateway" missed it, in silence.
func TestEmptyServiceAnnotation(t *testing.T) {
	const want = `Deployment shop/gw-7f9c: annotation retrycap.dev/service: service name is empty (a template that rendered no value?): write the name, or remove the annotation to name the service by label app.kubernetes.io/name, else the workload's name`
	w := Workload{Kind: "Deployment", Namespace: "shop", Name: "gw-7f9c",
		Annotations: PairsFrom("retrycap.dev/service", "", "retrycap.dev/upstreams", "order=3")}
	errs := AnnotationErrors(w)
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("AnnotationErrors = %v\nwant [%s]", errs, want)
	}
	p := ForRetryPolicy(&v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}})
	r := Build(p, []Workload{w}, nil)
	if len(r.Errors) != 1 || r.Errors[0].Error() != want {
		t.Errorf("Build errors = %v\nwant [%s]", r.Errors, want)
	}
	if len(r.Graph.Edges()) != 0 {
		t.Errorf("Build kept the workload's edges under the workload's name: %v", r.Graph.Edges())
	}
	// Absent, it is not an error: the label, else the name, names the service.
	w.Annotations = PairsFrom("retrycap.dev/upstreams", "order=3")
	if errs := AnnotationErrors(w); len(errs) != 0 {
		t.Errorf("without the annotation: %v", errs)
	}
}
