package kubeobj

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/internal/workload"
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

// TrimForCache is the manager's cache transform. A templated workload (workload.Kinds: a
// Deployment, StatefulSet, DaemonSet, CronJob, or a Job or ReplicaSet no controller owns) is
// replaced by a CachedWorkload: its kind, namespace and name, its pod
// template's labels (keys and values interned) and the template annotations retrycap reads
// (KeepTemplateAnnotation); no spec, no status, no metadata of its own: >98% of a realistic
// workload's bytes, and a struct of 96 bytes instead of a typed Deployment's 1,232. A Service
// keeps its identity, labels, retry.linkerd.io/ annotations, selector and type
// (ServiceTransform). A Pod's metadata (PodMetadata) keeps, when a controller owns the Pod, its
// identity and owner references alone: WorkloadOf reads such a Pod as no workload, and in a real
// cluster Pods outnumber workloads (replicas) with labels and annotations of their own. Any
// other object (a bare Pod's metadata, Namespaces, RetryPolicies) keeps its content without
// managedFields and last-applied-configuration. A cached workload is therefore not an object
// of the API. A Job or ReplicaSet a controller owns (a CronJob's Job, a Deployment's
// ReplicaSet: workload.Covered) is replaced by an OwnedObject, its key alone (a CronJob's Job
// also keeps the CronJob's name, which the injector reads through the index): clusters hold ten
// ReplicaSets per Deployment (revisionHistoryLimit) and a Job per CronJob run, none of them a
// workload of its own. Whether a controller owns it is decided here, once: ownerReferences
// are not kept. A cached workload is therefore not an object of the API: retrycap reads
// workloads only through the workload index (WorkloadOf), never writes one back from its cache.
func TrimForCache(in any) (any, error) {
	if obj, ok := in.(runtime.Object); ok {
		if kind, meta, tmpl, ok := workload.TemplateOf(obj); ok {
			if workload.Covered(kind, meta) {
				return &OwnedObject{Kind: kind, Namespace: intern(meta.Namespace), Name: meta.Name, CronJob: cronJobOf(kind, meta)}, nil
			}
			return cachedWorkload(kind, *meta, tmpl), nil
		}
	}
	switch o := in.(type) {
	case *CachedWorkload, *OwnedObject:
		return o, nil
	case *corev1.Service:
		return ServiceTransform(o)
	case *metav1.PartialObjectMetadata:
		if metav1.GetControllerOf(o) != nil {
			o.ObjectMeta = metav1.ObjectMeta{Namespace: intern(o.Namespace), Name: o.Name, UID: o.UID,
				ResourceVersion: o.ResourceVersion, OwnerReferences: o.OwnerReferences}
			return o, nil
		}
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

// cronJobOf is the name of the CronJob that controls a Job, "" for any other object. A Job's
// name starts with its CronJob's (getJobName: "<cronjob>-<scheduled minute>"), so the name is
// taken from the Job's own string where it can be: no second copy per run.
func cronJobOf(kind string, meta *metav1.ObjectMeta) string {
	c := metav1.GetControllerOf(meta)
	if kind != workload.KindJob || c == nil || c.Kind != workload.KindCronJob || !strings.HasPrefix(c.APIVersion, "batch/") {
		return ""
	}
	if strings.HasPrefix(meta.Name, c.Name) {
		return meta.Name[:len(c.Name)]
	}
	return c.Name
}
