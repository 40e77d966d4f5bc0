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
// it is not, the fix text says so: what to do by hand (a layer no object declares), or, when
// even that leaves the chain over, "no rewrite fits" with the fewest it carries (or the client
// attempts). The status's fix text names every change the patch makes (they agree).
// Before, the planner kept an edge's tries where the edge below could not give what was left
// (two Gateway API rules, 3 x 3 over cap 4: 3 x 2 left) and Split lowered one layer per edge.
func TestPropertyChainFixFitsWheneverAFitExists(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 5))
	fits, unfit, byHandUnfit := 0, 0, 0
	for i := range 4000 {
		n := 1 + r.IntN(4)
		k := 1 + r.Int64N(2)
		cap := 1 + r.Int64N(12)
		g := graph.New()
		res := &Result{Graph: g, Cap: cap, MeshEdges: map[[2]string]MeshEdge{}}
		fewest, byHand := k, k
		for j := range n {
			from, to := fmt.Sprintf("s%d", j), fmt.Sprintf("s%d", j+1)
			m := MeshEdge{From: from, To: to, App: 1 + r.Int64N(3), Caller: "Deployment shop/" + from}
			for l := range 1 + r.IntN(3) {
				m.Layers = append(m.Layers, randomLayer(r, fmt.Sprintf("%s-%d", to, l)))
			}
			g.AddEdge(from, to, m.Attempts(), 1)
			res.MeshEdges[[2]string{from, to}] = m
			f, h := mesh.Fewest(m.Layers)
			fewest, byHand = graph.Mul(fewest, f), graph.Mul(byHand, h)
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
		// No patch fits. Even by hand (each default declared at 1 try), or the fix names what to
		// do by hand.
		want := "no object declares"
		if byHand > cap {
			want = fmt.Sprintf("no rewrite fits: with every retry at its fewest this chain carries %d > cap %d", byHand, cap)
			if k > cap {
				want = fmt.Sprintf("no rewrite fits: client attempts %d at entrypoint s0 exceed cap %d", k, cap)
			}
			byHandUnfit++
		}
		if !strings.Contains(fix, want) {
			t.Fatalf("case %d: cap %d, fewest %d (%d by hand) > cap, and the fix %q does not say %q", i, cap, fewest, byHand, fix, want)
		}
	}
	if fits < 500 || unfit < 500 || byHandUnfit < 200 {
		t.Fatalf("%d fitting, %d unfit chains (%d even by hand): the generator covers too little", fits, unfit, byHandUnfit)
	}
}

// The fix text of a chain of meshed edges, exactly: a fit by patch; no fit by patch but by hand
// (a default to declare); no fit at all.
func TestChainFixText(t *testing.T) {
	rule := func(n string) mesh.Layer {
		return mesh.Layer{Kind: mesh.GAMMA, Object: "HTTPRoute shop/" + n, FieldPath: "spec.rules[0].retry", Tries: 3, Default: true, Unset: 3, Note: "Istio default, HTTPRoute shop/" + n + " spec.rules[0] sets no retry"}
	}
	def := func(n string) mesh.Layer {
		return mesh.Layer{Kind: mesh.Istio, Tries: 3, Default: true, Note: "Istio default, no VirtualService binds " + n}
	}
	const ruleErr = "HTTPRoute shop/db spec.rules[0].retry cannot give 1 try: the Gateway API CRD's retry.attempts is at least 1 (2 tries), and without retry the rule gets 3 tries; set HTTPRoute shop/db spec.rules[0].retry.attempts: 1 (2 tries, its fewest), or raise the policy's spec.maxAmplification"
	cases := []struct {
		name     string
		cap      int64
		cart, db mesh.Layer
		app      int64 // frontend's attempts on cart
		want     string
	}{
		{"two rules fit", 4, rule("cart"), rule("db"), 2,
			"frontend: cart=1; HTTPRoute shop/cart spec.rules[0].retry.attempts: unset (2) -> 1; HTTPRoute shop/db spec.rules[0].retry.attempts: unset (2) -> 1"},
		{"two rules, cap 3: no fit", 3, rule("cart"), rule("db"), 2,
			"frontend: cart=1; HTTPRoute shop/cart spec.rules[0].retry.attempts: unset (2) -> 1; frontend -> cart: Istio default, HTTPRoute shop/cart spec.rules[0] sets no retry: " + strings.ReplaceAll(ruleErr, "shop/db", "shop/cart") +
				"; HTTPRoute shop/db spec.rules[0].retry.attempts: unset (2) -> 1; cart -> db: Istio default, HTTPRoute shop/db spec.rules[0] sets no retry: " + ruleErr + "; no rewrite fits: with every retry at its fewest this chain carries 4 > cap 3"},
		{"a default below a rule: by hand", 2, rule("cart"), def("db"), 1,
			"HTTPRoute shop/cart spec.rules[0].retry.attempts: unset (2) -> 1; cart -> db: Istio default, no VirtualService binds db: no object declares these 3 tries, the mesh's default: declare the retries on the callee (a VirtualService route with retries.attempts: 0), or lower the default of every route that sets none (MeshConfig defaultHttpRetryPolicy.attempts: 0, ConfigMap istio-system/istio data.mesh)"},
		// A default whose 3 tries fit under cap 6: the planner keeps them and lowers the rule
		// above (before: the rule kept 3, the default was asked for 2, which no object gives).
		{"a default kept, the rule above lowered", 6, rule("cart"), def("db"), 1,
			"HTTPRoute shop/cart spec.rules[0].retry.attempts: unset (2) -> 1"},
	}
	for _, c := range cases {
		g := graph.New()
		cart := MeshEdge{From: "frontend", To: "cart", App: c.app, Caller: "Deployment shop/frontend", Layers: []mesh.Layer{c.cart}}
		db := MeshEdge{From: "cart", To: "db", App: 1, Caller: "Deployment shop/cart", Layers: []mesh.Layer{c.db}}
		g.AddEdge("frontend", "cart", cart.Attempts(), 1)
		g.AddEdge("cart", "db", db.Attempts(), 1)
		g.SetEntrypoint("frontend", 1)
		r := &Result{Graph: g, Cap: c.cap, MeshEdges: map[[2]string]MeshEdge{{"frontend", "cart"}: cart, {"cart", "db"}: db}}
		a := graph.Analyze(g, c.cap)
		r.ExplainMesh(a)
		if len(a.Violations) != 1 || a.Violations[0].Suggestion != c.want {
			var got []string
			for _, v := range a.Violations {
				got = append(got, v.Suggestion)
			}
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
