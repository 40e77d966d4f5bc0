package kubeobj

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/internal/workload"
)

// Services are watched as typed corev1.Services cut down by ServiceTransform (part of TrimForCache, so of CacheOptions): the graph reads a
// Service's name, spec.selector and spec.type (PartialObjectMetadata would not carry the
// selector), and a cluster's Services are many, with ports, IPs and status the graph never reads.

// ServiceObject is the object to watch and cache Services with.
func ServiceObject() client.Object { return &corev1.Service{} }

// MeshAnnotationPrefix is the prefix of the annotations a Service keeps in the cache: Linkerd's
// retry annotations (retry.linkerd.io/http, /limit, /timeout, ...), which the mesh layer reads
// from Services.
const MeshAnnotationPrefix = "retry.linkerd.io/"

// ServiceTransform is the cache transform for Services (TrimForCache applies it): it keeps
// metadata name, namespace, labels, uid, resourceVersion and the annotations whose key starts
// with MeshAnnotationPrefix, spec.selector and spec.type, and drops the rest (ports, cluster
// IPs, other annotations, managed fields, status). Anything but a Service passes unchanged.
func ServiceTransform(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Annotations: meshAnnotations(s.Annotations),
			UID: s.UID, ResourceVersion: s.ResourceVersion, Generation: s.Generation, DeletionTimestamp: s.DeletionTimestamp,
		},
		Spec: corev1.ServiceSpec{Selector: s.Spec.Selector, Type: s.Spec.Type},
	}, nil
}

// meshAnnotations is the part of ann whose keys start with MeshAnnotationPrefix; nil if none.
func meshAnnotations(ann map[string]string) map[string]string {
	var out map[string]string
	for k, v := range ann {
		if strings.HasPrefix(k, MeshAnnotationPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// FromService reads a Service as the builder's workload.Service.
func FromService(s *corev1.Service) workload.Service {
	return workload.Service{
		Namespace: s.Namespace, Name: s.Name,
		Selector:     maps.Clone(s.Spec.Selector),
		ExternalName: s.Spec.Type == corev1.ServiceTypeExternalName,
	}
}

// ServiceOf reads a watched object as a workload.Service; false for anything but a Service. An
// informer's tombstone (DeletedFinalStateUnknown) is unwrapped.
func ServiceOf(obj any) (workload.Service, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*corev1.Service)
	if !ok {
		return workload.Service{}, false
	}
	return FromService(s), true
}

// ListServices lists the Services of namespace ns (every namespace when ns is "") as the
// builder's workload.Services. r is the manager's cache or a direct client in the CLI.
func ListServices(ctx context.Context, r client.Reader, ns string) ([]workload.Service, error) {
	var list corev1.ServiceList
	if err := r.List(ctx, &list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Services in namespace %q: %w", ns, err)
	}
	out := make([]workload.Service, len(list.Items))
	for i := range list.Items {
		out[i] = FromService(&list.Items[i])
	}
	return out, nil
}
