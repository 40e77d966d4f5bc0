package graph

import (
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used (user + system, all threads). The benchmarks
// report it per op next to wall time: the machines they run on are shared with other builds,
// and CPU time does not count the time spent waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports the CPU time per op as "cpu-ns/op".
func loop(b *testing.B, f func()) {
	b.ReportAllocs()
	start := cpuTime()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if n > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(n), "cpu-ns/op")
	}
}

// benchGraph is a random DAG of n services with 5 edges each on average (attempts 1..3), edges
// going to services up to 200 positions further, a few explicit entrypoints: the shape of a large
// mesh with long chains.
func benchGraph(n int) *Graph {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	g := New()
	names := make([]string, n)
	for i := range n {
		names[i] = "svc-" + strconv.Itoa(i)
		g.AddService(names[i])
	}
	for i := range n - 1 {
		for range 5 {
			j := i + 1 + r.IntN(min(200, n-1-i))
			g.AddEdge(names[i], names[j], 1+r.Int64N(3), 1+r.Int64N(2))
		}
	}
	for i := 0; i < n; i += max(n/10, 1) {
		g.SetEntrypoint(names[i], 2)
	}
	return g
}

// layeredGraph is a service graph shaped like real ones: n services in tiers of equal size
// (edge, gateways, domain services, ..., data stores), each service outside the last tier calling
// 5 or 6 services of the next tier (or, one call in five, the tier after it); attempts 1..3,
// calls 1..2. Every first-tier service is an entrypoint with 2 client attempts. So paths are at
// most tiers-1 hops long, as in a real mesh, where the random DAG's run to hundreds of hops.
func layeredGraph(n, tiers int) *Graph {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	g := New()
	names := make([]string, n)
	for i := range n {
		names[i] = "svc-" + strconv.Itoa(i)
		g.AddService(names[i])
	}
	size := n / tiers
	for i := range n - size {
		tier := i / size
		for range 5 + i%2 {
			next := tier + 1
			if r.IntN(5) == 0 && next+1 < tiers {
				next++
			}
			j := next*size + r.IntN(min(size, n-next*size))
			g.AddEdge(names[i], names[j], 1+r.Int64N(3), 1+r.Int64N(2))
		}
	}
	for i := range size {
		g.SetEntrypoint(names[i], 2)
	}
	return g
}

var sizes = []int{1000, 10000, 100000}

const layers = 10

func BenchmarkAnalyzeLayered(b *testing.B) {
	for _, n := range sizes {
		g := layeredGraph(n, layers)
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			loop(b, func() { Analyze(g, 4) })
			b.ReportMetric(float64(g.NumEdges()), "edges")
		})
	}
}

func BenchmarkBFSLayered(b *testing.B) {
	for _, n := range sizes {
		g := layeredGraph(n, layers)
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			loop(b, func() { g.BFS() })
			b.ReportMetric(float64(g.NumEdges()), "edges")
		})
	}
}

// BenchmarkAnalyzeCold is Analyze on a graph whose adjacency is not built yet, as the controller
// and the webhooks call it (a fresh graph each time): the adjacency's cost included.
func BenchmarkAnalyzeCold(b *testing.B) {
	for _, n := range sizes {
		g := benchGraph(n)
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			loop(b, func() {
				g.adj.Store(nil)
				Analyze(g, 4)
			})
			b.ReportMetric(float64(g.NumEdges()), "edges")
		})
	}
}

func BenchmarkAnalyze(b *testing.B) {
	for _, n := range sizes {
		g := benchGraph(n)
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			loop(b, func() { Analyze(g, 4) })
			b.ReportMetric(float64(g.NumEdges()), "edges")
		})
	}
}

func BenchmarkBFS(b *testing.B) {
	for _, n := range sizes {
		g := benchGraph(n)
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			loop(b, func() { g.BFS() })
			b.ReportMetric(float64(g.NumEdges()), "edges")
		})
	}
}

// BenchmarkAnalyzeVsBFS runs Analyze and the BFS alternately on the same graph and reports the
// fastest run of each and their ratio. On a machine shared with other builds, alternating keeps
// both under the same load, and the fastest run is the one least disturbed by it.
func BenchmarkAnalyzeVsBFS(b *testing.B) {
	for _, shape := range []struct {
		name string
		make func(int) *Graph
	}{
		{"random", benchGraph},
		{"layered", func(n int) *Graph { return layeredGraph(n, layers) }},
	} {
		for _, n := range sizes {
			g := shape.make(n)
			b.Run(shape.name+"/services="+strconv.Itoa(n), func(b *testing.B) {
				var bestA, bestB time.Duration
				for b.Loop() {
					t0 := time.Now()
					Analyze(g, 4)
					t1 := time.Now()
					g.BFS()
					t2 := time.Now()
					if a := t1.Sub(t0); bestA == 0 || a < bestA {
						bestA = a
					}
					if d := t2.Sub(t1); bestB == 0 || d < bestB {
						bestB = d
					}
				}
				b.ReportMetric(float64(bestA.Nanoseconds()), "analyze-min-ns")
				b.ReportMetric(float64(bestB.Nanoseconds()), "bfs-min-ns")
				b.ReportMetric(float64(bestA)/float64(bestB), "ratio")
			})
		}
	}
}

func TestLayeredGraphShape(t *testing.T) {
	g := layeredGraph(10000, layers)
	a := Analyze(g, 4)
	if g.NumEdges() < 45000 || g.NumEdges() > 50000 || g.BFS() < 9000 {
		t.Fatalf("edges %d reached %d", g.NumEdges(), g.BFS())
	}
	if len(a.Violations) != MaxViolations || !a.Bounded || len(a.WorstPath) > layers {
		t.Fatalf("violations %d, worst path %d hops", len(a.Violations), len(a.WorstPath))
	}
}

func TestBenchGraphShape(t *testing.T) {
	g := benchGraph(10000)
	if g.NumEdges() < 45000 || g.NumEdges() > 50000 || g.BFS() < 9000 {
		t.Fatalf("edges %d reached %d", g.NumEdges(), g.BFS())
	}
	if a := Analyze(g, 4); len(a.Violations) != MaxViolations || !a.Bounded {
		t.Fatalf("violations %d", len(a.Violations))
	}
}
