package workload

import (
	"fmt"
	"strings"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
)

// The admission gate's view of the mesh layers: the prepared graphs and the judged builds carry
// the Set they were built with, and the incoming workload's edges are computed with its layers
// without recording them in a shared Result (a Base is read by concurrent requests).

// Mesh is the Set b was built with (nil: none): a verdict on b counts exactly its layers.
func (b *Base) Mesh() *mesh.Set { return b.r.mesh }

// Result is b's graph as built: what the gate explains a verdict on b with.
func (b *Base) Result() *Result { return b.r }

// Mesh is the Set r was built with (nil: none).
func (r *Result) Mesh() *mesh.Set { return r.mesh }

// IncomingEdges are x's edges out of node as r's graph carries them (or would, for a workload
// judged against a prepared graph): the upstream's node, the application's attempts (the
// policy's default where unwritten) and the mesh layers on the call (none without a Set, or for
// a caller outside the mesh). Nothing is recorded in r.
func (r *Result) IncomingEdges(x *Parsed, node string) []MeshEdge {
	if len(x.upstreams) == 0 {
		return nil
	}
	def := defaultAttempts(r.Spec())
	w := x.Workload
	caller := w.meshCaller()
	out := make([]MeshEdge, len(x.upstreams))
	for i, u := range x.upstreams {
		a, _ := edgeValues(u, def)
		out[i] = MeshEdge{From: node, To: r.upstreamNode(x, i), App: a, Caller: w.Kind + " " + w.Name}
		if r.mesh != nil {
			out[i].Layers = r.mesh.EdgePort(caller, u.Name, u.Port).Layers
		}
	}
	return out
}

// ExplainJudgement is ExplainMesh for the gate's verdict: the layers of each multiplied factor
// of j's worst path ("productpage -x3-> reviews: 3 = 1 (Deployment productpage) x 3 (Istio
// default, no VirtualService binds reviews)"), joined by "; ", the edges out of node being
// incoming's (IncomingEdges); "" when no factor on the path is multiplied.
func (r *Result) ExplainJudgement(j *graph.Judgement, incoming *Parsed, node string) string {
	if j == nil || len(j.Path) == 0 || r.mesh == nil {
		return ""
	}
	own := r.IncomingEdges(incoming, node)
	var ex []string
	for k, n := range j.Path {
		var m MeshEdge
		var ok bool
		switch {
		case k == 0:
			m, ok = r.MeshEntry[n]
		case j.Path[k-1] == node:
			for _, e := range own {
				if e.To == n {
					m, ok = e, true
					break
				}
			}
		default:
			m, ok = r.MeshEdges[[2]string{j.Path[k-1], n}]
		}
		if !ok || !m.Multiplied() {
			continue
		}
		from := m.From
		if k == 0 {
			from = "client"
		}
		ex = append(ex, fmt.Sprintf("%s -x%d-> %s: %s", from, m.Attempts(), n, m.Explain()))
	}
	return strings.Join(ex, "; ")
}

// RaisesMeshRetries reports whether updating old to incoming raises the mesh tries on one of
// incoming's calls (its pod template joins a mesh: the label sidecar.istio.io/inject "true", the annotation
// linkerd.io/inject enabled): the gate judges such an update even when the attempts it writes are unchanged. False
// without a Set.
func RaisesMeshRetries(set *mesh.Set, old, incoming Workload) bool {
	if set == nil {
		return false
	}
	ups, err := Upstreams(incoming, incoming.Namespace, 1)
	if err != nil {
		return false
	}
	oc := old.meshCaller()
	nc := incoming.meshCaller()
	for _, u := range ups {
		if set.EdgePort(nc, u.Name, u.Port).Tries() > set.EdgePort(oc, u.Name, u.Port).Tries() {
			return true
		}
	}
	return false
}
