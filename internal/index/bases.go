package index

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// A policy's prepared graph of a namespace (workload.Base) lets the gate judge a request whose
// chains reach much of a large namespace in the time its paths take, instead of building and
// analysing the graph of thousands of services per request. It is valid for one generation of
// the namespace's workloads and of the policy: the first request after a change would pay for
// the build, so Refresh rebuilds the stale ones in the background, shortly after the change to a
// workload (changed) or to the policy (PolicyChanged).

// preparedBase is one policy's workload.Base, built for one generation of the namespace and
// of the policy. mu makes concurrent requests wait for one build rather than each building.
type preparedBase struct {
	mu        sync.Mutex
	gen       uint64
	policyUID string
	policyGen int64
	base      *workload.Base
	// policy is the policy it was last asked for (refresh rebuilds for it); used is when, in
	// Unix nanoseconds (refresh drops a graph no request used for baseIdle).
	policy *v1alpha1.RetryPolicy
	used   atomic.Int64
}

// Refresh timing: a burst of changes (a rollout, a namespace's initial list) is let settle for
// refreshDelay and costs one rebuild; a prepared graph no request used for defaultBaseIdle (its
// policy deleted, say) is dropped rather than rebuilt.
const (
	refreshDelay    = 50 * time.Millisecond
	defaultBaseIdle = 10 * time.Minute
)

// baseMinWorkloads and baseShare decide when the gate judges against a policy's prepared graph
// of the whole namespace (Base) instead of building the graph of a request's relevant workloads:
// when they are at least baseMinWorkloads and at least 1/baseShare of the namespace. Below that,
// building the subset costs less than rebuilding the namespace's graph after it changed; above
// it, a request costs the length of its paths instead of the size of the namespace, and a
// rebuild after a change costs at most baseShare times the subset's build, once.
const (
	baseMinWorkloads = 256
	baseShare        = 4
)

// WantsBase reports whether a request judging relevant workloads of ns should use Base.
func (x *Index) WantsBase(ns string, relevant int) bool {
	return relevant >= baseMinWorkloads && relevant*baseShare >= x.Len(ns)
}

// RelevantCount is about len(RelevantParsed(ns, svcs, ups)), without building the list (a
// workload reached under several nodes counts once per node).
func (x *Index) RelevantCount(ns string, svcs, ups []string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := x.byNS[ns]
	if n == nil {
		return 0
	}
	_, visited := n.reach(svcs, ups)
	count := 0
	for _, id := range visited {
		count += len(n.services[id].keys)
	}
	return count
}

// Base returns p's prepared graph of all of ns's workloads (workload.NewBase), built on first
// use and again after the namespace or the policy's spec changed; nil when ns has no workloads.
// Requests of one policy share one build.
func (x *Index) Base(ns string, p *v1alpha1.RetryPolicy) *workload.Base {
	key := p.Namespace + "/" + p.Name
	x.mu.RLock()
	n := x.byNS[ns]
	var pb *preparedBase
	if n != nil {
		pb = n.bases[key]
	}
	x.mu.RUnlock()
	if n == nil {
		return nil
	}
	if pb == nil {
		x.mu.Lock()
		if n.bases == nil {
			n.bases = map[string]*preparedBase{}
		}
		if pb = n.bases[key]; pb == nil {
			pb = &preparedBase{}
			n.bases[key] = pb
		}
		x.mu.Unlock()
	}

	pb.used.Store(time.Now().UnixNano())
	return x.build(n, pb, p)
}

// build returns pb's graph, building it if the namespace or the policy changed since.
func (x *Index) build(n *nsWorkloads, pb *preparedBase, p *v1alpha1.RetryPolicy) *workload.Base {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	pb.policy = p
	x.mu.RLock()
	gen := n.gen
	if pb.base != nil && pb.gen == gen && pb.policyUID == string(p.UID) && pb.policyGen == p.Generation {
		x.mu.RUnlock()
		return pb.base
	}
	ps := make([]*workload.Parsed, len(n.sorted))
	for i, e := range n.sorted {
		ps[i] = e.p
	}
	set := n.sharedSet()
	meshSet := x.Mesh()
	x.mu.RUnlock()
	// Built outside the index's lock: informer events go on meanwhile, and a change makes the
	// next request build again.
	pb.base = workload.NewBase(workload.ForRetryPolicy(p), ps, set, meshSet)
	pb.gen, pb.policyUID, pb.policyGen = gen, string(p.UID), p.Generation
	return pb.base
}

// changed records a change to n: its prepared graphs are stale, and refresh is woken to rebuild
// them. Called with x.mu held for writing.
func (n *nsWorkloads) changed(x *Index, ns string) {
	n.gen++
	if len(n.bases) > 0 {
		x.markDirty(ns)
	}
	x.clusterChanged()
}

// markDirty queues ns's prepared graphs for refresh and wakes it.
func (x *Index) markDirty(ns string) {
	x.dirtyMu.Lock()
	x.dirty[ns] = true
	x.dirtyMu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default: // already woken
	}
}

// policyChanged follows a RetryPolicy's informer events: a new generation of a policy with a
// prepared graph is rebuilt in the background, like a workload change; a deleted policy's graph
// is dropped.
func (x *Index) PolicyChanged(p *v1alpha1.RetryPolicy, deleted bool) {
	key := p.Namespace + "/" + p.Name
	x.mu.Lock()
	n := x.byNS[p.Namespace]
	var pb *preparedBase
	if n != nil {
		pb = n.bases[key]
		if pb != nil && deleted {
			delete(n.bases, key)
		}
	}
	x.mu.Unlock()
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
		x.markDirty(p.Namespace)
	}
}

// Refresh rebuilds the prepared graphs that changes made stale, off the request path, until ctx
// ends. Every replica that serves the webhooks runs it (internal/webhook adds it to the manager, not
// leader-elected): each serves from its own index.
func (x *Index) Refresh(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-x.wake:
		}
		settle := time.NewTimer(refreshDelay)
		select {
		case <-ctx.Done():
			settle.Stop()
			return nil
		case <-settle.C:
		}
		now := time.Now()
		x.refreshOnce(now)
		x.refreshCluster(now)
	}
}

// refreshOnce rebuilds the stale prepared graphs of the namespaces marked dirty, and drops those
// no request used since now - baseIdle.
func (x *Index) refreshOnce(now time.Time) {
	x.dirtyMu.Lock()
	dirty := x.dirty
	x.dirty = map[string]bool{}
	x.dirtyMu.Unlock()
	for ns := range dirty {
		type job struct {
			n  *nsWorkloads
			pb *preparedBase
		}
		var jobs []job
		x.mu.Lock()
		n := x.byNS[ns]
		if n != nil {
			for key, pb := range n.bases {
				if now.UnixNano()-pb.used.Load() > int64(x.baseIdle) {
					delete(n.bases, key)
					continue
				}
				jobs = append(jobs, job{n, pb})
			}
		}
		x.mu.Unlock()
		for _, j := range jobs {
			j.pb.mu.Lock()
			p := j.pb.policy
			j.pb.mu.Unlock()
			if p != nil {
				x.build(j.n, j.pb, p)
			}
		}
	}
}
