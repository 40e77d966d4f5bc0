package workload

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podTemplateHashLabel is the label a Deployment's ReplicaSet adds to its pods; the ReplicaSet is
// named "<deployment>-<hash>".
const podTemplateHashLabel = "pod-template-hash"

// ForPod is the workload a pod belongs to, named as the graph names it, without an API call (so
// admission can use it for a pod that is not stored yet): a pod whose controller is a ReplicaSet
// named "<name>-<pod-template-hash>" belongs to Deployment <name>; one a StatefulSet or DaemonSet
// controls belongs to it; any other controller (a Job, a bare ReplicaSet) names the workload
// itself, with its own kind; a bare Pod is the Pod, named by its name or, before the API server
// has generated one, its generateName without the trailing "-". Labels and annotations are the
// pod's own.
func ForPod(pod *corev1.Pod) Workload {
	w := Workload{Kind: KindPod, Namespace: pod.Namespace, Name: pod.Name, Labels: PairsOf(pod.Labels), Annotations: PairsOf(pod.Annotations)}
	if w.Name == "" {
		w.Name = strings.TrimSuffix(pod.GenerateName, "-")
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return w
	}
	w.Kind, w.Name = owner.Kind, owner.Name
	if owner.Kind == "ReplicaSet" {
		if hash := pod.Labels[podTemplateHashLabel]; hash != "" && strings.HasSuffix(owner.Name, "-"+hash) {
			w.Kind, w.Name = KindDeployment, strings.TrimSuffix(owner.Name, "-"+hash)
		}
	}
	return w
}
