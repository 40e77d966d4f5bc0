package cluster

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/gate"
)

// FeedIndex feeds the workload index (gate.Index: the gate, the injector and the controller read
// it) from the manager's informers (created here if no one else uses them yet; they start with
// the cache): the workloads (WatchedKinds, Pods as metadata), the Services (cut down by
// ServiceTransform: a change relinks the workloads it fronts, makes the namespace's prepared
// graphs stale and is told to the index's subscribers, like a workload change) and the
// RetryPolicies, whose changes make their prepared graphs stale. Updates that do not touch a
// workload's labels or annotations, or a Service's selector or type, leave the index alone
// (Index.Put and PutService say so).
func FeedIndex(ctx context.Context, c cache.Cache, x *gate.Index) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if w, ok := WorkloadOf(obj); ok {
				x.Put(w)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if w, ok := WorkloadOf(newObj); ok {
				x.Put(w)
				return
			}
			// A Pod that gained a controller is no longer a bare workload.
			if w, ok := WorkloadOf(oldObj); ok {
				x.Remove(w)
			}
		},
		DeleteFunc: func(obj any) {
			if w, ok := WorkloadOf(obj); ok {
				x.Remove(w)
			}
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
	return nil
}

// serviceHandler feeds Index.PutService and RemoveService from the Service informer.
func serviceHandler(x *gate.Index) toolscache.ResourceEventHandlerFuncs {
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
func policyHandler(x *gate.Index) toolscache.ResourceEventHandlerFuncs {
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
