package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestGateHandlerPassesWhatCannotRaise: a DELETE, and a request for a subresource (a status
// write carrying a raised template, whose spec the API server discards; a Scale), are admitted
// without being judged and without reading the cache (the gate here has none: reading it would
// panic). The shipped configurations send none of them (the envtest suite shows the API server's
// side); a configuration whose rules were widened must not judge them as the workload.
func TestGateHandlerPassesWhatCannotRaise(t *testing.T) {
	deployment := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"order","namespace":"shop"},
		"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/upstreams":"payment=9"}}}}}`)
	stored := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"order","namespace":"shop"},
		"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/upstreams":"payment=1"}}}}}`)
	dep := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	tests := []struct {
		name string
		req  admissionv1.AdmissionRequest
		msg  string
	}{
		{"delete", admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Kind: dep, Namespace: "shop", Name: "order",
			OldObject: runtime.RawExtension{Raw: stored}}, ""},
		{"status", admissionv1.AdmissionRequest{Operation: admissionv1.Update, Kind: dep, SubResource: "status", Namespace: "shop", Name: "order",
			Object: runtime.RawExtension{Raw: deployment}, OldObject: runtime.RawExtension{Raw: stored}},
			"retrycap does not gate the status subresource: it cannot change a retrycap annotation"},
		{"scale", admissionv1.AdmissionRequest{Operation: admissionv1.Update, Kind: metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
			SubResource: "scale", Namespace: "shop", Name: "order",
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"order"},"spec":{"replicas":3}}`)}},
			"retrycap does not gate the scale subresource: it cannot change a retrycap annotation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := (&WorkloadGate{}).Handle(context.Background(), admission.Request{AdmissionRequest: tt.req})
			if !resp.Allowed || resp.Result.Message != tt.msg || len(resp.Patches) != 0 || len(resp.Warnings) != 0 {
				t.Fatalf("Handle = allowed %v, message %q, patches %v, warnings %q; want allowed, %q", resp.Allowed, resp.Result.Message, resp.Patches, resp.Warnings, tt.msg)
			}
		})
	}
}
