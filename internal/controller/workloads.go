package controller

import (
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// The controller reads workloads from the workload index (index.Index) that kubeobj.FeedIndex
// fills from the manager's informers, like the gate and the injector. Pods are watched as
// metadata only (a bare Pod's graph input is all in its metadata), and Deployments,
// StatefulSets and DaemonSets are held in the cache as kubeobj.CachedWorkload (kubeobj.TrimForCache):
// kind, key, pod-template labels and the annotations retrycap reads.

// sameGraphInput reports whether two versions of a workload give the same graph: same
// existence as a workload, labels (selection, service name) and the annotations the builder
// reads. Replicas, images, resources and status never matter.
func sameGraphInput(a, b workload.Workload) bool {
	return a.Kind == b.Kind && a.Labels.Equal(b.Labels) &&
		a.Annotations.Get(annotations.Service) == b.Annotations.Get(annotations.Service) &&
		a.Annotations.Get(annotations.Upstreams) == b.Annotations.Get(annotations.Upstreams)
}
