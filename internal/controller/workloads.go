package controller

import (
	"maps"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// The controller reads workloads through internal/cluster (cluster.ListWorkloads,
// cluster.WorkloadOf), like the gate and the injector. Pods are watched and listed as metadata
// only: a bare Pod's graph input (labels, annotations, controller ownerReference) is all in its
// metadata, and pod specs and statuses are by far the largest objects a controller could cache.

// sameGraphInput reports whether two versions of a workload give the same graph: same
// existence as a workload, labels (selection, service name) and the annotations the builder
// reads. Replicas, images, resources and status never matter.
func sameGraphInput(a, b workload.Workload) bool {
	return a.Kind == b.Kind && maps.Equal(a.Labels, b.Labels) &&
		a.Annotations[annotations.Service] == b.Annotations[annotations.Service] &&
		a.Annotations[annotations.Upstreams] == b.Annotations[annotations.Upstreams]
}
