package webhook

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/cluster"
	"github.com/retrycap/retrycap/internal/gate"
)

// registerIndex feeds the gate's index from the manager's informers (created here if no one else
// uses them yet; they start with the cache): the workloads (cluster.WatchedKinds, Pods as
// metadata), the Services (cut down by cluster.ServiceTransform) and the RetryPolicies, whose changes make their prepared graphs stale. Updates that do
// not touch a workload's labels or annotations leave the index alone (Index.Put says so).
func registerIndex(ctx context.Context, c cache.Cache, x *gate.Index) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if w, ok := cluster.WorkloadOf(obj); ok {
				x.Put(w)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if w, ok := cluster.WorkloadOf(newObj); ok {
				x.Put(w)
				return
			}
			// A Pod that gained a controller is no longer a bare workload.
			if w, ok := cluster.WorkloadOf(oldObj); ok {
				x.Remove(w)
			}
		},
		DeleteFunc: func(obj any) {
			if w, ok := cluster.WorkloadOf(obj); ok {
				x.Remove(w)
			}
		},
	}
	for _, obj := range cluster.WatchedKinds() {
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
	// Services: a change relinks the workloads it fronts and makes the namespace's prepared
	// graphs stale, like a workload change.
	sinf, err := c.GetInformer(ctx, cluster.ServiceObject())
	if err != nil {
		return fmt.Errorf("getting the Service informer: %w", err)
	}
	sreg, err := sinf.AddEventHandler(serviceHandler(x))
	if err != nil {
		return fmt.Errorf("adding the gate's Service handler: %w", err)
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
			if s, ok := cluster.ServiceOf(obj); ok {
				x.PutService(s)
			}
		},
		UpdateFunc: func(_, obj any) {
			if s, ok := cluster.ServiceOf(obj); ok {
				x.PutService(s)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := cluster.ServiceOf(obj); ok {
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

// baseRefresher runs the index's Refresh as a manager Runnable. Not leader-elected: every
// replica serves the webhooks from its own index.
type baseRefresher struct{ x *gate.Index }

func (r baseRefresher) Start(ctx context.Context) error { return r.x.Refresh(ctx) }

func (baseRefresher) NeedLeaderElection() bool { return false }
