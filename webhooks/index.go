package webhooks

import (
	"context"
	"fmt"
	"maps"
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
// informers, together with the service-level call graph of all of them (selected by a policy or
// not). An admission request reads only the part of a namespace that can matter to it
// (Relevant), so its cost follows the size of the workload's chains, not of the namespace.
// Updates that do not touch a workload's labels or annotations (status, replicas, images) leave
// the index alone.
type workloadIndex struct {
	mu   sync.RWMutex
	byNS map[string]*nsWorkloads

	syncedMu sync.Mutex
	synced   []func() bool
}

type indexEntry struct {
	w   workload.Workload
	svc string
	// ups are the upstream services, normalised for the namespace; nil for a malformed value.
	ups []string
}

type nsWorkloads struct {
	items map[string]indexEntry          // by Workload.Key()
	out   map[string]map[string]int      // service -> upstream service -> number of workloads declaring it
	in    map[string]map[string]int      // service -> calling service -> number
	bySvc map[string]map[string]struct{} // service -> keys of the workloads that provide it
	list  []workload.Workload            // nil: rebuild on next read; read-only once built
}

func newWorkloadIndex() *workloadIndex {
	return &workloadIndex{byNS: map[string]*nsWorkloads{}}
}

func newEntry(w workload.Workload) indexEntry {
	e := indexEntry{w: w, svc: w.ServiceName()}
	// Attempts do not matter for reachability; a malformed value has no edges, as in Build.
	if ups, err := workload.Upstreams(w, w.Namespace, 1); err == nil {
		for _, u := range ups {
			e.ups = append(e.ups, u.Name)
		}
	}
	return e
}

// Workloads returns all of the namespace's workloads, sorted by key. The slice is shared: read
// only. The validator uses it; the gate uses Relevant.
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
		for _, e := range n.items {
			l = append(l, e.w)
		}
		sort.Slice(l, func(i, j int) bool { return l[i].Key() < l[j].Key() })
		n.list = l
	}
	return n.list
}

// Relevant returns the workloads of ns that can change the gate's judgement of a workload of
// service svc whose upstreams are ups: those providing svc, every service that reaches svc, and
// every service reachable from svc or from ups, in the call graph of all the namespace's
// workloads. graph.Judge and graph.PlanLocal depend only on the paths into svc (so on its
// ancestors and, for default entrypoints, their callers, which are ancestors too) and the paths
// below its upstreams (their descendants); a policy's graph is a subgraph of this one, so the set
// is a superset of what any policy needs and the judgement is the same as over the whole
// namespace (TestRelevantMatchesWholeNamespace checks this on random graphs).
func (x *workloadIndex) Relevant(ns, svc string, ups []string) []workload.Workload {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := x.byNS[ns]
	if n == nil {
		return nil
	}
	reach := func(start []string, next map[string]map[string]int) map[string]bool {
		seen := map[string]bool{}
		stack := append([]string(nil), start...)
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[v] {
				continue
			}
			seen[v] = true
			for u := range next[v] {
				if !seen[u] {
					stack = append(stack, u)
				}
			}
		}
		return seen
	}
	seen := reach([]string{svc}, n.in)
	for s := range reach(append([]string{svc}, ups...), n.out) {
		seen[s] = true
	}
	var out []workload.Workload
	for s := range seen {
		for k := range n.bySvc[s] {
			out = append(out, n.items[k].w)
		}
	}
	return out
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

func sameWorkload(a, b workload.Workload) bool {
	return a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations)
}

func (x *workloadIndex) put(w workload.Workload) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.byNS[w.Namespace]
	if n == nil {
		n = &nsWorkloads{items: map[string]indexEntry{}, out: map[string]map[string]int{},
			in: map[string]map[string]int{}, bySvc: map[string]map[string]struct{}{}}
		x.byNS[w.Namespace] = n
	}
	key := w.Key()
	if prev, ok := n.items[key]; ok {
		if sameWorkload(prev.w, w) {
			return
		}
		n.unlink(key, prev)
	}
	e := newEntry(w)
	n.items[key] = e
	n.link(key, e)
	n.list = nil
}

func (x *workloadIndex) remove(w workload.Workload) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.byNS[w.Namespace]
	if n == nil {
		return
	}
	key := w.Key()
	prev, ok := n.items[key]
	if !ok {
		return
	}
	n.unlink(key, prev)
	delete(n.items, key)
	n.list = nil
	if len(n.items) == 0 {
		delete(x.byNS, w.Namespace)
	}
}

func (n *nsWorkloads) link(key string, e indexEntry) {
	addCount := func(m map[string]map[string]int, a, b string) {
		if m[a] == nil {
			m[a] = map[string]int{}
		}
		m[a][b]++
	}
	if n.bySvc[e.svc] == nil {
		n.bySvc[e.svc] = map[string]struct{}{}
	}
	n.bySvc[e.svc][key] = struct{}{}
	for _, u := range e.ups {
		addCount(n.out, e.svc, u)
		addCount(n.in, u, e.svc)
	}
}

func (n *nsWorkloads) unlink(key string, e indexEntry) {
	dropCount := func(m map[string]map[string]int, a, b string) {
		m[a][b]--
		if m[a][b] <= 0 {
			delete(m[a], b)
			if len(m[a]) == 0 {
				delete(m, a)
			}
		}
	}
	delete(n.bySvc[e.svc], key)
	if len(n.bySvc[e.svc]) == 0 {
		delete(n.bySvc, e.svc)
	}
	for _, u := range e.ups {
		dropCount(n.out, e.svc, u)
		dropCount(n.in, u, e.svc)
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
