package controller

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// podMetadataList returns an empty list of Pods as metadata only. A bare Pod's graph input
// (labels, annotations, controller ownerReference) is all in its metadata, so the controller
// watches and lists Pods as metadata: the cache then holds no pod specs or statuses, which on a
// busy cluster are by far the largest objects a controller could cache.
func podMetadataList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	return l
}

// ListWorkloads lists the Deployments, StatefulSets, DaemonSets and bare Pods of namespace ns
// (every namespace when ns is "") as the shared builder's workloads. r is the manager's cache in
// the controller (read without deep copies: nothing here is modified) or a direct client in the
// CLI.
func ListWorkloads(ctx context.Context, r client.Reader, ns string) ([]workload.Workload, error) {
	opts := []client.ListOption{client.InNamespace(ns), client.UnsafeDisableDeepCopy}
	var out []workload.Workload
	var deps appsv1.DeploymentList
	if err := r.List(ctx, &deps, opts...); err != nil {
		return nil, fmt.Errorf("listing Deployments in namespace %q: %w", ns, err)
	}
	var sts appsv1.StatefulSetList
	if err := r.List(ctx, &sts, opts...); err != nil {
		return nil, fmt.Errorf("listing StatefulSets in namespace %q: %w", ns, err)
	}
	var dss appsv1.DaemonSetList
	if err := r.List(ctx, &dss, opts...); err != nil {
		return nil, fmt.Errorf("listing DaemonSets in namespace %q: %w", ns, err)
	}
	pods := podMetadataList()
	if err := r.List(ctx, pods, opts...); err != nil {
		return nil, fmt.Errorf("listing Pods in namespace %q: %w", ns, err)
	}
	out = make([]workload.Workload, 0, len(deps.Items)+len(sts.Items)+len(dss.Items)+len(pods.Items))
	for i := range deps.Items {
		w, _ := workload.FromObject(&deps.Items[i])
		out = append(out, w)
	}
	for i := range sts.Items {
		w, _ := workload.FromObject(&sts.Items[i])
		out = append(out, w)
	}
	for i := range dss.Items {
		w, _ := workload.FromObject(&dss.Items[i])
		out = append(out, w)
	}
	for i := range pods.Items {
		if w, ok := workloadOf(&pods.Items[i]); ok {
			out = append(out, w)
		}
	}
	return out, nil
}

// workloadOf reads a watched object as a workload: Deployments, StatefulSets, DaemonSets, and
// Pods (full or metadata-only) without a controller ownerReference.
func workloadOf(obj client.Object) (workload.Workload, bool) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return workload.FromObject(&corev1.Pod{ObjectMeta: m.ObjectMeta})
	}
	return workload.FromObject(obj)
}

// sameGraphInput reports whether two versions of a workload give the same graph: same
// existence as a workload, labels (selection, service name) and the annotations the builder
// reads. Replicas, images, resources and status never matter.
func sameGraphInput(a, b workload.Workload) bool {
	return a.Kind == b.Kind && maps.Equal(a.Labels, b.Labels) &&
		a.Annotations[annotations.Service] == b.Annotations[annotations.Service] &&
		a.Annotations[annotations.Upstreams] == b.Annotations[annotations.Upstreams]
}
