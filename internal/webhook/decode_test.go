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
	d, err := decodeWorkload(metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, dep)
	w, objAnn, ok := d.workload, d.own, d.ok
	if err != nil || !ok || w.Annotations.Get("retrycap.dev/upstreams") != "payment=1" ||
		!maps.Equal(objAnn, map[string]string{"retrycap.dev/upstreams": "payment=9"}) {
		t.Fatalf("decodeWorkload(Deployment) = %+v, %v, %v, %v", w, objAnn, ok, err)
	}
	pod := []byte(`{"metadata":{"name":"cart","namespace":"shop","annotations":{"retrycap.dev/upstreams":"payment=1"}}}`)
	d, err = decodeWorkload(metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, pod)
	w, objAnn, ok = d.workload, d.own, d.ok
	if err != nil || !ok || w.Annotations.Get("retrycap.dev/upstreams") != "payment=1" || objAnn != nil {
		t.Fatalf("decodeWorkload(Pod) = %+v, %v, %v, %v", w, objAnn, ok, err)
	}
}

// A CronJob's spec.jobTemplate.metadata annotations (the Jobs' own) come back for the gate's
// warning; they were dropped, so the gate said nothing of an annotation analyze warns of.
func TestDecodeWorkloadJobTemplateAnnotations(t *testing.T) {
	cj := []byte(`{"metadata":{"name":"nightly","namespace":"ops","annotations":{"retrycap.dev/inject":"true"}},"spec":{"schedule":"@daily",
		"jobTemplate":{"metadata":{"annotations":{"retrycap.dev/upstreams":"billing=9"}},"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/upstreams":"billing=1"}}}}}}}`)
	d, err := decodeWorkload(metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, cj)
	if err != nil || !d.ok || d.workload.Annotations.Get("retrycap.dev/upstreams") != "billing=1" ||
		!maps.Equal(d.own, map[string]string{"retrycap.dev/inject": "true"}) ||
		!maps.Equal(d.jobTemplate, map[string]string{"retrycap.dev/upstreams": "billing=9"}) {
		t.Fatalf("decodeWorkload(CronJob) = %+v, %v", d, err)
	}
	// A Job's spec has no jobTemplate: nothing there, whatever the object carries.
	job := []byte(`{"metadata":{"name":"once","namespace":"ops"},"spec":{"jobTemplate":{"metadata":{"annotations":{"retrycap.dev/upstreams":"x=1"}}},"template":{}}}`)
	d, err = decodeWorkload(metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, job)
	if err != nil || !d.ok || d.jobTemplate != nil {
		t.Fatalf("decodeWorkload(Job) = %+v, %v", d, err)
	}
}
