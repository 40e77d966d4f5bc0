package graph

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// bruteSimple enumerates every simple path (no service twice) from each entrypoint, one
// entrypoint at a time: the worst product, and the busiest service's load for one request at
// the entrypoint where it is largest.
func bruteSimple(g *Graph, ents []Entrypoint) (amp int64, load ServiceLoad) {
	for _, en := range ents {
		l := map[string]int64{}
		on := map[string]bool{}
		var walk func(v string, prod, ld int64)
		walk = func(v string, prod, ld int64) {
			on[v] = true
			amp = max(amp, prod)
			l[v] = add(l[v], ld)
			for _, e := range g.OutEdges(v) {
				if !on[e.To] {
					walk(e.To, mul(prod, e.Attempts), mul(ld, mul(e.Attempts, e.Calls)))
				}
			}
			on[v] = false
		}
		walk(en.Service, en.ClientAttempts, en.ClientAttempts)
		for s, x := range l {
			if x > load.Requests || x == load.Requests && s < load.Service {
				load = ServiceLoad{Service: s, Requests: x}
			}
		}
	}
	return amp, load
}

// On random graphs with cycles (retrying or not, no self-loops), the amplification and the
// worst load are those of the simple paths, exactly, and every cycle is named.
func TestPropertySimplePaths(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 5))
	withRetryCycle := 0
	for i := range 1500 {
		n := 3 + r.IntN(8)
		g := randomDAG(r, n, 3)
		for range 1 + r.IntN(3) {
			from := 1 + r.IntN(n-1)
			g.AddEdge(name(from), name(r.IntN(from)), 1+r.Int64N(3), 1+r.Int64N(2))
		}
		a := Analyze(g, 4)
		if !a.Bounded || a.AmplificationIsBound {
			t.Fatalf("graph %d: bounded %v, upper bound %v: a cycle without a self-loop is searched exactly", i, a.Bounded, a.AmplificationIsBound)
		}
		amp, load := bruteSimple(g, a.Entrypoints)
		if a.Amplification != amp {
			t.Fatalf("graph %d: amplification %d, simple paths give %d (%v)", i, a.Amplification, amp, g.Edges())
		}
		if a.WorstCaseLoad.Requests != load.Requests {
			t.Fatalf("graph %d: load %+v, simple paths give %+v", i, a.WorstCaseLoad, load)
		}
		if len(a.Cycles) == 0 && g.adjacency().order == nil {
			t.Fatalf("graph %d: a cycle, none named", i)
		}
		for _, c := range a.Cycles {
			if len(c.Cycle) < 3 || c.Cycle[0] != c.Cycle[len(c.Cycle)-1] {
				t.Fatalf("graph %d: cycle %v is not closed", i, c.Cycle)
			}
			withRetryCycle += map[bool]int{true: 1}[c.Retries]
		}
		if len(a.Chains) > 0 {
			checkPath(t, g, a.WorstPath, PathFactors(g, a.Chains[0].ClientAttempts, a.WorstPath), a.Amplification)
		}
	}
	if withRetryCycle < 300 {
		t.Fatalf("only %d retry cycles generated", withRetryCycle)
	}
}

// PathFactors is the client attempts then each edge's attempts along path.
func PathFactors(g *Graph, client int64, path []string) []int64 {
	f := []int64{client}
	for i := 0; i+1 < len(path); i++ {
		e, _ := g.Edge(path[i], path[i+1])
		f = append(f, e.Attempts)
	}
	return f
}

// The cases a reader meets: a cycle between two services with retries on both edges is named and
// bounded; a self-loop with retries is the one call loop; a ring larger than the exact search is
// an upper bound, said as such, and its load unbounded with the reason.
func TestCycleCases(t *testing.T) {
	t.Run("A calls B for one endpoint, B calls A for another", func(t *testing.T) {
		g := build([]string{"web", "a", "b"}, []e{{"web", "a", 2, 1}, {"a", "b", 3, 1}, {"b", "a", 3, 1}, {"b", "db", 2, 1}}, []ep{{"web", 1}})
		a := Analyze(g, 4)
		if !a.Bounded || a.Amplification != 12 || strings.Join(a.WorstPath, ">") != "web>a>b>db" {
			t.Fatalf("bounded %v amplification %d path %v, want 12 along web>a>b>db", a.Bounded, a.Amplification, a.WorstPath)
		}
		if len(a.Cycles) != 1 || strings.Join(a.Cycles[0].Cycle, ">") != "a>b>a" || !a.Cycles[0].Retries || !a.Cycles[0].Exact {
			t.Fatalf("cycles %+v", a.Cycles)
		}
		if a.WorstCaseLoad != (ServiceLoad{Service: "db", Requests: 12}) || a.LoadUnbounded != "" {
			t.Fatalf("load %+v (%q)", a.WorstCaseLoad, a.LoadUnbounded)
		}
		if len(a.Violations) != 1 || a.Violations[0].Message != "client -x1-> web -x2-> a -x3-> b -x2-> db = 12 > cap 4" || a.Violations[0].Suggestion != "a: b=1" {
			t.Fatalf("violations %+v", a.Violations)
		}
	})
	t.Run("self-loop with retries", func(t *testing.T) {
		g := build([]string{"web", "a"}, []e{{"web", "a", 1, 1}, {"a", "a", 2, 1}}, []ep{{"web", 1}})
		a := Analyze(g, 4)
		if a.Bounded || strings.Join(a.Cycle, ">") != "a>a" || a.LoadUnbounded != "a calls itself with 2 attempts: a request can go round without end" {
			t.Fatalf("bounded %v cycle %v load why %q", a.Bounded, a.Cycle, a.LoadUnbounded)
		}
	})
	t.Run("self-loop without retries: load unbounded, said why", func(t *testing.T) {
		g := build([]string{"web", "a"}, []e{{"web", "a", 2, 1}, {"a", "a", 1, 1}}, []ep{{"web", 1}})
		a := Analyze(g, 4)
		if !a.Bounded || a.Amplification != 2 || a.WorstCaseLoad.Requests != Saturated || a.LoadUnbounded != "a calls itself: a request can go round without end" {
			t.Fatalf("bounded %v amplification %d load %+v why %q", a.Bounded, a.Amplification, a.WorstCaseLoad, a.LoadUnbounded)
		}
	})
	t.Run("a ring larger than the exact search", func(t *testing.T) {
		n := MaxExactComponent + 2
		var es []e
		names := []string{"web"}
		for i := range n {
			names = append(names, "r"+strconv.Itoa(i))
			es = append(es, e{"r" + strconv.Itoa(i), "r" + strconv.Itoa((i+1)%n), 2, 1}, e{"r" + strconv.Itoa(i), "r" + strconv.Itoa((i+2)%n), 1, 1})
		}
		es = append(es, e{"web", "r0", 1, 1})
		a := Analyze(build(names, es, []ep{{"web", 1}}), 4)
		if !a.Bounded || !a.AmplificationIsBound || a.Amplification != 1<<(n-1) {
			t.Fatalf("bounded %v upper bound %v amplification %d, want the bound 2^%d", a.Bounded, a.AmplificationIsBound, a.Amplification, n-1)
		}
		if len(a.Cycles) != 1 || a.Cycles[0].Exact || len(a.Cycles[0].Services) != n {
			t.Fatalf("cycles %+v", a.Cycles)
		}
		if !strings.Contains(a.Violations[0].Message, "(at most: an upper bound: the cycle through r0 has 18 services, more than retrycap searches exactly (16 services, 65536 path steps))") {
			t.Fatalf("violation %q", a.Violations[0].Message)
		}
		if a.WorstCaseLoad.Requests != Saturated || !strings.HasPrefix(a.LoadUnbounded, "the cycle through r") {
			t.Fatalf("load %+v why %q", a.WorstCaseLoad, a.LoadUnbounded)
		}
	})
}

// TestPlanAllowMatchesPlanRewrite checks that the violations' suggestions on a graph with a
// cycle (planAllow and plannedWith, made only for the slots listed) plan what planRewrite plans
// for every slot, on random graphs with cycles and random entrypoints and caps.
func TestPlanAllowMatchesPlanRewrite(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 11))
	checked := 0
	for i := range 800 {
		n := 3 + r.IntN(12)
		g := randomDAG(r, n, 4)
		for range 1 + r.IntN(4) {
			from := 1 + r.IntN(n-1)
			g.AddEdge(name(from), name(r.IntN(from)), 1+r.Int64N(3), 1)
		}
		if r.IntN(2) == 0 {
			g.SetEntrypoint(name(r.IntN(n)), 1+r.Int64N(3))
		}
		c := newCore(g, nil)
		if c.cyc == nil {
			c.release()
			continue
		}
		cap := 1 + r.Int64N(20)
		want, _, _ := c.planRewrite(cap, false)
		allow := c.planAllow(cap)
		for s := range int32(len(want)) {
			if got := c.plannedWith(allow, s); got != want[s] {
				t.Fatalf("graph %d, cap %d: %s -> %s planned %d, planRewrite %d (%v)", i, cap,
					g.names[c.adj.from[s]], g.names[c.adj.to[s]], got, want[s], g.Edges())
			}
		}
		c.release()
		checked++
	}
	if checked < 500 {
		t.Fatalf("only %d graphs with a cycle", checked)
	}
}
