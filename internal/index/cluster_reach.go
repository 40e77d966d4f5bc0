package index

import (
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// A ClusterRetryPolicy's graph spans the namespaces it selects: an upstream "name.ns" of a
// workload in another namespace is, in that namespace's call graph (nsWorkloads), a node named
// "name.ns" that nothing provides; in the graph of the cluster policy it is node "name" of ns
// when ns is selected. The walk below follows those hand-overs, so that a request judged by a
// cluster policy reads, as a namespaced one does, only the workloads that can bear on it: those
// of the services that reach it and of those it reaches, in every selected namespace.

// clusterNode is a node of one namespace's call graph: the namespace by its place in the walk's
// scope.
type clusterNode struct {
	ns, id int32
}

// scopeNS is a namespace of a cluster walk.
type scopeNS struct {
	name string
	n    *nsWorkloads
	seen []uint8 // by service id, taken from the walk's buffer when it first enters the namespace
}

// clusterWalk is the scratch space of one walk, pooled: a worst-case request walks thousands of
// nodes, and allocating the marks and stacks anew each time made it the gate's largest
// allocation (80 KB per request over 5,000 workloads in ten namespaces).
type clusterWalk struct {
	scope          []scopeNS
	seen           []uint8
	stack, visited []clusterNode
	key            []byte
}

var clusterWalks = sync.Pool{New: func() any { return &clusterWalk{} }}

func (w *clusterWalk) release() {
	clear(w.scope) // the namespaces' entries may go
	w.scope = w.scope[:0]
	w.seen, w.stack, w.visited, w.key = w.seen[:0], w.stack[:0], w.visited[:0], w.key[:0]
	clusterWalks.Put(w)
}

// marks returns n zeroed marks from the buffer. The buffer is grown to the walk's whole need
// once (sized for every namespace of the scope), so that slices handed out stay valid.
func (w *clusterWalk) marks(n int) []uint8 {
	at := len(w.seen)
	w.seen = w.seen[:at+n]
	m := w.seen[at : at+n : at+n]
	clear(m)
	return m
}

// RelevantClusterParsed is RelevantParsed across the namespaces has selects: the workloads of
// every selected namespace that can change the judgement of a workload of namespace ns with
// nodes svcs and upstreams ups (both as ns's call graph names them), parsed and sorted by
// workload.Compare. The slice is the caller's; the workloads are shared and immutable.
func (x *Index) RelevantClusterParsed(ns string, has func(string) bool, svcs, ups []string) []*workload.Parsed {
	x.mu.RLock()
	defer x.mu.RUnlock()
	w := clusterWalks.Get().(*clusterWalk)
	defer w.release()
	count := x.clusterReach(w, ns, has, svcs, ups, math.MaxInt)
	if count == 0 {
		return nil
	}
	out := make([]*workload.Parsed, 0, count)
	for _, v := range w.visited {
		n := w.scope[v.ns].n
		out = append(out, n.services[v.id].keys...)
	}
	slices.SortFunc(out, func(a, b *workload.Parsed) int { return workload.Compare(a.Workload, b.Workload) })
	// A workload reached under several nodes (a Service and its own name) was listed once per
	// node reached.
	return slices.CompactFunc(out, func(a, b *workload.Parsed) bool { return a == b })
}

// RelevantClusterCount is about len(RelevantClusterParsed(...)) (a workload reached under
// several nodes counts once per node), without building the list; the walk stops once the count
// reaches limit, which it then returns: the handler only asks whether it is a large share of the
// scope (WantsClusterBase), and a request that will use the prepared graph walks only that share.
func (x *Index) RelevantClusterCount(ns string, has func(string) bool, svcs, ups []string, limit int) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	w := clusterWalks.Get().(*clusterWalk)
	defer w.release()
	return min(x.clusterReach(w, ns, has, svcs, ups, limit), limit)
}

// clusterReach is reach across namespaces (see RelevantClusterParsed): it leaves in w the
// namespaces of the walk and the nodes visited, each once, and returns the number of workloads
// they carry; it stops early once that number reaches limit. Called with x.mu held for reading.
func (x *Index) clusterReach(w *clusterWalk, ns string, has func(string) bool, svcs, ups []string, limit int) (count int) {
	if !has(ns) {
		return 0
	}
	// The selected namespaces the index knows. The request's namespace may have no entry yet
	// (its first workload), or no node for the incoming service (its first workload of that
	// service): callers in other namespaces still name it "svc.ns", and its upstreams into other
	// namespaces still lead somewhere.
	start := int32(-1)
	scope := w.scope
	marks := 0
	for name, n := range x.byNS {
		if has(name) {
			if name == ns {
				start = int32(len(scope))
			}
			scope = append(scope, scopeNS{name: name, n: n})
			marks += len(n.services)
		}
	}
	w.scope = scope
	if cap(w.seen) < marks {
		w.seen = make([]uint8, 0, marks)
	}
	stack, visited, key := w.stack, w.visited, w.key
	defer func() { w.stack, w.visited, w.key = stack, visited, key }()
	index := func(name string) int32 {
		for i := range scope {
			if scope[i].name == name {
				return int32(i)
			}
		}
		return -1
	}
	// referrers(at) are the other namespaces of the scope with a node naming a service of
	// namespace at (nsWorkloads.refs), computed on first use: most pairs of namespaces never
	// name each other, and the walk upwards looks for callers only where they can be.
	refsOf := make([][]int32, len(scope))
	refsSet := make([]bool, len(scope))
	referrers := func(at int32) []int32 {
		if !refsSet[at] {
			refsSet[at] = true
			for i := range scope {
				if int32(i) != at && scope[i].n.refs[scope[at].name] > 0 {
					refsOf[at] = append(refsOf[at], int32(i))
				}
			}
		}
		return refsOf[at]
	}
	const up, down = 1, 2
	// key is reused for the "name.ns" lookups: a map index by string(bytes) does not allocate.
	// callers pushes the nodes of the other selected namespaces that name service name of
	// namespace at: their node "name.ns". A dotted name is not a service of at but a name of
	// another namespace (or a host): no one calls it under a longer one.
	callers := func(at int32, name string) {
		if strings.IndexByte(name, '.') >= 0 {
			return
		}
		key = append(append(append(key[:0], name...), '.'), scope[at].name...)
		for _, i := range referrers(at) {
			if id, ok := scope[i].n.ids[string(key)]; ok {
				stack = append(stack, clusterNode{i, id})
			}
		}
	}
	// into pushes the node of another selected namespace that name (a node of namespace at)
	// names.
	into := func(at int32, name string) {
		svc, other, ok := annotations.SplitService(name)
		if !ok || (at >= 0 && other == scope[at].name) {
			return
		}
		if i := index(other); i >= 0 {
			if id, ok := scope[i].n.ids[svc]; ok {
				stack = append(stack, clusterNode{i, id})
			}
		}
	}
	walk := func(dir uint8) bool {
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			sn := &scope[v.ns]
			if sn.seen == nil {
				sn.seen = w.marks(len(sn.n.services))
			}
			if sn.seen[v.id]&dir != 0 {
				continue
			}
			svc := &sn.n.services[v.id]
			if sn.seen[v.id] == 0 {
				visited = append(visited, v)
				if count += len(svc.keys); count >= limit {
					return false
				}
			}
			sn.seen[v.id] |= dir
			next := svc.out
			if dir == up {
				next = svc.in
			}
			for _, e := range next {
				stack = append(stack, clusterNode{v.ns, e.to})
			}
			if dir == up {
				callers(v.ns, svc.name)
			} else {
				into(v.ns, svc.name)
			}
		}
		return true
	}
	local := func(name string) {
		if start < 0 {
			return
		}
		if id, ok := scope[start].n.ids[name]; ok {
			stack = append(stack, clusterNode{start, id})
		}
	}
	for _, name := range svcs {
		local(name)
		if start >= 0 {
			callers(start, name)
		} else {
			// No entry for ns: look for "name.ns" everywhere.
			key = append(append(append(key[:0], name...), '.'), ns...)
			for i := range scope {
				if id, ok := scope[i].n.ids[string(key)]; ok {
					stack = append(stack, clusterNode{int32(i), id})
				}
			}
		}
	}
	if !walk(up) {
		return count
	}
	for _, name := range svcs {
		local(name)
	}
	for _, name := range ups {
		local(name)
		if start < 0 {
			if svc, other, ok := annotations.SplitService(name); ok && other != ns {
				if i := index(other); i >= 0 {
					if id, ok := scope[i].n.ids[svc]; ok {
						stack = append(stack, clusterNode{i, id})
					}
				}
			}
		} else {
			into(start, name)
		}
	}
	walk(down)
	return count
}

// ClusterServices returns the Services of the namespaces has selects, as one set (nil: none).
// Built per call from each namespace's shared, immutable set: a cluster policy's request reads
// the Services of several namespaces.
func (x *Index) ClusterServices(has func(string) bool) *workload.ServiceSet {
	x.mu.RLock()
	var svcs []workload.Service
	for name, n := range x.byNS {
		if n.set != nil && has(name) {
			svcs = append(svcs, n.set.List()...)
		}
	}
	x.mu.RUnlock()
	if len(svcs) == 0 {
		return nil
	}
	return workload.NewServiceSet(svcs)
}
