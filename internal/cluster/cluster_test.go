package cluster

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/retrycap/retrycap/internal/workload"
)

func TestWorkloadOf(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "order"}
	owned := meta
	yes := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "order-abc", UID: "1", Controller: &yes}}
	tests := []struct {
		name     string
		obj      any
		wantKind string // "" for not a workload
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: meta}, workload.KindDeployment},
		{"statefulset", &appsv1.StatefulSet{ObjectMeta: meta}, workload.KindStatefulSet},
		{"daemonset", &appsv1.DaemonSet{ObjectMeta: meta}, workload.KindDaemonSet},
		{"bare pod", &corev1.Pod{ObjectMeta: meta}, workload.KindPod},
		{"bare pod as metadata", &metav1.PartialObjectMetadata{ObjectMeta: meta}, workload.KindPod},
		{"owned pod as metadata", &metav1.PartialObjectMetadata{ObjectMeta: owned}, ""},
		{"owned pod", &corev1.Pod{ObjectMeta: owned}, ""},
		{"tombstone", toolscache.DeletedFinalStateUnknown{Key: "shop/order", Obj: &appsv1.Deployment{ObjectMeta: meta}}, workload.KindDeployment},
		{"other kind", &corev1.Service{ObjectMeta: meta}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ok := WorkloadOf(tt.obj)
			if ok != (tt.wantKind != "") || (ok && (w.Kind != tt.wantKind || w.Namespace != "shop" || w.Name != "order")) {
				t.Fatalf("WorkloadOf = %+v, %v; want kind %q", w, ok, tt.wantKind)
			}
		})
	}
}
