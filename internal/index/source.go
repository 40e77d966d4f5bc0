package index

import (
	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// For returns the handler's Source for a request about incoming: its relevant workloads from the
// index (RelevantParsed), and the policies' prepared graphs when those workloads are a large
// share of a large namespace (WantsBase). Use it for one request.
func (x *Index) For(incoming workload.Workload) *Request {
	return &Request{x: x, incoming: incoming}
}

// BaseMode says whether a Request answers with prepared graphs: the handler's is BaseAuto;
// tests and benchmarks comparing the two paths force one (ForMode).
type BaseMode int8

const (
	BaseAuto   BaseMode = iota // when WantsBase: the handler's path
	BaseNever                  // always build (tests and benchmarks of the build)
	BaseAlways                 // always (tests and benchmarks of the prepared graph)
)

// ForMode is For with the prepared graphs used as mode says rather than as the handler decides:
// the differential tests and benchmarks of the gate judge one request both ways.
func (x *Index) ForMode(incoming workload.Workload, mode BaseMode) *Request {
	return &Request{x: x, incoming: incoming, mode: mode}
}

// Request is the gate's Source (and ClusterSource) for one admission request: the relevant
// stored workloads, Services and prepared graphs, read from the index on first use.
type Request struct {
	x        *Index
	incoming workload.Workload
	mode     BaseMode
	// ups are incoming's upstream services, computed on first use: an update that raises
	// nothing needs neither them nor the index.
	ups    []string
	upsSet bool
	// nodes are incoming's nodes (workload.ServiceSet.Nodes), computed on first use.
	nodes    []string
	nodesSet bool
	one      [1]string
	// ps are the relevant workloads of the request's namespace, read on first use.
	ps    []*workload.Parsed
	psSet bool
	// wantsBase is decided once per request: 1 yes, -1 no, 0 not asked yet. A count, not the
	// list Workloads builds: building the list of 5,000 workloads when the prepared graph then
	// answers put the worst case's p99 at 0.68-0.70 ms, against 0.57 ms with the count, back to
	// back; a request that builds walks its (small) relevant set twice instead.
	wantsBase int8
}

func (s *Request) upstreams() []string {
	if !s.upsSet {
		s.ups, s.upsSet = UpstreamServices(s.incoming), true
	}
	return s.ups
}

func (s *Request) starts() []string {
	if !s.nodesSet {
		s.nodesSet = true
		if set := s.x.Services(s.incoming.Namespace); set == nil {
			// No Services: the service name alone, without allocating for it.
			s.one[0] = s.incoming.ServiceName()
			s.nodes = s.one[:]
		} else {
			s.nodes, _ = set.Nodes(workload.Parse(s.incoming))
		}
	}
	return s.nodes
}

// The index keeps its prepared graphs per API object (its UID and generation say when one is
// stale) and walks relevance per kind: a RetryPolicy's graph is of its namespace and stale when
// that namespace changes; a ClusterRetryPolicy's spans its scope, its walk follows "name.ns"
// across namespaces and its graph is stale when any namespace or their labels change. The
// Request's three Source methods are where the kinds part (clusterPolicy); the gate sees one
// Policy.

// clusterPolicy is p's ClusterRetryPolicy; false for a RetryPolicy.
func clusterPolicy(p *workload.Policy) (*v1alpha1.ClusterRetryPolicy, bool) {
	c, ok := p.Object().(*v1alpha1.ClusterRetryPolicy)
	return c, ok
}

// Workloads implements gate.Source: the relevant stored workloads of p's namespaces. A
// RetryPolicy's are those of the request's namespace (RelevantParsed, read once per request and
// shared by its RetryPolicies); a ClusterRetryPolicy's those across the namespaces of its scope
// (RelevantClusterParsed).
func (s *Request) Workloads(p *workload.Policy) []*workload.Parsed {
	if _, ok := clusterPolicy(p); ok {
		return s.x.RelevantClusterParsed(s.incoming.Namespace, p.Scope().Has, s.starts(), s.upstreams())
	}
	if !s.psSet {
		s.ps, s.psSet = s.x.RelevantParsed(s.incoming.Namespace, s.starts(), s.upstreams()), true
	}
	return s.ps
}

// Services implements gate.Source: the Services of p's namespaces.
func (s *Request) Services(p *workload.Policy) *workload.ServiceSet {
	if _, ok := clusterPolicy(p); ok {
		return s.x.ScopeServices(p.Scope())
	}
	return s.x.Services(s.incoming.Namespace)
}

// Prepared implements gate.Source: p's prepared graph when the request's relevant workloads are
// a large share of a large namespace (WantsBase; for a ClusterRetryPolicy, of its scope:
// WantsClusterBase).
func (s *Request) Prepared(p *workload.Policy) *workload.Base {
	if c, ok := clusterPolicy(p); ok {
		return s.clusterPrepared(c, p.Scope())
	}
	if rp, ok := p.Object().(*v1alpha1.RetryPolicy); ok {
		return s.prepared(rp)
	}
	return nil
}

func (s *Request) prepared(p *v1alpha1.RetryPolicy) *workload.Base {
	switch s.mode {
	case BaseNever:
		return nil
	case BaseAuto:
		if s.wantsBase == 0 {
			s.wantsBase = -1
			ns := s.incoming.Namespace
			if s.x.WantsBase(ns, s.x.RelevantCount(ns, s.starts(), s.upstreams())) {
				s.wantsBase = 1
			}
		}
		if s.wantsBase < 0 {
			return nil
		}
	}
	return s.x.Base(s.incoming.Namespace, p)
}

// Scope implements ClusterSource: the policy's namespaces from the index's Namespace labels.
func (s *Request) Scope(p *v1alpha1.ClusterRetryPolicy) (*workload.ClusterScope, error) {
	return s.x.ClusterScope(p)
}

// clusterPrepared is Prepared for a ClusterRetryPolicy over the namespaces of sc.
func (s *Request) clusterPrepared(p *v1alpha1.ClusterRetryPolicy, sc *workload.ClusterScope) *workload.Base {
	switch s.mode {
	case BaseNever:
		return nil
	case BaseAuto:
		// The count matters only up to the share that makes the prepared graph worth it.
		limit := max(baseMinWorkloads, (s.x.ScopeLen(sc)+baseShare-1)/baseShare)
		n := s.x.RelevantClusterCount(s.incoming.Namespace, sc.Has, s.starts(), s.upstreams(), limit)
		if !s.x.WantsClusterBase(sc, n) {
			return nil
		}
	}
	return s.x.ClusterBase(p, sc)
}

// UpstreamServices are w's upstreams as graph nodes of its namespace; nil for a malformed value
// (Decide refuses it before it looks at the graph).
func UpstreamServices(w workload.Workload) []string {
	ups, err := workload.Upstreams(w, w.Namespace, 1)
	if err != nil {
		return nil
	}
	names := make([]string, len(ups))
	for i, u := range ups {
		names[i] = u.Name
	}
	return names
}

// RelevantWorkloads returns the stored workloads of w's namespace that can bear on w's place in
// any policy's graph (RelevantParsed for its nodes, the Services fronting it and its own name
// unless a Service shadows it, and its upstreams, through the Services they name): every service
// that reaches it, so whether it is a default entrypoint (no selected service calls it) is decided over them
// as over the whole namespace. The pod injector reads them instead of listing the namespace.
func (x *Index) RelevantWorkloads(w workload.Workload) []workload.Workload {
	ps := x.RelevantParsed(w.Namespace, x.Nodes(w), UpstreamServices(w))
	out := make([]workload.Workload, len(ps))
	for i, p := range ps {
		out[i] = p.Workload
	}
	return out
}

// RelevantClusterWorkloads is RelevantWorkloads across the namespaces of s: the stored
// workloads of those namespaces that can bear on w's place in a cluster policy's graph over s
// (RelevantClusterParsed). The pod injector decides a cluster policy's entrypoints from them.
func (x *Index) RelevantClusterWorkloads(w workload.Workload, s *workload.ClusterScope) []workload.Workload {
	ps := x.RelevantClusterParsed(w.Namespace, s.Has, x.Nodes(w), UpstreamServices(w))
	out := make([]workload.Workload, len(ps))
	for i, p := range ps {
		out[i] = p.Workload
	}
	return out
}
