package graph

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// The two-rule chain the old planner could not fit: a -> b -> c, each edge 3 tries whose fewest
// is 2 (a Gateway API rule), cap 4. PlanRewrite keeps a -> b at 3 and asks b -> c for 1, which
// its field cannot give (3 x 2 = 6 > 4); with the floors a -> b keeps room for b -> c's 2.
func TestPlanRewriteFloors(t *testing.T) {
	g := New()
	g.AddEdge("a", "b", 3, 1)
	g.AddEdge("b", "c", 3, 1)
	g.SetEntrypoint("a", 1)
	old, err := PlanRewrite(g, 4)
	if err != nil || old.Attempts[EdgeKey{"a", "b"}] != 3 || old.Attempts[EdgeKey{"b", "c"}] != 1 {
		t.Fatalf("PlanRewrite: %v, %v", old.Attempts, err)
	}
	floors := map[EdgeKey]int64{{"a", "b"}: 2, {"b", "c"}: 2}
	p, err := PlanRewriteFloors(g, 4, nil, floors)
	if err != nil || !maps.Equal(p.Attempts, map[EdgeKey]int64{{"a", "b"}: 2, {"b", "c"}: 2}) || len(p.OverFloors) != 0 {
		t.Fatalf("PlanRewriteFloors: %v, over floors %v, %v", p.Attempts, p.OverFloors, err)
	}
	// Cap 3: 2 x 2 > 3, no plan fits; a -> b is asked for 1 (3 / 2), b -> c gets what 2 leaves.
	p, err = PlanRewriteFloors(g, 3, nil, floors)
	if err != nil || !maps.Equal(p.Attempts, map[EdgeKey]int64{{"a", "b"}: 1, {"b", "c"}: 1}) || !slices.Equal(p.OverFloors, []string{"a"}) {
		t.Fatalf("cap 3: %v, over floors %v, %v", p.Attempts, p.OverFloors, err)
	}
	for _, bad := range []map[EdgeKey]int64{{{"a", "c"}: 2}, {{"a", "b"}: 0}} {
		if _, err := PlanRewriteFloors(g, 4, nil, bad); err == nil {
			t.Errorf("floors %v: no error", bad)
		}
	}
	_, err = PlanRewriteFloors(g, 4, nil, map[EdgeKey]int64{{"x", "b"}: 2})
	if err == nil || err.Error() != "planning with floor 2 on edge x -> b: the floor must be at least 1, on an edge of the graph" {
		t.Errorf("unknown edge: %v", err)
	}
}

// On random DAGs with random floors (each at most its edge's attempts): the plan never raises a
// value; without floors above 1 it is PlanRewrite's; OverFloors are exactly the entrypoints
// some path from which, every edge at its floor, exceeds the cap; and when there are none, every
// path with each edge at max(planned, floor) (what the edge carries once its fix is applied) is
// within the cap.
func TestPropertyPlanRewriteFloors(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 17))
	fit, over := 0, 0
	for i := range 3000 {
		g := randomDAG(r, 2+r.IntN(7), 6)
		cap := 1 + r.Int64N(12)
		floors := map[EdgeKey]int64{}
		for _, e := range g.Edges() {
			if r.IntN(3) == 0 {
				floors[EdgeKey{e.From, e.To}] = 1 + r.Int64N(e.Attempts)
			}
		}
		p, err := PlanRewriteFloors(g, cap, nil, floors)
		if p == nil || (err != nil) != !p.Fits || (err != nil && !errors.Is(err, ErrNoRewriteFits)) {
			t.Fatalf("case %d: %v", i, err)
		}
		ones := map[EdgeKey]int64{}
		for k := range floors {
			ones[k] = 1
		}
		p1, _ := PlanRewriteFloors(g, cap, nil, ones)
		p0, _ := PlanRewrite(g, cap)
		if !maps.Equal(p1.Attempts, p0.Attempts) {
			t.Fatalf("case %d: floors of 1 plan %v, PlanRewrite %v", i, p1.Attempts, p0.Attempts)
		}
		carried := map[EdgeKey]int64{}
		atFloor := map[EdgeKey]int64{}
		for _, e := range g.Edges() {
			k := EdgeKey{e.From, e.To}
			if p.Attempts[k] > e.Attempts || p.Attempts[k] < 1 {
				t.Fatalf("case %d: %v planned %d, had %d", i, k, p.Attempts[k], e.Attempts)
			}
			carried[k] = max(p.Attempts[k], floors[k])
			atFloor[k] = max(floors[k], 1)
		}
		var wantOver []string
		ents := effectiveEntries(g)
		for _, ep := range ents {
			if amp, _ := brute(withAttempts(g, atFloor), []Entrypoint{ep}); amp > cap && !slices.Contains(wantOver, ep.Service) {
				wantOver = append(wantOver, ep.Service)
			}
		}
		if !slices.Equal(p.OverFloors, wantOver) {
			t.Fatalf("case %d: over floors %v, want %v (cap %d, edges %v, floors %v, entries %v)", i, p.OverFloors, wantOver, cap, g.Edges(), floors, ents)
		}
		if len(wantOver) > 0 {
			over++
			continue
		}
		fit++
		if amp, _ := brute(withAttempts(g, carried), ents); amp > cap {
			t.Fatalf("case %d: floors fit, but the plan carried gives %d > cap %d (plan %v, floors %v)", i, amp, cap, p.Attempts, floors)
		}
	}
	if fit < 300 || over < 300 {
		t.Fatalf("%d fitting, %d over the floors: the generator covers too little", fit, over)
	}
}

// effectiveEntries are g's entrypoints as the planner takes them (randomDAG's graphs: every
// service selected, no cycle): the explicit ones, else every service no edge goes into, once.
func effectiveEntries(g *Graph) []Entrypoint {
	if eps := g.Entrypoints(); len(eps) > 0 {
		return eps
	}
	called := map[string]bool{}
	for _, e := range g.Edges() {
		called[e.To] = true
	}
	var out []Entrypoint
	for _, s := range g.Services() {
		if s.Selected && !called[s.Name] {
			out = append(out, Entrypoint{Service: s.Name, ClientAttempts: 1})
		}
	}
	return out
}
