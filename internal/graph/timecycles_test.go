package graph

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// bruteTimeSimple is the worst time from v over the chains that visit a service once: the
// maximal simple paths from v (a chain ends where every call would return), each timed by
// pathTime (its last service's own time unknown).
func bruteTimeSimple(g *Graph, path []string, k int64) int64 {
	v := path[len(path)-1]
	worst := int64(-1)
	for _, ed := range g.OutEdges(v) {
		if slices.Contains(path, ed.To) {
			continue
		}
		worst = max(worst, bruteTimeSimple(g, append(slices.Clone(path), ed.To), k))
	}
	if worst < 0 {
		return pathTime(g, path, k)
	}
	return worst
}

// randomTimedCyclic is a random DAG with back edges (cycles, no self-loops) and random layers.
func randomTimedCyclic(r *rand.Rand) *Graph {
	n := 3 + r.IntN(7)
	g := randomDAG(r, n, 3)
	for range 1 + r.IntN(3) {
		from := 1 + r.IntN(n-1)
		g.AddEdge(name(from), name(r.IntN(from)), 1+r.Int64N(3), 1)
	}
	for _, ed := range g.Edges() {
		if r.IntN(6) == 0 {
			continue
		}
		h := Hop{randomLayer(r)}
		if r.IntN(3) == 0 {
			h = append(h, randomLayer(r))
		}
		g.SetHop(ed.From, ed.To, h)
	}
	return g
}

// TestAnalyzeTimeSimplePaths checks AnalyzeTime on random graphs with cycles against brute
// force over the chains that visit a service once: each chain's time, and the path it names
// takes that time; nothing is an upper bound (the components are small).
func TestAnalyzeTimeSimplePaths(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 31))
	cyclic := 0
	for iter := range 600 {
		g := randomTimedCyclic(r)
		ta := AnalyzeTime(g, 0)
		if ta.UpperBound {
			t.Fatalf("iter %d: an upper bound on a small graph", iter)
		}
		if g.adjacency().order == nil {
			cyclic++
		}
		for _, ch := range ta.Chains {
			want := bruteTimeSimple(g, []string{ch.Entrypoint}, ch.ClientAttempts)
			if int64(ch.Time) != want {
				t.Fatalf("iter %d: %s: %v, simple chains give %v (%v)", iter, ch.Entrypoint, ch.Time, time.Duration(want), g.Edges())
			}
			seen := map[string]bool{}
			for _, v := range ch.Path {
				if seen[v] {
					t.Fatalf("iter %d: chain %v visits %s twice", iter, ch.Path, v)
				}
				seen[v] = true
			}
			if got := pathTime(g, ch.Path, ch.ClientAttempts); got != want {
				t.Fatalf("iter %d: %s: path %v takes %v, chain says %v", iter, ch.Entrypoint, ch.Path, time.Duration(got), ch.Time)
			}
		}
	}
	if cyclic < 250 {
		t.Fatalf("only %d graphs with a cycle", cyclic)
	}
}
