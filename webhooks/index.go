package webhooks

import (
	"context"
	"fmt"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/internal/workload"
)

// workloadIndex holds every workload the gate may need, by namespace, fed by the manager's
// informers. A namespace's list is rebuilt lazily on the first read after a change, so an
// admission request reads a ready slice (no List, no deep copy of 5k objects) and the initial
// sync costs O(n), not O(n^2).
type workloadIndex struct {
	mu   sync.RWMutex
	byNS map[string]*nsWorkloads

	syncedMu sync.Mutex
	synced   []func() bool
}

type nsWorkloads struct {
	items map[string]workload.Workload // by Workload.Key()
	list  []workload.Workload          // nil: rebuild on next read; read-only once built
}

func newWorkloadIndex() *workloadIndex {
	return &workloadIndex{byNS: map[string]*nsWorkloads{}}
}

// Workloads returns the namespace's workloads, sorted by key. The slice is shared: read only.
func (x *workloadIndex) Workloads(ns string) []workload.Workload {
	x.mu.RLock()
	n := x.byNS[ns]
	if n == nil {
		x.mu.RUnlock()
		return nil
	}
	if l := n.list; l != nil {
		x.mu.RUnlock()
		return l
	}
	x.mu.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if n.list == nil {
		l := make([]workload.Workload, 0, len(n.items))
		for _, w := range n.items {
			l = append(l, w)
		}
		sort.Slice(l, func(i, j int) bool { return l[i].Key() < l[j].Key() })
		n.list = l
	}
	return n.list
}

// Len is the number of indexed workloads in ns.
func (x *workloadIndex) Len(ns string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if n := x.byNS[ns]; n != nil {
		return len(n.items)
	}
	return 0
}

func (x *workloadIndex) put(w workload.Workload) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.byNS[w.Namespace]
	if n == nil {
		n = &nsWorkloads{items: map[string]workload.Workload{}}
		x.byNS[w.Namespace] = n
	}
	n.items[w.Key()] = w
	n.list = nil
}

func (x *workloadIndex) remove(w workload.Workload) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.byNS[w.Namespace]
	if n == nil {
		return
	}
	if _, ok := n.items[w.Key()]; !ok {
		return
	}
	delete(n.items, w.Key())
	n.list = nil
	if len(n.items) == 0 {
		delete(x.byNS, w.Namespace)
	}
}

// HasSynced reports whether every informer feeding the index has delivered its initial list.
func (x *workloadIndex) HasSynced() bool {
	x.syncedMu.Lock()
	defer x.syncedMu.Unlock()
	if len(x.synced) == 0 {
		return false
	}
	for _, s := range x.synced {
		if !s() {
			return false
		}
	}
	return true
}

func (x *workloadIndex) addSynced(f func() bool) {
	x.syncedMu.Lock()
	defer x.syncedMu.Unlock()
	x.synced = append(x.synced, f)
}

// watchedKinds are the informers the index listens to. Pods are watched as metadata only: a bare
// Pod's workload is its labels, annotations and owner references, and caching whole Pods would
// cost the manager memory in proportion to the cluster.
func watchedKinds() []client.Object {
	return []client.Object{
		&appsv1.Deployment{},
		&appsv1.StatefulSet{},
		&appsv1.DaemonSet{},
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}},
	}
}

// toWorkload reads an informer object; false for anything that is not a workload (a Pod a
// controller owns). A tombstone is unwrapped.
func toWorkload(obj any) (workload.Workload, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		return workload.FromObject(&corev1.Pod{ObjectMeta: o.ObjectMeta})
	case *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.DaemonSet, *corev1.Pod:
		return workload.FromObject(o.(client.Object))
	}
	return workload.Workload{}, false
}

// register adds the index's event handlers to the manager's informers (created here if no one
// else uses them yet; they start with the cache).
func (x *workloadIndex) register(ctx context.Context, c cache.Cache) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if w, ok := toWorkload(obj); ok {
				x.put(w)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if w, ok := toWorkload(newObj); ok {
				x.put(w)
				return
			}
			// A Pod that gained a controller is no longer a bare workload.
			if w, ok := toWorkload(oldObj); ok {
				x.remove(w)
			}
		},
		DeleteFunc: func(obj any) {
			if w, ok := toWorkload(obj); ok {
				x.remove(w)
			}
		},
	}
	for _, obj := range watchedKinds() {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("adding the workload index handler to the %T informer: %w", obj, err)
		}
		x.addSynced(reg.HasSynced)
	}
	return nil
}
