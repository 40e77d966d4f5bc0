package telemetry

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/graph"
)

// The scale: 5,000 services, 20,000 observed edges (half of them declared, 10,000
// declared in all). Edges go from a lower to a higher index: no cycle.
const benchServices, benchObserved = 5000, 20000

func benchEdge(i int) (string, string) {
	from := i % benchServices
	to := (from + 1 + (i/benchServices)*7 + i%13) % benchServices
	if to <= from {
		from, to = to, from
	}
	if to == from {
		to = from + 1
	}
	return fmt.Sprintf("s%04d", from), fmt.Sprintf("s%04d", to)
}

func benchGraph() *graph.Graph {
	g := graph.New()
	for i := range benchServices {
		g.AddService(fmt.Sprintf("s%04d", i))
	}
	for i := 0; i < benchObserved; i += 2 {
		f, t := benchEdge(i)
		g.AddEdge(f, t, 2, 1)
	}
	return g
}

func benchSnapshot() Snapshot {
	s := Snapshot{Window: 5 * time.Minute, At: t0, Sources: []string{"istio"}}
	for i := range benchObserved {
		f, t := benchEdge(i)
		s.Edges = append(s.Edges, NodeEdge{f, t, float64(i%100) + 0.5})
	}
	return s
}

// BenchmarkStatusDeclaredOnly is the anchor: the graph built and analysed without telemetry.
func BenchmarkStatusDeclaredOnly(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		graph.Analyze(benchGraph(), 1000)
	}
}

// BenchmarkStatusWithTelemetry adds what telemetry costs a reconcile: the comparison, the
// undeclared edges put into the graph, the analysis of declared plus observed.
func BenchmarkStatusWithTelemetry(b *testing.B) {
	s := benchSnapshot()
	b.ReportAllocs()
	for b.Loop() {
		g := benchGraph()
		gs := CompareGraph(g, s)
		_ = GraphCondition(gs, 1)
		AddUndeclared(g, s, nil)
		graph.Analyze(g, 1000)
	}
}

// BenchmarkRead20000 reads one query's answer of 20,000 Istio edges (source and destination
// reporters: 40,000 series) into an observation.
func BenchmarkRead20000(b *testing.B) {
	var v model.Vector
	for i := range benchObserved {
		f, t := benchEdge(i)
		v = append(v, istio("source", f, "shop", t, "shop", 60), istio("destination", f, "shop", t, "shop", 120))
	}
	a := []Answer{answer("istio_requests_total", v...)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(a, Options{Window: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead20000Checked is BenchmarkRead20000's answer checked where it was decoded
// (internal/promquery's path): Read reads it without checking it again.
func BenchmarkRead20000Checked(b *testing.B) {
	var v model.Vector
	for i := range benchObserved {
		f, t := benchEdge(i)
		v = append(v, istio("source", f, "shop", t, "shop", 60), istio("destination", f, "shop", t, "shop", 120))
	}
	c, err := CheckVector(v)
	if err != nil {
		b.Fatal(err)
	}
	a := []Answer{CheckedAnswer(answer("istio_requests_total").Query, c)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(a, Options{Window: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}
