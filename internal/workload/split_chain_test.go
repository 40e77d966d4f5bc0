package workload

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
)

// randomLayer is a VirtualService field (1-5 tries), a Gateway API rule under Istio (3 tries,
// its fewest 2), a rule whose block's removal gives 1 (2-5 tries), or Istio's default no object
// declares (3 tries, not the patch's to lower).
func randomLayer(r *rand.Rand, name string) mesh.Layer {
	switch r.IntN(4) {
	case 0:
		return mesh.Layer{Kind: mesh.Istio, Object: "VirtualService shop/" + name, FieldPath: "spec.http[0].retries.attempts", Tries: 1 + r.Int64N(5), Note: "VirtualService shop/" + name}
	case 1:
		return mesh.Layer{Kind: mesh.GAMMA, Object: "HTTPRoute shop/" + name, FieldPath: "spec.rules[0].retry", Tries: 3, Default: true, Unset: 3, Note: "Istio default, HTTPRoute shop/" + name + " spec.rules[0] sets no retry"}
	case 2:
		return mesh.Layer{Kind: mesh.GAMMA, Object: "HTTPRoute shop/" + name + "-l", FieldPath: "spec.rules[0].retry.attempts", Tries: 2 + r.Int64N(4), Unset: 1, Note: "HTTPRoute shop/" + name + "-l"}
	}
	return mesh.Layer{Kind: mesh.Istio, Tries: 3, Default: true, Note: "Istio default, no VirtualService binds " + name}
}

// On random chains of edges with 1-3 layers each, the caller's annotation and a cap, the fix
// applied as -o patch applies it (the combined plan, PlanFix, each lowered edge split by
// mesh.Split) leaves the chain within the cap whenever the fewest it can carry (client attempts,
// each annotation at 1, each field at its fewest, each default as it is) is within the cap; when
// it is not, the fix text names why (a field that cannot give fewer, a layer no object declares,
// the client attempts). The status's fix text names every change the patch makes (they agree).
// Before, the planner kept an edge's tries where the edge below could not give what was left
// (two Gateway API rules, 3 x 3 over cap 4: 3 x 2 left) and Split lowered one layer per edge.
func TestPropertyChainFixFitsWheneverAFitExists(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 5))
	fits, unfit := 0, 0
	for i := range 4000 {
		n := 1 + r.IntN(4)
		k := 1 + r.Int64N(2)
		cap := 1 + r.Int64N(12)
		g := graph.New()
		res := &Result{Graph: g, Cap: cap, MeshEdges: map[[2]string]MeshEdge{}}
		fewest := k
		for j := range n {
			from, to := fmt.Sprintf("s%d", j), fmt.Sprintf("s%d", j+1)
			m := MeshEdge{From: from, To: to, App: 1 + r.Int64N(3), Caller: "Deployment shop/" + from}
			for l := range 1 + r.IntN(3) {
				m.Layers = append(m.Layers, randomLayer(r, fmt.Sprintf("%s-%d", to, l)))
			}
			g.AddEdge(from, to, m.Attempts(), 1)
			res.MeshEdges[[2]string{from, to}] = m
			f, _ := mesh.Fewest(m.Layers)
			fewest = graph.Mul(fewest, f)
		}
		g.SetEntrypoint("s0", k)
		a := graph.Analyze(g, cap)
		fp := res.PlanFix(a)
		res.ExplainMesh(a)
		fix := ""
		if len(a.Violations) > 0 {
			fix = a.Violations[0].Suggestion
		}
		got := k
		for j := range n {
			from, to := fmt.Sprintf("s%d", j), fmt.Sprintf("s%d", j+1)
			m := res.MeshEdges[[2]string{from, to}]
			carried := m.Attempts()
			if v, ok := fp.Plan.New(from, to); ok && v < carried {
				sp := mesh.Split(m.App, m.Layers, v)
				if sp.Meshed {
					carried = sp.Carries
				} else {
					carried = sp.App
				}
				if sp.App < m.App && !strings.Contains(fix, fmt.Sprintf("%s: %s=%d", from, to, sp.App)) {
					t.Fatalf("case %d: the patch lowers %s -> %s to %d; the fix says %q", i, from, to, sp.App, fix)
				}
				for _, lf := range sp.Layers {
					if lf.Rewrite != nil && !strings.Contains(fix, lf.Rewrite.Suggestion) {
						t.Fatalf("case %d: the patch writes %q; the fix says %q", i, lf.Rewrite.Suggestion, fix)
					}
				}
			}
			got = graph.Mul(got, carried)
		}
		if fewest <= cap {
			fits++
			if got > cap {
				t.Fatalf("case %d: cap %d, fewest %d fits, the patch leaves %d; fix %q; edges %v", i, cap, fewest, got, fix, res.MeshEdges)
			}
			continue
		}
		unfit++
		if !strings.Contains(fix, "cannot give") && !strings.Contains(fix, "no object declares") && !strings.Contains(fix, "no rewrite fits") {
			t.Fatalf("case %d: cap %d, fewest %d > cap, and the fix %q says no why", i, cap, fewest, fix)
		}
	}
	if fits < 500 || unfit < 500 {
		t.Fatalf("%d fitting, %d unfit chains: the generator covers too little", fits, unfit)
	}
}
