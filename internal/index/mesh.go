package index

import (
	"sync/atomic"

	"github.com/retrycap/retrycap/internal/mesh"
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
