package gate

import (
	"slices"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// A ClusterRetryPolicy's graph spans the namespaces it selects: an upstream "name.ns" of a
// workload in another namespace is, in that namespace's call graph (nsWorkloads), a node named
// "name.ns" that nothing provides; in the graph of the cluster policy it is node "name" of ns
// when ns is selected. The walk below follows those hand-overs, so that a request judged by a
// cluster policy reads, as a namespaced one does, only the workloads that can bear on it: those
// of the services that reach it and of those it reaches, in every selected namespace.

// clusterNode is a node of one namespace's call graph.
type clusterNode struct {
	n  *nsWorkloads
	ns string
	id int32
}

// RelevantClusterParsed is RelevantParsed across the namespaces has selects: the workloads of
// every selected namespace that can change the judgement of a workload of namespace ns with
// nodes svcs and upstreams ups (both as ns's call graph names them), parsed and sorted by
// workload.Compare. The slice is the caller's; the workloads are shared and immutable.
func (x *Index) RelevantClusterParsed(ns string, has func(string) bool, svcs, ups []string) []*workload.Parsed {
	x.mu.RLock()
	defer x.mu.RUnlock()
	visited := x.clusterReach(ns, has, svcs, ups)
	count := 0
	for _, v := range visited {
		count += len(v.n.services[v.id].keys)
	}
	if count == 0 {
		return nil
	}
	out := make([]*workload.Parsed, 0, count)
	for _, v := range visited {
		for k := range v.n.services[v.id].keys {
			out = append(out, v.n.items[k])
		}
	}
	slices.SortFunc(out, func(a, b *workload.Parsed) int { return workload.Compare(a.Workload, b.Workload) })
	// A workload reached under several nodes (a Service and its own name) was listed once per
	// node reached.
	return slices.CompactFunc(out, func(a, b *workload.Parsed) bool { return a == b })
}

// RelevantClusterCount is about len(RelevantClusterParsed(...)), without building the list.
func (x *Index) RelevantClusterCount(ns string, has func(string) bool, svcs, ups []string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	count := 0
	for _, v := range x.clusterReach(ns, has, svcs, ups) {
		count += len(v.n.services[v.id].keys)
	}
	return count
}

// clusterReach is reach across namespaces (see RelevantClusterParsed): the nodes visited, each
// once. Called with x.mu held for reading.
func (x *Index) clusterReach(ns string, has func(string) bool, svcs, ups []string) []clusterNode {
	if !has(ns) {
		return nil
	}
	// The request's namespace may have no entry yet (its first workload), or no node for the
	// incoming service (its first workload of that service): callers in other namespaces still
	// name it "svc.ns", and its upstreams into other namespaces still lead somewhere.
	start := x.byNS[ns]
	// The selected namespaces the index knows, for the walk upwards: a caller of node "a" of
	// namespace b from another namespace is its node "a.b".
	var scope []*nsWorkloads
	var scopeNames []string
	for name, n := range x.byNS {
		if has(name) {
			scope = append(scope, n)
			scopeNames = append(scopeNames, name)
		}
	}
	const up, down = 1, 2
	seen := map[*nsWorkloads][]uint8{}
	mark := func(n *nsWorkloads) []uint8 {
		s := seen[n]
		if s == nil {
			s = make([]uint8, len(n.services))
			seen[n] = s
		}
		return s
	}
	var visited []clusterNode
	var stack []clusterNode
	// callers pushes the nodes of the other selected namespaces that name service name of ns.
	callers := func(n *nsWorkloads, name, ns string) {
		for i, m := range scope {
			if m == n {
				continue
			}
			if id, ok := m.ids[name+"."+ns]; ok {
				stack = append(stack, clusterNode{m, scopeNames[i], id})
			}
		}
	}
	// into pushes the node of another selected namespace that name (a node of ns) names.
	into := func(name, ns string) {
		if svc, other, ok := annotations.SplitService(name); ok && other != ns && has(other) {
			if m := x.byNS[other]; m != nil {
				if id, ok := m.ids[svc]; ok {
					stack = append(stack, clusterNode{m, other, id})
				}
			}
		}
	}
	walk := func(dir uint8) {
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			s := mark(v.n)
			if s[v.id]&dir != 0 {
				continue
			}
			if s[v.id] == 0 {
				visited = append(visited, v)
			}
			s[v.id] |= dir
			svc := &v.n.services[v.id]
			next := svc.out
			if dir == up {
				next = svc.in
			}
			for _, e := range next {
				stack = append(stack, clusterNode{v.n, v.ns, e.to})
			}
			if dir == up {
				callers(v.n, svc.name, v.ns)
			} else {
				into(svc.name, v.ns)
			}
		}
	}
	local := func(name string) {
		if start == nil {
			return
		}
		if id, ok := start.ids[name]; ok {
			stack = append(stack, clusterNode{start, ns, id})
		}
	}
	for _, name := range svcs {
		local(name)
		callers(start, name, ns)
	}
	walk(up)
	for _, name := range svcs {
		local(name)
	}
	for _, name := range ups {
		local(name)
		into(name, ns)
	}
	walk(down)
	return visited
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
