package webhook

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A templated workload's own annotations come back beside its workload (the pod template's), so
// the gate can warn of retrycap annotations put in the wrong place; a Pod has none.
func TestDecodeWorkloadObjectAnnotations(t *testing.T) {
	dep := []byte(`{"metadata":{"name":"order","namespace":"shop","annotations":{"retrycap.dev/upstreams":"payment=9"}},
		"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/upstreams":"payment=1"}}}}}`)
	w, objAnn, ok, err := decodeWorkload(metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, dep)
	if err != nil || !ok || w.Annotations.Get("retrycap.dev/upstreams") != "payment=1" ||
		!maps.Equal(objAnn, map[string]string{"retrycap.dev/upstreams": "payment=9"}) {
		t.Fatalf("decodeWorkload(Deployment) = %+v, %v, %v, %v", w, objAnn, ok, err)
	}
	pod := []byte(`{"metadata":{"name":"cart","namespace":"shop","annotations":{"retrycap.dev/upstreams":"payment=1"}}}`)
	w, objAnn, ok, err = decodeWorkload(metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, pod)
	if err != nil || !ok || w.Annotations.Get("retrycap.dev/upstreams") != "payment=1" || objAnn != nil {
		t.Fatalf("decodeWorkload(Pod) = %+v, %v, %v, %v", w, objAnn, ok, err)
	}
}
