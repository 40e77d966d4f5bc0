package graph

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// bruteThrough is the worst product over the simple paths from an entrypoint that leave svc by
// one of its edges (to: that edge only; "": any), and the worst over simple paths of at least
// one edge from any entrypoint.
func bruteThrough(g *Graph, ents []Entrypoint, svc, to string) (through, any int64) {
	for _, en := range ents {
		on := map[string]bool{}
		var walk func(v string, prod int64, via bool)
		walk = func(v string, prod int64, via bool) {
			on[v] = true
			for _, e := range g.OutEdges(v) {
				if on[e.To] {
					continue
				}
				x := mul(prod, e.Attempts)
				any = max(any, x)
				v2 := via || v == svc && (to == "" || e.To == to)
				if v2 {
					through = max(through, x)
				}
				walk(e.To, x, v2)
			}
			on[v] = false
		}
		walk(en.Service, en.ClientAttempts, false)
	}
	return through, any
}

// TestPropertyJudgeSimplePaths is the differential test of the gate and the status on graphs
// with cycles (no self-loops: a retrying one makes the status unbounded as a whole): Judge's
// amplification for every service is the worst simple chain through its edges, by brute force;
// the worst over the services is Analyze's worst chain of at least one edge, so the gate
// refuses some service exactly when the status is over the cap; Judge names a chain of that
// product; and PlanLocal's values are the largest that fit.
func TestPropertyJudgeSimplePaths(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 29))
	judged, over, planned := 0, 0, 0
	for i := range 1000 {
		n := 3 + r.IntN(8)
		g := randomDAG(r, n, 3)
		for range 1 + r.IntN(3) {
			from := 1 + r.IntN(n-1)
			g.AddEdge(name(from), name(r.IntN(from)), 1+r.Int64N(3), 1)
		}
		capV := 1 + r.Int64N(12)
		a := Analyze(g, capV)
		worstJudged := int64(0)
		anyOver := false
		var bruteAny int64
		for k := range n {
			svc := name(k)
			if len(g.OutEdges(svc)) == 0 {
				continue
			}
			j := Judge(g, capV, svc)
			want, anyP := bruteThrough(g, a.Entrypoints, svc, "")
			bruteAny = anyP
			if j.Amplification != want || j.Over != (want > capV) || j.Cycle != nil || j.Bound != "" {
				t.Fatalf("graph %d: Judge(%s) = %d over %v cycle %v, simple paths through it give %d (%v, cap %d)", i, svc, j.Amplification, j.Over, j.Cycle, want, g.Edges(), capV)
			}
			judged++
			if want == 0 {
				continue
			}
			checkPath(t, g, j.Path, j.Factors, j.Amplification)
			if !slices.Contains(j.Path, svc) || j.Path[len(j.Path)-1] == svc && !strings.HasSuffix(strings.Join(j.Path, ">"), svc+">"+svc) {
				t.Fatalf("graph %d: Judge(%s) names %v, not a chain through its edges", i, svc, j.Path)
			}
			worstJudged = max(worstJudged, j.Amplification)
			anyOver = anyOver || j.Over
			if !j.Over {
				continue
			}
			over++
			plan, err := PlanLocal(g, capV, svc)
			if (err == nil) != plan.Fits {
				t.Fatalf("graph %d: PlanLocal(%s) error %v, fits %v", i, svc, err, plan.Fits)
			}
			for _, ed := range g.OutEdges(svc) {
				newA, ok := plan.New(svc, ed.To)
				if !ok {
					t.Fatalf("graph %d: the plan misses %s -> %s", i, svc, ed.To)
				}
				g.SetEdge(svc, ed.To, newA, ed.Calls)
				through, _ := bruteThrough(g, a.Entrypoints, svc, ed.To)
				if through > capV && (newA > 1 || plan.Fits) {
					t.Fatalf("graph %d: %s -> %s at %d still %d > cap %d (plan %+v)", i, svc, ed.To, newA, through, capV, plan)
				}
				if newA < ed.Attempts && through <= capV {
					g.SetEdge(svc, ed.To, newA+1, ed.Calls)
					if up, _ := bruteThrough(g, a.Entrypoints, svc, ed.To); up <= capV {
						t.Fatalf("graph %d: %s -> %s fits at %d, the plan says %d", i, svc, ed.To, newA+1, newA)
					}
				}
				g.SetEdge(svc, ed.To, ed.Attempts, ed.Calls)
			}
			planned++
		}
		if worstJudged != bruteAny {
			t.Fatalf("graph %d: the gate's worst %d, simple chains of an edge %d", i, worstJudged, bruteAny)
		}
		statusOver := len(a.Violations) > 0 && len(a.Violations[0].Path) > 1
		if bruteAny <= capV && anyOver || bruteAny > capV && !anyOver || statusOver && !anyOver {
			t.Fatalf("graph %d: the status says over %v (amplification %d), the gate refuses some service %v (worst %d)", i, statusOver, a.Amplification, anyOver, worstJudged)
		}
	}
	if judged < 3000 || over < 500 || planned < 500 {
		t.Fatalf("judged %d, over %d, planned %d: too few", judged, over, planned)
	}
	t.Logf("judged %d services, %d over, %d plans checked", judged, over, planned)
}

// The cases the gate meets on a graph with cycles: a two-service cycle with retries is no call
// loop, a retrying self-loop on the service's cycle is one, and another service's retrying
// self-loop elsewhere does not concern the service's chains.
func TestJudgeCycleCases(t *testing.T) {
	tests := []struct {
		name    string
		edges   []e
		service string
		cap     int64
		msg     string
	}{
		{
			// web -x2-> a -x3-> b -x2-> db = 12; no chain goes round a -> b -> a, so b's edge to
			// a is on none, and the way into b is 6 > 4 on its own.
			name: "A calls B for one endpoint, B calls A for another", service: "b", cap: 4,
			edges: []e{{"web", "a", 2, 1}, {"a", "b", 3, 1}, {"b", "a", 3, 1}, {"b", "db", 2, 1}},
			msg:   "RetryPolicy shop/checkout: web -x2-> a -x3-> b -x2-> db = 12 > cap 4; no rewrite fits: even with b: db=1, web -x2-> a -x3-> b -x1-> db = 6 > cap 4",
		},
		{
			// Through a's edge to b: web -x2-> a -x3-> b -x2-> db; b=1: 4 <= 4.
			name: "the other side of the cycle", service: "a", cap: 4,
			edges: []e{{"web", "a", 2, 1}, {"a", "b", 3, 1}, {"b", "a", 3, 1}, {"b", "db", 2, 1}},
			msg:   "RetryPolicy shop/checkout: web -x2-> a -x3-> b -x2-> db = 12 > cap 4; a may keep b=1",
		},
		{
			name: "a retrying self-loop on the service's cycle", service: "a", cap: 4,
			edges: []e{{"web", "a", 1, 1}, {"a", "b", 1, 1}, {"b", "a", 1, 1}, {"b", "b", 2, 1}},
			msg:   "RetryPolicy shop/checkout: retry cycle b -x2-> b: amplification unbounded; no rewrite fits: retry cycle b -x2-> b retries on b's edge to b, which a cannot change",
		},
		{
			name: "the service's own retrying self-loop", service: "b", cap: 4,
			edges: []e{{"web", "a", 1, 1}, {"a", "b", 1, 1}, {"b", "a", 1, 1}, {"b", "b", 2, 1}},
			msg:   "RetryPolicy shop/checkout: retry cycle b -x2-> b: amplification unbounded; b may keep b=1",
		},
		{
			// x's self-loop is on no chain through a.
			name: "a retrying self-loop elsewhere", service: "a", cap: 4,
			edges: []e{{"web", "a", 2, 1}, {"a", "b", 2, 1}, {"web", "x", 1, 1}, {"x", "x", 3, 1}},
			msg:   "RetryPolicy shop/checkout: web -x2-> a -x2-> b = 4 <= cap 4",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := build([]string{"web"}, tc.edges, []ep{{"web", 1}})
			j := Judge(g, tc.cap, tc.service)
			var plan *Plan
			if j.Over {
				plan, _ = PlanLocal(g, tc.cap, tc.service)
			}
			if got := AdmissionMessage("shop/checkout", j, plan); got != tc.msg {
				t.Errorf("got\n%s\nwant\n%s", got, tc.msg)
			}
		})
	}
}
