package graph

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// cyclicLayered is layeredGraph(n) with one edge in every 25 from an even tier answered by a call
// back (callee to caller, 2 attempts): small retry cycles across the mesh, as where A calls B for
// one endpoint and B calls A for another.
func cyclicLayered(n int) (*Graph, *Graph) {
	base := layeredGraph(n, layers)
	g := New()
	for _, s := range base.Services() {
		if s.Selected {
			g.AddService(s.Name)
		}
	}
	for i, e := range base.Edges() {
		g.AddEdge(e.From, e.To, e.Attempts, e.Calls)
		if i%25 == 0 && tier(e.From, n)%2 == 0 {
			g.AddEdge(e.To, e.From, 2, 1)
		}
	}
	for _, ep := range base.Entrypoints() {
		g.SetEntrypoint(ep.Service, ep.ClientAttempts)
	}
	return base, g
}

// BenchmarkAnalyzeCycles is Analyze on the 10k-service layered graph with retry cycles (the
// simple-path search of cycles.go), next to the same graph without the calls back (today's
// analysis of an acyclic graph, the anchor: before cycles.go a retry cycle ended the analysis at
// once with "unbounded").
func BenchmarkAnalyzeCycles(b *testing.B) {
	base, g := cyclicLayered(10000)
	a := Analyze(g, 4)
	b.Logf("cycles: %d, bounded %v, upper bound %v", len(a.Cycles), a.Bounded, a.AmplificationIsBound)
	b.Run("acyclic", func(b *testing.B) { loop(b, func() { Analyze(base, 4) }) })
	b.Run("cycles", func(b *testing.B) { loop(b, func() { Analyze(g, 4) }) })
}

// BenchmarkAnalyzeCyclesRatio runs the two analyses of BenchmarkAnalyzeCycles alternately and
// reports the fastest run of each and their ratio (target: at most 2), as BenchmarkAnalyzeVsBFS
// does: on a machine shared with other builds, alternating keeps both under the same load.
// "warm" analyses the same graphs again (what the adjacency keeps, Kahn's order or the
// components and what depends only on the edges, is reused, as for a policy analysed again
// after an attempts-only change); "cold" drops the adjacency before each analysis, as for a
// graph built afresh (the controller's and the webhooks' builds).
func BenchmarkAnalyzeCyclesRatio(b *testing.B) {
	base, g := cyclicLayered(10000)
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			var bestA, bestC time.Duration
			for b.Loop() {
				if cold {
					base.adj.Store(nil)
					g.adj.Store(nil)
				}
				t0 := time.Now()
				Analyze(base, 4)
				t1 := time.Now()
				Analyze(g, 4)
				t2 := time.Now()
				if d := t1.Sub(t0); bestA == 0 || d < bestA {
					bestA = d
				}
				if d := t2.Sub(t1); bestC == 0 || d < bestC {
					bestC = d
				}
			}
			b.ReportMetric(float64(bestA.Nanoseconds()), "acyclic-min-ns")
			b.ReportMetric(float64(bestC.Nanoseconds()), "cycles-min-ns")
			b.ReportMetric(float64(bestC)/float64(bestA), "ratio")
		})
	}
}

func tier(name string, n int) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "svc-"))
	return i / (n / layers)
}
