package kubeobj

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/retrycap/retrycap/internal/workload"
)

func TestServiceTransformKeepsWhatTheGraphReads(t *testing.T) {
	full := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "bookinfo", Name: "reviews", UID: "u1", ResourceVersion: "42",
			Labels: map[string]string{"app": "reviews"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}",
				"retry.linkerd.io/http": "5xx", "retry.linkerd.io/limit": "2", "linkerd.io/inject": "enabled"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "reviews"}, Type: corev1.ServiceTypeClusterIP,
			Ports:     []corev1.ServicePort{{Name: "http", Port: 9080}},
			ClusterIP: "10.0.0.7", ClusterIPs: []string{"10.0.0.7"},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	got, err := ServiceTransform(full)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: "reviews", UID: "u1", ResourceVersion: "42",
			Labels:      map[string]string{"app": "reviews"},
			Annotations: map[string]string{"retry.linkerd.io/http": "5xx", "retry.linkerd.io/limit": "2"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "reviews"}, Type: corev1.ServiceTypeClusterIP},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("transformed:\n %#v\nwant\n %#v", got, want)
	}
	// The manager's one cache transform cuts Services down the same way, tombstones too.
	if got, _ := TrimForCache(full); !reflect.DeepEqual(got, want) {
		t.Fatalf("TrimForCache:\n %#v\nwant\n %#v", got, want)
	}
	if got, _ := TrimForCache(toolscache.DeletedFinalStateUnknown{Key: "bookinfo/reviews", Obj: full}); !reflect.DeepEqual(got.(toolscache.DeletedFinalStateUnknown).Obj, want) {
		t.Fatalf("TrimForCache of a tombstone: %#v", got)
	}
	pod := &corev1.Pod{}
	if same, _ := ServiceTransform(pod); same != pod {
		t.Fatalf("a Pod was transformed")
	}
}

func TestServiceOf(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "emojivoto", Name: "emoji-svc"}
	tests := []struct {
		name string
		obj  any
		want workload.Service
		ok   bool
	}{
		{"selector", &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "emoji-svc"}}},
			workload.Service{Namespace: "emojivoto", Name: "emoji-svc", Selector: map[string]string{"app": "emoji-svc"}}, true},
		{"no selector", &corev1.Service{ObjectMeta: meta}, workload.Service{Namespace: "emojivoto", Name: "emoji-svc"}, true},
		{"ExternalName", &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "emoji.example.com"}},
			workload.Service{Namespace: "emojivoto", Name: "emoji-svc", ExternalName: true}, true},
		{"tombstone", toolscache.DeletedFinalStateUnknown{Obj: &corev1.Service{ObjectMeta: meta}}, workload.Service{Namespace: "emojivoto", Name: "emoji-svc"}, true},
		{"not a Service", &corev1.Pod{ObjectMeta: meta}, workload.Service{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ServiceOf(tt.obj)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ServiceOf = %+v %v, want %+v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
