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
//
// The walk goes up from the incoming workload's nodes (svcs) to every caller, in its namespace
// and through "name.ns" in the others, then down from its nodes and upstreams (ups) to every
// callee, across into the namespaces its names lead to.
func (x *Index) clusterReach(w *clusterWalk, ns string, has func(string) bool, svcs, ups []string, limit int) int {
	if !has(ns) {
		return 0
	}
	r := crossWalk{w: w, limit: limit, stack: w.stack, visited: w.visited, key: w.key}
	r.enter(x, ns, has)
	r.reach(ns, svcs, ups)
	w.stack, w.visited, w.key = r.stack, r.visited, r.key
	return r.count
}

// crossWalk is one clusterReach: the namespaces of the walk, its stack and what it visited
// (w's buffers, given back when it ends), and the workloads counted.
type crossWalk struct {
	w     *clusterWalk
	scope []scopeNS
	// start is the request's namespace in scope; -1 when the index has no entry for it.
	start          int32
	stack, visited []clusterNode
	// key is reused for the "name.ns" lookups: a map index by string(bytes) does not allocate.
	key []byte
	// refsOf[at] are the namespaces naming a service of at (referrers), once refsSet[at].
	refsOf       [][]int32
	refsSet      []bool
	count, limit int
}

// The directions of the walk, as marks: a node is walked once in each.
const walkUp, walkDown = 1, 2

// enter makes the walk's scope: the selected namespaces the index knows. The request's
// namespace may have no entry yet (its first workload), or no node for the incoming service
// (its first workload of that service): callers in other namespaces still name it "svc.ns", and
// its upstreams into other namespaces still lead somewhere.
func (r *crossWalk) enter(x *Index, ns string, has func(string) bool) {
	r.start = -1
	scope := r.w.scope
	marks := 0
	for name, n := range x.byNS {
		if has(name) {
			if name == ns {
				r.start = int32(len(scope))
			}
			scope = append(scope, scopeNS{name: name, n: n})
			marks += len(n.services)
		}
	}
	r.scope, r.w.scope = scope, scope
	if cap(r.w.seen) < marks {
		r.w.seen = make([]uint8, 0, marks)
	}
	r.refsOf = make([][]int32, len(scope))
	r.refsSet = make([]bool, len(scope))
}

// reach walks up from svcs, then down from svcs and ups (see clusterReach).
func (r *crossWalk) reach(ns string, svcs, ups []string) {
	for _, name := range svcs {
		r.local(name)
		if r.start >= 0 {
			r.callers(r.start, name)
		} else {
			r.callersOfMissing(name, ns)
		}
	}
	if !r.walk(walkUp) {
		return
	}
	for _, name := range svcs {
		r.local(name)
	}
	for _, name := range ups {
		r.local(name)
		if r.start >= 0 {
			r.into(r.start, name)
		} else if svc, other, ok := annotations.SplitService(name); ok && other != ns {
			r.push(other, svc)
		}
	}
	r.walk(walkDown)
}

// index is namespace name's place in the scope; -1 when it is not in it.
func (r *crossWalk) index(name string) int32 {
	for i := range r.scope {
		if r.scope[i].name == name {
			return int32(i)
		}
	}
	return -1
}

// push puts node svc of namespace ns on the stack, when the scope has both.
func (r *crossWalk) push(ns, svc string) {
	if i := r.index(ns); i >= 0 {
		if id, ok := r.scope[i].n.ids[svc]; ok {
			r.stack = append(r.stack, clusterNode{i, id})
		}
	}
}

// local puts node name of the request's namespace on the stack, when it has one.
func (r *crossWalk) local(name string) {
	if r.start < 0 {
		return
	}
	if id, ok := r.scope[r.start].n.ids[name]; ok {
		r.stack = append(r.stack, clusterNode{r.start, id})
	}
}

// referrers are the other namespaces of the scope with a node naming a service of namespace at
// (nsWorkloads.refs), computed on first use: most pairs of namespaces never name each other, and
// the walk upwards looks for callers only where they can be.
func (r *crossWalk) referrers(at int32) []int32 {
	if !r.refsSet[at] {
		r.refsSet[at] = true
		for i := range r.scope {
			if int32(i) != at && r.scope[i].n.refs[r.scope[at].name] > 0 {
				r.refsOf[at] = append(r.refsOf[at], int32(i))
			}
		}
	}
	return r.refsOf[at]
}

// callers pushes the nodes of the other selected namespaces that name service name of
// namespace at: their node "name.ns". A dotted name is not a service of at but a name of
// another namespace (or a host): no one calls it under a longer one.
func (r *crossWalk) callers(at int32, name string) {
	if strings.IndexByte(name, '.') >= 0 {
		return
	}
	r.key = append(append(append(r.key[:0], name...), '.'), r.scope[at].name...)
	for _, i := range r.referrers(at) {
		if id, ok := r.scope[i].n.ids[string(r.key)]; ok {
			r.stack = append(r.stack, clusterNode{i, id})
		}
	}
}

// callersOfMissing is callers for a namespace ns the index has no entry for: "name.ns" looked
// for in every namespace of the scope.
func (r *crossWalk) callersOfMissing(name, ns string) {
	r.key = append(append(append(r.key[:0], name...), '.'), ns...)
	for i := range r.scope {
		if id, ok := r.scope[i].n.ids[string(r.key)]; ok {
			r.stack = append(r.stack, clusterNode{int32(i), id})
		}
	}
}

// into pushes the node of another selected namespace that name (a node of namespace at) names.
func (r *crossWalk) into(at int32, name string) {
	svc, other, ok := annotations.SplitService(name)
	if !ok || other == r.scope[at].name {
		return
	}
	r.push(other, svc)
}

// walk visits the stack's nodes and what they lead to in direction dir (up: callers, down:
// callees), each node once per direction, counting the workloads of each node visited the first
// time; false when the count reached the limit.
func (r *crossWalk) walk(dir uint8) bool {
	for len(r.stack) > 0 {
		v := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		sn := &r.scope[v.ns]
		if sn.seen == nil {
			sn.seen = r.w.marks(len(sn.n.services))
		}
		if sn.seen[v.id]&dir != 0 {
			continue
		}
		svc := &sn.n.services[v.id]
		if sn.seen[v.id] == 0 {
			r.visited = append(r.visited, v)
			if r.count += len(svc.keys); r.count >= r.limit {
				return false
			}
		}
		sn.seen[v.id] |= dir
		next := svc.out
		if dir == walkUp {
			next = svc.in
		}
		for _, e := range next {
			r.stack = append(r.stack, clusterNode{v.ns, e.to})
		}
		if dir == walkUp {
			r.callers(v.ns, svc.name)
		} else {
			r.into(v.ns, svc.name)
		}
	}
	return true
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
