package graph

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

// shuffledDAG is a DAG whose edges are declared in random order (so paths run against
// declaration order as often as with it), with fan-out, ties (attempts 1..maxA) and sometimes
// explicit entrypoints: the cases where several edges share one worst path and the fused route
// must still list the path for the edge declared first.
func shuffledDAG(r *rand.Rand, n int, maxA int64) *Graph {
	type edge struct {
		from, to int
		a, c     int64
	}
	var edges []edge
	for i := range n {
		for j := i + 1; j < n; j++ {
			if r.IntN(100) < 25 {
				edges = append(edges, edge{i, j, 1 + r.Int64N(maxA), 1 + r.Int64N(3)})
			}
		}
	}
	r.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
	g := New()
	for _, i := range r.Perm(n) {
		if r.IntN(5) > 0 {
			g.AddService("s" + strconv.Itoa(i))
		}
	}
	for _, e := range edges {
		g.AddEdge("s"+strconv.Itoa(e.from), "s"+strconv.Itoa(e.to), e.a, e.c)
	}
	if r.IntN(2) == 0 {
		for range 1 + r.IntN(3) {
			g.SetEntrypoint("s"+strconv.Itoa(r.IntN(n)), 1+r.Int64N(3))
		}
	}
	return g
}

// The fused route (one forward pass collecting one candidate per distinct path, the planner's
// products alongside) gives exactly what the plain route gives (a pass per result, candidates
// deduplicated by comparing their paths, the planner's own pass).
func TestPropertyFusedMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 2000 {
		n := 2 + r.IntN(14)
		maxA := int64(1 + r.IntN(3))
		if i%10 == 0 {
			n = 40 + r.IntN(60) // more than MaxViolations distinct paths
		}
		g := shuffledDAG(r, n, maxA)
		cap := 1 + r.Int64N(10)
		got, want := analyze(g, cap, true), analyze(g, cap, false)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("graph %d (cap %d): fused\n%+v\nplain\n%+v", i, cap, got, want)
		}
	}
}

func TestFusedMatchesPlainOnBenchGraphs(t *testing.T) {
	for _, g := range []*Graph{benchGraph(1000), layeredGraph(1000, layers)} {
		for _, cap := range []int64{1, 4, 1000, Saturated} {
			if got, want := analyze(g, cap, true), analyze(g, cap, false); !reflect.DeepEqual(got, want) {
				t.Fatalf("cap %d: fused and plain differ", cap)
			}
		}
	}
}

// Analyze, Judge and the planners may run at once on one graph (the controller and the webhooks
// share graphs built from one cache): the adjacency is built on first use and the node arrays
// are recycled between calls, and neither may leak from one call into another.
func TestConcurrentReaders(t *testing.T) {
	g := layeredGraph(2000, layers)
	want := Analyze(g, 4)
	wantJ := Judge(g, 4, "svc-500")
	g.adj.Store(nil) // let the readers race to build it
	done := make(chan error)
	for w := range 4 {
		go func() {
			var err error
			for i := range 20 {
				if (w+i)%2 == 0 {
					if got := Analyze(g, 4); !reflect.DeepEqual(got, want) {
						err = fmt.Errorf("reader %d: Analyze differs", w)
					}
				} else if got := Judge(g, 4, "svc-500"); !reflect.DeepEqual(got, wantJ) {
					err = fmt.Errorf("reader %d: Judge differs", w)
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
