package workload

import (
	"fmt"
	"testing"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
)

// BenchmarkPlanFixFloors is the combined fix of 10,000 edges under Istio's default (3 tries no
// object declares: every edge has a floor of 3, and no patch fits, so the plan is made twice),
// which the status's fix text computes for a graph over its cap: the floors (one mesh.Fewest per
// edge) and the plans, mostly their maps. Measured on the branch (2 shared cores, noisy): 7.6 to
// 12 ms per run, 20.6 ms before mesh.Fewest's fast path for a layer without a field (the
// refusal's text was built for every edge); graph.Analyze of the same graph: 0.64 ms. Before
// the branch the status computed no plan here (0 ms) and its fix lowered edges their layers
// could not lower.
func BenchmarkPlanFixFloors(b *testing.B) {
	g := graph.New()
	r := &Result{Graph: g, Cap: 4, MeshEdges: map[[2]string]MeshEdge{}}
	for i := range 10000 {
		from, to := fmt.Sprintf("s%d", i/4), fmt.Sprintf("s%d", i+1)
		l := mesh.Layer{Kind: mesh.Istio, Tries: 3, Default: true, Note: "Istio default, no VirtualService binds " + to}
		g.AddEdge(from, to, 3, 1)
		r.MeshEdges[[2]string{from, to}] = MeshEdge{From: from, To: to, App: 1, Layers: []mesh.Layer{l}}
	}
	g.SetEntrypoint("s0", 1)
	a := graph.Analyze(g, 4)
	if a.WithinCap() {
		b.Fatal("within the cap: nothing to fix")
	}
	b.ResetTimer()
	for range b.N {
		if !r.hasFloors() || r.PlanFix(a).Plan == nil {
			b.Fatal("no floors, or no plan")
		}
	}
}

// BenchmarkAnalyzeFloorsGraph is graph.Analyze of BenchmarkPlanFixFloors's graph: the scale the
// fix's cost is read against.
func BenchmarkAnalyzeFloorsGraph(b *testing.B) {
	g := graph.New()
	for i := range 10000 {
		g.AddEdge(fmt.Sprintf("s%d", i/4), fmt.Sprintf("s%d", i+1), 3, 1)
	}
	g.SetEntrypoint("s0", 1)
	b.ResetTimer()
	for range b.N {
		if graph.Analyze(g, 4).WithinCap() {
			b.Fatal("within the cap")
		}
	}
}
