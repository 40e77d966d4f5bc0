package gate

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// meshState is the mesh retry layers the prepared graphs are built with: the manager's current
// Set (meshwatch.Watcher.Set), swapped in by SetMesh on every change of it.
type meshState struct {
	meshSet atomic.Pointer[mesh.Set]
}

// Mesh is the Set the index's prepared graphs are built with (nil: none).
func (x *Index) Mesh() *mesh.Set { return x.meshSet.Load() }

// SetMesh makes set the mesh layers of the prepared graphs (meshwatch.Watcher.OnChange calls it
// with the new Set): every prepared graph, of a namespace or of a cluster policy, is stale and
// rebuilt in the background, as after a change to the workloads. Until it is, Decide builds the
// request's graph with the request's Set rather than judge on a graph of other layers.
func (x *Index) SetMesh(set *mesh.Set) {
	if x.meshSet.Swap(set) == set {
		return
	}
	x.mu.Lock()
	for ns, n := range x.byNS {
		if len(n.bases) > 0 {
			n.gen++
			x.markDirty(ns)
		}
	}
	x.mu.Unlock()
	x.clusterChanged()
}

// meshVerdict is v with the mesh layers of its path (the message names them) and its plan in
// the application's terms: the plan lowers the edges' attempts, which with a mesh are the
// application's attempts times the layers' tries, while the workload's annotation sets only
// the former. A planned value n on an edge of t tries per attempt is n/t attempts; below 1, the
// layers alone exceed what the cap leaves the edge, and no rewrite of the annotation fits (it
// is lowered to 1, as far as it goes). r is the graph v was judged on.
func meshVerdict(v verdict, r *workload.Result, incoming *workload.Parsed) verdict {
	if r.Mesh() == nil {
		return v
	}
	v.layers = r.ExplainJudgement(v.judge, incoming, v.node)
	if v.plan == nil || len(v.plan.Changes) == 0 {
		return v
	}
	edges := r.IncomingEdges(incoming, v.node)
	plan := *v.plan
	plan.Changes = slices.Clone(plan.Changes)
	for i, ch := range plan.Changes {
		if ch.From != v.node {
			continue
		}
		for _, e := range edges {
			t := e.Attempts() / e.App
			if e.To != ch.To || t <= 1 {
				continue
			}
			app := ch.New / t
			if app < 1 {
				if plan.Fits {
					plan.Fits = false
					plan.Reason = fmt.Sprintf("even with %s: %s=1 the edge is %d tries (the mesh's layers) where the cap leaves it %d: lower the mesh's retries on it", v.node, ch.To, t, ch.New)
				}
				app = 1
			}
			plan.Changes[i].Old, plan.Changes[i].New = e.App, app
			break
		}
	}
	v.plan = &plan
	return v
}
