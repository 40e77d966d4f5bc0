package workload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestForPod(t *testing.T) {
	yes := true
	owned := func(kind, name string, hash string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", GenerateName: name + "-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: &yes}}}}
		if hash != "" {
			p.Labels = map[string]string{podTemplateHashLabel: hash}
		}
		return p
	}
	notController := owned("ReplicaSet", "gateway-7d9f8c", "7d9f8c")
	notController.Name = "loose"
	notController.OwnerReferences[0].Controller = nil
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"bare pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "probe"}}, "Pod shop/probe"},
		{"bare pod with generateName", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", GenerateName: "probe-"}}, "Pod shop/probe"},
		{"deployment pod", owned("ReplicaSet", "gateway-7d9f8c", "7d9f8c"), "Deployment shop/gateway"},
		{"replicaset without the hash label", owned("ReplicaSet", "gateway-7d9f8c", ""), "ReplicaSet shop/gateway-7d9f8c"},
		{"replicaset whose name does not end in the hash", owned("ReplicaSet", "gateway", "7d9f8c"), "ReplicaSet shop/gateway"},
		{"statefulset pod", owned("StatefulSet", "db", ""), "StatefulSet shop/db"},
		{"daemonset pod", owned("DaemonSet", "agent", ""), "DaemonSet shop/agent"},
		{"job pod", owned("Job", "migrate", ""), "Job shop/migrate"},
		{"owner that is not the controller", notController, "Pod shop/loose"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ForPod(tt.pod).String(); got != tt.want {
				t.Errorf("ForPod = %q, want %q", got, tt.want)
			}
		})
	}
}
