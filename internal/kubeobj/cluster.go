package kubeobj

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/internal/workload"
)

// PodMetadata is an empty Pod as metadata only: the object to watch Pods with
// (builder.OnlyMetadata, cache.GetInformer), so that the cache holds no pod specs or statuses.
func PodMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
}

// PodMetadataList is an empty list of Pods as metadata only, to list them from that cache.
func PodMetadataList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	return l
}

// WatchedKinds are the objects workloads come from, as informers are asked for them: every
// templated kind of workload.Kinds (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs,
// CronJobs: which TrimForCache stores as CachedWorkload, or as an OwnedObject when a controller
// owns a ReplicaSet or Job), Pods as metadata.
func WatchedKinds() []client.Object {
	var out []client.Object
	for _, k := range workload.Kinds {
		if k.TemplatePath != nil {
			out = append(out, k.New().(client.Object))
		}
	}
	return append(out, PodMetadata())
}

// WorkloadOf reads a watched object as a workload: a templated kind of workload.Kinds (as the
// cache holds it, CachedWorkload, or whole), or a Pod (whole or metadata-only) without a
// controller ownerReference; false for anything else (an OwnedObject, a Pod, Job or ReplicaSet a
// controller owns: its workload is the controller's). An informer's tombstone
// (DeletedFinalStateUnknown) is unwrapped.
func WorkloadOf(obj any) (workload.Workload, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *CachedWorkload:
		return o.Workload(), true
	case *OwnedObject:
		return workload.Workload{}, false
	case *metav1.PartialObjectMetadata:
		return workload.FromObject(&corev1.Pod{ObjectMeta: o.ObjectMeta})
	case runtime.Object:
		return workload.FromObject(o)
	}
	return workload.Workload{}, false
}

// ListWorkloads lists the workloads of namespace ns (every namespace when ns is "") as the
// shared builder's workloads: each templated kind of workload.Kinds in the table's order, then
// the bare Pods. r is the manager's cache (read without deep copies: nothing here is modified,
// and a copy of thousands of Deployments per call would dominate the cost) or a direct client in
// the CLI.
func ListWorkloads(ctx context.Context, r client.Reader, ns string) ([]workload.Workload, error) {
	opts := []client.ListOption{client.InNamespace(ns), client.UnsafeDisableDeepCopy}
	var out []workload.Workload
	for _, k := range workload.Kinds {
		if k.TemplatePath == nil {
			continue
		}
		list := k.NewList().(client.ObjectList)
		if err := r.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %ss in namespace %q: %w", k.Kind, ns, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("reading the %s list: %w", k.Kind, err)
		}
		for _, it := range items {
			if w, ok := workload.FromObject(it); ok {
				out = append(out, w)
			}
		}
	}
	pods := PodMetadataList()
	if err := r.List(ctx, pods, opts...); err != nil {
		return nil, fmt.Errorf("listing Pods in namespace %q: %w", ns, err)
	}
	for i := range pods.Items {
		if w, ok := WorkloadOf(&pods.Items[i]); ok {
			out = append(out, w)
		}
	}
	return out, nil
}

// CachedWorkloads are the workloads of namespace ns as the informers of c (a cache built with
// CacheOptions) hold them: what feeds the workload index. ListWorkloads cannot read such a cache:
// a Deployment, StatefulSet or DaemonSet is held as a CachedWorkload, which a typed List or Get
// refuses ("cache had type *kubeobj.CachedWorkload"). Tests wait on it for the cache to have
// caught up; nothing in the manager reads workloads but through the index.
func CachedWorkloads(ctx context.Context, c cache.Cache, ns string) ([]workload.Workload, error) {
	var out []workload.Workload
	for _, obj := range WatchedKinds() {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		s, ok := inf.(interface{ GetStore() toolscache.Store })
		if !ok {
			return nil, fmt.Errorf("the informer for %T (%T) has no store to read", obj, inf)
		}
		for _, o := range s.GetStore().List() {
			if w, ok := WorkloadOf(o); ok && w.Namespace == ns {
				out = append(out, w)
			}
		}
	}
	return out, nil
}
