package cluster

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LastAppliedAnnotation is kubectl's copy of the whole object as last applied: on a workload as
// large as its spec, and read by nothing in retrycap.
const LastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// CacheOptions are the manager's cache options: every object is trimmed before it is stored
// (TrimForCache), so the controller, the gate and the injector read the same small objects and
// the manager's memory follows the number of workloads, not the size of their specs. Pods are
// watched as metadata only (PodMetadata) and so are trimmed by the default transform, and
// Services are cut down to what the graph and the mesh layer read (ServiceTransform).
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: TrimForCache}
}

// TrimForCache is the manager's cache transform. A Deployment, StatefulSet or DaemonSet is
// replaced by a copy holding only its identity (name, namespace, uid, resourceVersion,
// generation, timestamps) and its pod template's labels and annotations (what
// workload.FromObject reads): no spec, no status, no labels or annotations of its own, no
// managedFields, no last-applied-configuration: >95% of a realistic workload's bytes. A Service
// keeps its identity, labels, retry.linkerd.io/ annotations, selector and type
// (ServiceTransform). Any other object
// (Pod metadata, Namespaces, RetryPolicies) keeps its content without managedFields and
// last-applied-configuration. A cached workload is therefore not a complete object: retrycap
// only reads workloads, and must never write one back from its cache.
func TrimForCache(in any) (any, error) {
	switch o := in.(type) {
	case *appsv1.Deployment:
		out := &appsv1.Deployment{TypeMeta: o.TypeMeta, ObjectMeta: identity(o.ObjectMeta)}
		out.Spec.Template.ObjectMeta = templateMeta(o.Spec.Template.ObjectMeta)
		return out, nil
	case *appsv1.StatefulSet:
		out := &appsv1.StatefulSet{TypeMeta: o.TypeMeta, ObjectMeta: identity(o.ObjectMeta)}
		out.Spec.Template.ObjectMeta = templateMeta(o.Spec.Template.ObjectMeta)
		return out, nil
	case *appsv1.DaemonSet:
		out := &appsv1.DaemonSet{TypeMeta: o.TypeMeta, ObjectMeta: identity(o.ObjectMeta)}
		out.Spec.Template.ObjectMeta = templateMeta(o.Spec.Template.ObjectMeta)
		return out, nil
	case *corev1.Service:
		return ServiceTransform(o)
	case *metav1.PartialObjectMetadata:
		o.ObjectMeta = trimMeta(o.ObjectMeta)
		return o, nil
	case toolscache.DeletedFinalStateUnknown:
		obj, err := TrimForCache(o.Obj)
		if err != nil {
			return nil, err
		}
		o.Obj = obj
		return o, nil
	case client.Object:
		o.SetManagedFields(nil)
		if ann := o.GetAnnotations(); ann != nil {
			if _, ok := ann[LastAppliedAnnotation]; ok {
				o.SetAnnotations(withoutLastApplied(ann))
			}
		}
		return o, nil
	}
	return in, nil
}

// trimMeta is m without managedFields and last-applied-configuration.
func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = nil
	if _, ok := m.Annotations[LastAppliedAnnotation]; ok {
		m.Annotations = withoutLastApplied(m.Annotations)
	}
	return m
}

// identity is what the cache needs of a workload's own metadata: its key, version and life.
func identity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// templateMeta is what the graph reads of a pod template: its labels and annotations.
func templateMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Labels: m.Labels, Annotations: m.Annotations}
}

func withoutLastApplied(ann map[string]string) map[string]string {
	out := make(map[string]string, len(ann)-1)
	for k, v := range ann {
		if k != LastAppliedAnnotation {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
