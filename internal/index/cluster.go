package index

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// ClusterRetryPolicies in the index: each policy's scope (the namespaces its namespaceSelector
// selects, computed once per generation of the policy and of the namespaces' labels) and its
// prepared graph over the workloads of its scope (workload.NewBase), the cluster
// counterpart of a RetryPolicy's per-namespace prepared graph (bases.go): valid for one
// generation of the index's workloads and Services in any namespace (workloadGen), of the
// namespaces' labels and of the policy, rebuilt in the background by Refresh after a change.

type clusterState struct {
	clMu   sync.Mutex
	scopes map[string]*scopeEntry          // by policy name
	cbases map[string]*preparedClusterBase // by policy name
	// workloadGen counts the changes to any namespace's workloads or Services.
	workloadGen atomic.Uint64
	// clusterDirty says a change made some prepared cluster graph stale (Refresh rebuilds it).
	clusterDirty atomic.Bool
	// svcSets are the Services of a scope's namespaces as one set (ScopeServices), by scope,
	// each valid for one workloadGen.
	svcSets map[*workload.ClusterScope]scopeServices
}

type scopeServices struct {
	gen uint64
	set *workload.ServiceSet
}

// ScopeServices is ClusterServices(s.Has), kept until the next change to any namespace's
// workloads or Services (or a new scope): a cluster policy's request reads the Services of all
// its namespaces, and merging thousands of them per request would cost more than its walk.
func (x *Index) ScopeServices(s *workload.ClusterScope) *workload.ServiceSet {
	gen := x.workloadGen.Load()
	x.clMu.Lock()
	c, ok := x.svcSets[s]
	x.clMu.Unlock()
	if ok && c.gen == gen {
		return c.set
	}
	set := x.ClusterServices(s.Has)
	x.clMu.Lock()
	if x.svcSets == nil || len(x.svcSets) > 64 {
		// Scopes are replaced when labels or policies change: forget the old ones.
		x.svcSets = map[*workload.ClusterScope]scopeServices{}
	}
	x.svcSets[s] = scopeServices{gen: gen, set: set}
	x.clMu.Unlock()
	return set
}

type scopeEntry struct {
	uid   string
	gen   int64
	nsGen uint64
	scope *workload.ClusterScope
	err   error
}

type preparedClusterBase struct {
	mu          sync.Mutex
	workloadGen uint64
	nsGen       uint64
	policyUID   string
	policyGen   int64
	base        *workload.Base
	policy      *v1alpha1.ClusterRetryPolicy
	used        atomic.Int64
}

// ClusterScope returns the namespaces p selects among those the index knows (their labels from
// the Namespace informer), computed once per generation of p and of the labels; the error names
// the policy and its bad selector.
func (x *Index) ClusterScope(p *v1alpha1.ClusterRetryPolicy) (*workload.ClusterScope, error) {
	var nsGen uint64
	x.nsMu.RLock()
	nsGen = x.nsGen
	x.nsMu.RUnlock()
	x.clMu.Lock()
	e := x.scopes[p.Name]
	x.clMu.Unlock()
	if e != nil && e.uid == string(p.UID) && e.gen == p.Generation && e.nsGen == nsGen {
		return e.scope, e.err
	}
	e = &scopeEntry{uid: string(p.UID), gen: p.Generation}
	x.NamespaceLabels(func(labels map[string]map[string]string, gen uint64) {
		e.nsGen = gen
		e.scope, e.err = workload.NewClusterScope(p, labels)
	})
	x.clMu.Lock()
	if x.scopes == nil {
		x.scopes = map[string]*scopeEntry{}
	}
	x.scopes[p.Name] = e
	x.clMu.Unlock()
	return e.scope, e.err
}

// ClusterPolicyChanged follows a ClusterRetryPolicy's informer events: a new generation of a
// policy with a prepared graph is rebuilt in the background; a deleted policy's scope and graph
// are dropped.
func (x *Index) ClusterPolicyChanged(p *v1alpha1.ClusterRetryPolicy, deleted bool) {
	x.clMu.Lock()
	pb := x.cbases[p.Name]
	if deleted {
		delete(x.scopes, p.Name)
		delete(x.cbases, p.Name)
	}
	x.clMu.Unlock()
	if pb == nil || deleted {
		return
	}
	pb.mu.Lock()
	stale := pb.policyGen != p.Generation || pb.policyUID != string(p.UID)
	if stale {
		pb.policy = p
	}
	pb.mu.Unlock()
	if stale {
		x.markClusterDirty()
	}
}

// namespaceChanged follows a change of the namespaces' labels: the scopes are recomputed on
// next use (nsGen), the prepared cluster graphs rebuilt.
func (x *Index) namespaceChanged() { x.clusterChanged() }

// clusterChanged records a change to some namespace's workloads, Services or labels: every
// prepared cluster graph is stale. Cheap when there are none.
func (x *Index) clusterChanged() {
	x.workloadGen.Add(1)
	x.clMu.Lock()
	prepared := len(x.cbases) > 0
	x.clMu.Unlock()
	if prepared {
		x.markClusterDirty()
	}
}

func (x *Index) markClusterDirty() {
	x.clusterDirty.Store(true)
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// ScopeLen is the number of workloads of the namespaces s selects.
func (x *Index) ScopeLen(s *workload.ClusterScope) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	total := 0
	for _, ns := range s.Namespaces() {
		if n := x.byNS[ns]; n != nil {
			total += len(n.items)
		}
	}
	return total
}

// WantsClusterBase is WantsBase for a cluster policy over scope s: the relevant workloads are
// many and a large share of those of s.
func (x *Index) WantsClusterBase(s *workload.ClusterScope, relevant int) bool {
	return relevant >= baseMinWorkloads && relevant*baseShare >= x.ScopeLen(s)
}

// ClusterBase returns p's prepared graph of every workload of the namespaces s selects, built on
// first use and again after a change to the workloads, the Services, the namespaces' labels or
// the policy; nil when s selects no workloads.
func (x *Index) ClusterBase(p *v1alpha1.ClusterRetryPolicy, s *workload.ClusterScope) *workload.Base {
	x.clMu.Lock()
	if x.cbases == nil {
		x.cbases = map[string]*preparedClusterBase{}
	}
	pb := x.cbases[p.Name]
	if pb == nil {
		pb = &preparedClusterBase{}
		x.cbases[p.Name] = pb
	}
	x.clMu.Unlock()
	pb.used.Store(time.Now().UnixNano())
	return x.buildCluster(pb, p)
}

// buildCluster returns pb's graph, building it if anything it depends on changed since.
func (x *Index) buildCluster(pb *preparedClusterBase, p *v1alpha1.ClusterRetryPolicy) *workload.Base {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	pb.policy = p
	s, err := x.ClusterScope(p)
	if err != nil {
		return nil
	}
	x.nsMu.RLock()
	nsGen := x.nsGen
	x.nsMu.RUnlock()
	x.mu.RLock()
	// Read under the index's lock, with the workloads it counts.
	gen := x.workloadGen.Load()
	if pb.base != nil && pb.workloadGen == gen && pb.nsGen == nsGen && pb.policyUID == string(p.UID) && pb.policyGen == p.Generation {
		x.mu.RUnlock()
		return pb.base
	}
	var ps []*workload.Parsed
	var svcs []workload.Service
	for _, ns := range s.Namespaces() {
		n := x.byNS[ns]
		if n == nil {
			continue
		}
		for _, e := range n.sorted {
			ps = append(ps, e.p)
		}
		if n.set != nil {
			svcs = append(svcs, n.set.List()...)
		}
	}
	meshSet := x.Mesh()
	x.mu.RUnlock()
	if len(ps) == 0 {
		return nil
	}
	// Sorted by workload.Compare (namespace first) as NewBase wants: the namespaces in
	// name order (Namespaces), each sorted.
	var set *workload.ServiceSet
	if len(svcs) > 0 {
		set = workload.NewServiceSet(svcs)
	}
	pb.base = workload.NewBase(workload.ForClusterRetryPolicy(p, s), ps, set, meshSet)
	pb.workloadGen, pb.nsGen, pb.policyUID, pb.policyGen = gen, nsGen, string(p.UID), p.Generation
	return pb.base
}

// refreshCluster rebuilds the stale prepared cluster graphs, and drops those no request used
// since now - baseIdle.
func (x *Index) refreshCluster(now time.Time) {
	if !x.clusterDirty.Swap(false) {
		return
	}
	var jobs []*preparedClusterBase
	x.clMu.Lock()
	for name, pb := range x.cbases {
		if now.UnixNano()-pb.used.Load() > int64(x.baseIdle) {
			delete(x.cbases, name)
			continue
		}
		jobs = append(jobs, pb)
	}
	x.clMu.Unlock()
	for _, pb := range jobs {
		pb.mu.Lock()
		p := pb.policy
		pb.mu.Unlock()
		if p != nil {
			x.buildCluster(pb, p)
		}
	}
}
