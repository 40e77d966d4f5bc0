package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/status"
)

// MeshSource is where a reconciler reads the mesh retry layers (meshwatch.Watcher): the current
// Set (nil: none), the APIs it comes from, and a subscription to its changes.
type MeshSource interface {
	Set() *mesh.Set
	APIs() []string
	OnChange(func(meshwatch.Affected))
	HasSynced() bool
}

// meshSet is the current Set, nil without a source.
func (r *RetryPolicyReconciler) meshSet() *mesh.Set { return meshSetOf(r.Mesh) }

func meshSetOf(src MeshSource) *mesh.Set {
	if src == nil {
		return nil
	}
	return src.Set()
}

// MeshLayersCondition is the MeshLayers condition for the APIs a source reads.
func MeshLayersCondition(apis []string, generation int64) metav1.Condition {
	if len(apis) == 0 {
		return metav1.Condition{Type: v1alpha1.ConditionMeshLayers, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoMeshAPIs,
			ObservedGeneration: generation, Message: "reads no mesh API (the cluster serves none of those retrycap reads, or --mesh-apis excludes them): only the applications' attempts are counted"}
	}
	return metav1.Condition{Type: v1alpha1.ConditionMeshLayers, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonMeshAPIsRead,
		ObservedGeneration: generation, Message: "reads " + strings.Join(apis, ", ")}
}

// setMeshCondition sets MeshLayers on st when the reconciler has a mesh source.
func (r *RetryPolicyReconciler) setMeshCondition(st *v1alpha1.RetryPolicyStatus, generation int64) {
	setMeshConditionOf(r.Mesh, st, generation, r.now())
}

func setMeshConditionOf(src MeshSource, st *v1alpha1.RetryPolicyStatus, generation int64, now time.Time) {
	if src == nil {
		return
	}
	c := MeshLayersCondition(src.APIs(), generation)
	c.LastTransitionTime = metav1.NewTime(now)
	status.SetCondition(&st.Conditions, c)
}

// clusterMeshChanges reconciles every ClusterRetryPolicy on each change of the mesh Set: cluster
// policies are few, and their graphs span namespaces, so any namespace's change may bear on one.
type clusterMeshChanges struct {
	r *ClusterRetryPolicyReconciler
}

func (s *clusterMeshChanges) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.r.Mesh.OnChange(func(meshwatch.Affected) {
		var list v1alpha1.ClusterRetryPolicyList
		if err := s.r.Client.List(ctx, &list); err != nil {
			log.FromContext(ctx).Error(err, "listing the ClusterRetryPolicies a mesh change bears on")
			return
		}
		for i := range list.Items {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	})
	return nil
}

func (s *clusterMeshChanges) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.r.Mesh.HasSynced) {
		return fmt.Errorf("waiting for the mesh watcher's first discovery: %w", ctx.Err())
	}
	return nil
}

func (s *clusterMeshChanges) String() string { return "mesh retry layers" }

// meshChanges is the controller's source of mesh changes: each change of the Set reconciles the
// policies of the namespaces it bears on (all, for an object any namespace's callers may see).
type meshChanges struct {
	r *RetryPolicyReconciler
}

func (s *meshChanges) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.r.Mesh.OnChange(func(a meshwatch.Affected) {
		var opts [][]client.ListOption
		if a.All {
			opts = [][]client.ListOption{nil}
		}
		for _, ns := range a.Namespaces {
			opts = append(opts, []client.ListOption{client.InNamespace(ns)})
		}
		for _, o := range opts {
			var list v1alpha1.RetryPolicyList
			if err := s.r.Client.List(ctx, &list, o...); err != nil {
				log.FromContext(ctx).Error(err, "listing the RetryPolicies a mesh change bears on")
				continue
			}
			for i := range list.Items {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
			}
		}
	})
	return nil
}

func (s *meshChanges) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.r.Mesh.HasSynced) {
		return fmt.Errorf("waiting for the mesh watcher's first discovery: %w", ctx.Err())
	}
	return nil
}

func (s *meshChanges) String() string { return "mesh retry layers" }
