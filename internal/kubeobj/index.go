package kubeobj

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/workload"
)

// FeedIndex feeds the workload index (index.Index: the gate, the injector and the controller read
// it) from the manager's informers (created here if no one else uses them yet; they start with
// the cache): the workloads (WatchedKinds, Pods as metadata; of the Jobs a CronJob controls,
// which CronJob: Index.SetJobCronJob), the Services (cut down by
// ServiceTransform: a change relinks the workloads it fronts, makes the namespace's prepared
// graphs stale and is told to the index's subscribers, like a workload change) and the
// RetryPolicies, whose changes make their prepared graphs stale; the Namespaces as metadata
// (NamespaceMetadata: their labels, which ClusterRetryPolicies select by; a relabel is told to
// the index's subscribers) and the ClusterRetryPolicies, whose changes make their prepared state
// stale like RetryPolicies'. Updates that do not touch a
// workload's labels or annotations, or a Service's selector or type, leave the index alone
// (Index.Put and PutService say so). pods, when given, reads whole Pods (the manager's API
// reader): a bare Pod's containers are read from it once (barepods.go); without it a bare Pod is
// what its metadata says (no AWS SDK environment, no proxy containers).
func FeedIndex(ctx context.Context, c cache.Cache, x *index.Index, pods ...client.Reader) error {
	var bare *bareSpecs
	if len(pods) > 0 && pods[0] != nil {
		bare = newBareSpecs(ctx, pods[0], x)
	}
	// workloadOf is WorkloadOf, a bare Pod's spec input read by bare (barepods.go).
	workloadOf := func(obj any) (workload.Workload, bool) {
		w, ok := WorkloadOf(obj)
		if m, isPod := podMeta(obj); ok && isPod {
			w = bare.complete(m, w)
		}
		return w, ok
	}
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if w, ok := workloadOf(obj); ok {
				x.Put(w)
			}
			setJobCronJob(x, nil, obj)
		},
		UpdateFunc: func(oldObj, newObj any) {
			setJobCronJob(x, oldObj, newObj)
			if w, ok := workloadOf(newObj); ok {
				x.Put(w)
				return
			}
			// A Pod that gained a controller is no longer a bare workload.
			if w, ok := WorkloadOf(oldObj); ok {
				x.Remove(w)
				bare.forget(oldObj)
			}
		},
		DeleteFunc: func(obj any) {
			if w, ok := WorkloadOf(obj); ok {
				x.Remove(w)
				bare.forget(obj)
			}
			setJobCronJob(x, obj, nil)
		},
	}
	for _, obj := range WatchedKinds() {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("adding the workload index handler to the %T informer: %w", obj, err)
		}
		x.AddSynced(reg.HasSynced)
	}
	sinf, err := c.GetInformer(ctx, ServiceObject())
	if err != nil {
		return fmt.Errorf("getting the Service informer: %w", err)
	}
	sreg, err := sinf.AddEventHandler(serviceHandler(x))
	if err != nil {
		return fmt.Errorf("adding the workload index handler to the Service informer: %w", err)
	}
	x.AddSynced(sreg.HasSynced)
	// Created now also so that the first request does not start (and wait for) it.
	pinf, err := c.GetInformer(ctx, &v1alpha1.RetryPolicy{})
	if err != nil {
		return fmt.Errorf("getting the RetryPolicy informer: %w", err)
	}
	x.AddSynced(pinf.HasSynced)
	if _, err := pinf.AddEventHandler(policyHandler(x)); err != nil {
		return fmt.Errorf("adding the gate's RetryPolicy handler: %w", err)
	}
	ninf, err := c.GetInformer(ctx, NamespaceMetadata())
	if err != nil {
		return fmt.Errorf("getting the Namespace informer: %w", err)
	}
	nreg, err := ninf.AddEventHandler(namespaceHandler(x))
	if err != nil {
		return fmt.Errorf("adding the workload index handler to the Namespace informer: %w", err)
	}
	x.AddSynced(nreg.HasSynced)
	cinf, err := c.GetInformer(ctx, &v1alpha1.ClusterRetryPolicy{})
	if err != nil {
		return fmt.Errorf("getting the ClusterRetryPolicy informer: %w", err)
	}
	x.AddSynced(cinf.HasSynced)
	if _, err := cinf.AddEventHandler(clusterPolicyHandler(x)); err != nil {
		return fmt.Errorf("adding the gate's ClusterRetryPolicy handler: %w", err)
	}
	return nil
}

// NamespaceMetadata is an empty Namespace as metadata only: the index needs its labels alone.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
}

// namespaceOf reads a watched Namespace (metadata or whole, or a tombstone of either): its name
// and labels.
func namespaceOf(obj any) (string, map[string]string, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		return o.Name, o.Labels, true
	case *corev1.Namespace:
		return o.Name, o.Labels, true
	}
	return "", nil, false
}

// namespaceHandler feeds Index.PutNamespace and RemoveNamespace from the Namespace informer.
func namespaceHandler(x *index.Index) toolscache.ResourceEventHandlerFuncs {
	put := func(obj any) {
		if name, labels, ok := namespaceOf(obj); ok {
			x.PutNamespace(name, labels)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    put,
		UpdateFunc: func(_, obj any) { put(obj) },
		DeleteFunc: func(obj any) {
			if name, _, ok := namespaceOf(obj); ok {
				x.RemoveNamespace(name)
			}
		},
	}
}

// clusterPolicyHandler feeds Index.ClusterPolicyChanged from the ClusterRetryPolicy informer.
func clusterPolicyHandler(x *index.Index) toolscache.ResourceEventHandlerFuncs {
	policy := func(obj any) (*v1alpha1.ClusterRetryPolicy, bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*v1alpha1.ClusterRetryPolicy)
		return p, ok
	}
	return toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p, ok := policy(obj); ok {
				x.ClusterPolicyChanged(p, false)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := policy(obj); ok {
				x.ClusterPolicyChanged(p, true)
			}
		},
	}
}

// serviceHandler feeds Index.PutService and RemoveService from the Service informer.
func serviceHandler(x *index.Index) toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := ServiceOf(obj); ok {
				x.PutService(s)
			}
		},
		UpdateFunc: func(_, obj any) {
			if s, ok := ServiceOf(obj); ok {
				x.PutService(s)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := ServiceOf(obj); ok {
				x.RemoveService(s)
			}
		},
	}
}

// policyHandler feeds Index.PolicyChanged from the RetryPolicy informer.
func policyHandler(x *index.Index) toolscache.ResourceEventHandlerFuncs {
	policy := func(obj any) (*v1alpha1.RetryPolicy, bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*v1alpha1.RetryPolicy)
		return p, ok
	}
	return toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p, ok := policy(obj); ok {
				x.PolicyChanged(p, false)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := policy(obj); ok {
				x.PolicyChanged(p, true)
			}
		},
	}
}

// setJobCronJob tells the index which CronJob controls a Job, from the cache's OwnedObjects
// (Index.SetJobCronJob): the Job's old version is forgotten, its new one (nil: deleted)
// recorded. Anything else is passed over.
func setJobCronJob(x *index.Index, oldObj, newObj any) {
	job := func(obj any) *OwnedObject {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(*OwnedObject); ok && o.CronJob != "" {
			return o
		}
		return nil
	}
	if o := job(oldObj); o != nil {
		x.SetJobCronJob(o.Namespace, o.Name, "")
	}
	if o := job(newObj); o != nil {
		x.SetJobCronJob(o.Namespace, o.Name, o.CronJob)
	}
}
