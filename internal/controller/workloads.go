package controller

import (
	"slices"

	"github.com/retrycap/retrycap/internal/workload"
)

// The controller reads workloads from the workload index (index.Index) that kubeobj.FeedIndex
// fills from the manager's informers, like the gate and the injector. Pods are watched as
// metadata only (a bare Pod's graph input is in its metadata but for its containers' AWS SDK env
// and mesh proxies, which kubeobj reads once per bare Pod), and Deployments,
// StatefulSets and DaemonSets are held in the cache as kubeobj.CachedWorkload (kubeobj.TrimForCache):
// kind, key, pod-template labels and the annotations retrycap reads.

// sameGraphInput reports whether two versions of a workload give the same graph: same
// existence as a workload, labels (selection, service name), the annotations the builder reads
// (retrycap's and the mesh switches: the index holds only those, kubeobj.KeepTemplateAnnotation),
// the AWS SDK environment and the mesh proxy containers. Replicas, images, resources and status
// never matter. An env change alone (AWS_MAX_ATTEMPTS lowered, the fix of an SDK edge) is a
// change: the status must follow it.
func sameGraphInput(a, b workload.Workload) bool {
	return a.Kind == b.Kind && a.Labels.Equal(b.Labels) && a.Annotations.Equal(b.Annotations) &&
		a.AWS.Equal(b.AWS) && slices.Equal(a.Proxies, b.Proxies)
}
