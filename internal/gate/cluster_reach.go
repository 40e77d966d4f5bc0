package gate

import (
	"math"
	"slices"
	"strings"

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
	seen []uint8 // by service id, allocated when the walk first enters the namespace
}

// RelevantClusterParsed is RelevantParsed across the namespaces has selects: the workloads of
// every selected namespace that can change the judgement of a workload of namespace ns with
// nodes svcs and upstreams ups (both as ns's call graph names them), parsed and sorted by
// workload.Compare. The slice is the caller's; the workloads are shared and immutable.
func (x *Index) RelevantClusterParsed(ns string, has func(string) bool, svcs, ups []string) []*workload.Parsed {
	x.mu.RLock()
	defer x.mu.RUnlock()
	scope, visited, count := x.clusterReach(ns, has, svcs, ups, math.MaxInt)
	if count == 0 {
		return nil
	}
	out := make([]*workload.Parsed, 0, count)
	for _, v := range visited {
		n := scope[v.ns].n
		for k := range n.services[v.id].keys {
			out = append(out, n.items[k])
		}
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
	_, _, count := x.clusterReach(ns, has, svcs, ups, limit)
	return min(count, limit)
}

// clusterReach is reach across namespaces (see RelevantClusterParsed): the namespaces of the
// walk, the nodes visited, each once, and the number of workloads they carry; it stops early
// once that number reaches limit. Called with x.mu held for reading.
func (x *Index) clusterReach(ns string, has func(string) bool, svcs, ups []string, limit int) (scope []scopeNS, visited []clusterNode, count int) {
	if !has(ns) {
		return nil, nil, 0
	}
	// The selected namespaces the index knows. The request's namespace may have no entry yet
	// (its first workload), or no node for the incoming service (its first workload of that
	// service): callers in other namespaces still name it "svc.ns", and its upstreams into other
	// namespaces still lead somewhere.
	start := int32(-1)
	for name, n := range x.byNS {
		if has(name) {
			if name == ns {
				start = int32(len(scope))
			}
			scope = append(scope, scopeNS{name: name, n: n})
		}
	}
	index := func(name string) int32 {
		for i := range scope {
			if scope[i].name == name {
				return int32(i)
			}
		}
		return -1
	}
	const up, down = 1, 2
	var stack []clusterNode
	// key is reused for the "name.ns" lookups: a map index by string(bytes) does not allocate.
	var key []byte
	// callers pushes the nodes of the other selected namespaces that name service name of
	// namespace at: their node "name.ns". A dotted name is not a service of at but a name of
	// another namespace (or a host): no one calls it under a longer one.
	callers := func(at int32, name string) {
		if strings.IndexByte(name, '.') >= 0 {
			return
		}
		key = append(append(append(key[:0], name...), '.'), scope[at].name...)
		for i := range scope {
			if int32(i) == at {
				continue
			}
			if id, ok := scope[i].n.ids[string(key)]; ok {
				stack = append(stack, clusterNode{int32(i), id})
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
				sn.seen = make([]uint8, len(sn.n.services))
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
		return scope, visited, count
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
	return scope, visited, count
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
